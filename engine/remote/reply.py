"""One reply of a model server as the front-end follows it: its gate (the first sound
stamped once, what the caller heard), the audio delivered and the text, so that a reply cut
short can be told to the server (``conversation.item.truncate``) and remembered as heard.
Pure bookkeeping: the session (:mod:`omnicall.engine.remote.session`) feeds it."""

from __future__ import annotations

from dataclasses import dataclass

from omnicall.engine import realtime as rt
from omnicall.engine.conversation.reply_gate import ReplyGate


@dataclass
class RemoteReply:
    turn_id: int
    gate: ReplyGate  # the first sound stamped once; what the caller heard
    response_id: str = ""
    item_id: str = ""
    text: str = ""
    delivered_samples: int = 0  # at the wire rate (24 kHz)
    first_text: bool = True

    def delivered_ms(self) -> int:
        return self.delivered_samples * 1000 // rt.WIRE_RATE_HZ

    def played_ms(self) -> int:
        """What the caller has heard of the reply's audio, now (whole milliseconds)."""
        return min(self.delivered_ms(), self.gate.heard_ms())

    def played_text(self, played_ms: int) -> str:
        """The words of the reply in its first ``played_ms`` of sound (in proportion)."""
        if not self.delivered_samples:
            return ""
        share = played_ms / (self.delivered_samples * 1000 / rt.WIRE_RATE_HZ)
        words = self.text.split()
        return " ".join(words[:int(len(words) * min(1.0, share))])
