"""Whether a call goes on: decided once a stats tick from times alone (no I/O).

A call is closed when it never connects within ``connect_timeout_s``, or when it is connected
but no audio packet came for ``media_timeout_s`` (a client that vanished without a goodbye).
An assistant reply with no engine event for ``reply_timeout_s`` has stalled: it is cancelled,
the page is told (:meth:`CallWatchdog.stall_messages`), and the call goes on. WebRTC stats
are sampled for the network-quality histograms every ``network_interval_s``.

The session's watchdog task (one per call, owned by its ``TaskOwner``) sleeps between ticks
and acts on what this core decides.
"""

from __future__ import annotations

from typing import Any

from omnicall.app.call.messages import event_message
from omnicall.app.calls import SessionTimeouts
from omnicall.engine.events import EngineEvent, TurnEvent

STALL_MESSAGE = "the assistant stopped answering; please ask again"


class CallWatchdog:
    """The call's clocks: when it started, its last audio and engine event, the open reply."""

    def __init__(self, timeouts: SessionTimeouts, now_s: float) -> None:
        self.timeouts = timeouts
        self.started_s = now_s
        self.last_engine_event_s = now_s
        self.reply_open: int | None = None  # turn id of an assistant reply in progress
        self.stalls = 0

    def start(self, now_s: float) -> None:
        """The offer was answered: the connect timeout counts from here."""
        self.started_s = now_s

    def engine_event(self, event: EngineEvent, now_s: float) -> None:
        """Any engine event is progress; an assistant turn opens or closes the reply."""
        self.last_engine_event_s = now_s
        if isinstance(event, TurnEvent) and event.role == "assistant":
            self.reply_open = event.turn_id if event.phase == "start" else None

    def close_reason(self, now_s: float, connected: bool, last_audio_s: float) -> str | None:
        """``connect_timeout`` / ``media_timeout`` when the call should end now, else None."""
        if not connected and now_s - self.started_s > self.timeouts.connect_timeout_s:
            return "connect_timeout"
        if connected and now_s - max(last_audio_s, self.started_s) > \
                self.timeouts.media_timeout_s:
            return "media_timeout"
        return None

    def quiet_s(self, now_s: float) -> float:
        """Since the engine's last event."""
        return now_s - self.last_engine_event_s

    def stalled_reply(self, now_s: float, playing: bool = False) -> int | None:
        """The open reply's turn id when it has stalled (it is closed here, counted).
        ``playing``: its sound is still going out (a long reply made long ago, a kiosk's
        welcome): that is progress, not a stall."""
        if playing:
            self.last_engine_event_s = now_s
        if self.reply_open is None or self.quiet_s(now_s) <= self.timeouts.reply_timeout_s:
            return None
        turn_id, self.reply_open = self.reply_open, None
        self.stalls += 1
        return turn_id

    def network_due(self, now_s: float, sampled_at_s: float, connected: bool) -> bool:
        return connected and now_s - sampled_at_s >= self.timeouts.network_interval_s

    @staticmethod
    def stall_messages(turn_id: int) -> list[dict[str, Any]]:
        """What the page hears of a stalled reply: an error it can recover from, and the
        reply's end (cut short)."""
        end = event_message(TurnEvent("assistant", "end", turn_id, interrupted=True))
        assert end is not None
        return [{"type": "error", "recoverable": True, "message": STALL_MESSAGE}, end]
