"""Which voice speaks a reply with ``--llm-audio-out``: the server's own, when its audio comes
(vllm-omni's Talker, OpenAI's audio output), else the local one (a server that answered in
text only). Pure and synchronous: the time is passed in.

The reply's clauses are held while the voice is undecided: the first audio piece picks the
server (the held text is its caption, not spoken twice); the end of the reply's text stream,
or :data:`AUDIO_WAIT_S` after its first clause with no audio yet, picks the local voice and
releases the held clauses to it. Once picked, a reply keeps its voice (audio that comes after
the local voice started is dropped, so two voices never overlap).
"""

from __future__ import annotations

from enum import Enum

#: how long a clause waits for the server's audio before the local voice says it (vllm-omni
#: streams the Thinker's text first and the Talker's audio a few hundred ms behind)
AUDIO_WAIT_S = 1.5


class Voice(Enum):
    UNDECIDED = "undecided"
    SERVER = "server"
    LOCAL = "local"


class VoicePick:
    """One reply's choice of voice (see the module docstring)."""

    def __init__(self, server_may_speak: bool, wait_s: float = AUDIO_WAIT_S) -> None:
        self.voice = Voice.UNDECIDED if server_may_speak else Voice.LOCAL
        self.wait_s = wait_s
        self._held: list[str] = []
        self._first_at_s: float | None = None
        self.dropped_audio = 0  # server audio pieces after the local voice was picked

    def clauses(self, clauses: list[str], now_s: float) -> list[str]:
        """New clauses of the reply's text: those the local voice says now."""
        if self.voice is Voice.LOCAL:
            return clauses
        if self.voice is Voice.SERVER:
            return []
        self._held += clauses
        if self._held and self._first_at_s is None:
            self._first_at_s = now_s
        if self._first_at_s is not None and now_s - self._first_at_s >= self.wait_s:
            return self._pick_local()
        return []

    def audio(self) -> bool:
        """A piece of the server's audio came: whether it is played."""
        if self.voice is Voice.LOCAL:
            self.dropped_audio += 1
            return False
        self.voice, self._held = Voice.SERVER, []
        return True

    def end(self) -> list[str]:
        """The reply's text is complete: the clauses still held go to the local voice
        (none when the server speaks)."""
        return self._pick_local() if self.voice is Voice.UNDECIDED else []

    def _pick_local(self) -> list[str]:
        self.voice = Voice.LOCAL
        held, self._held = self._held, []
        return held
