"""The server's calls: the live ones (:class:`LiveCalls`, bounded), the timeouts each call
keeps (:class:`SessionTimeouts`), and the parked ones.

Calls that dropped (network change, vanished peer) keep their engine session - and with it
the conversation - for a resume window, so the page can reconnect and go on.

A parked call is its engine session and the playout meter that session reads
(:class:`ParkedCall`): the session's options cannot change, so the call that resumes it
measures its replies into that meter, and the engine's barge-ins reach the new call's output
through it (:meth:`omnicall.media.playout.PlayoutMeter.attach`).

Pure bookkeeping: the caller closes the sessions this hands back (expired or pushed out).
Only calls that ended without a hangup are parked; at most ``max_parked`` at a time.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

from omnicall.engine.base import EngineSession
from omnicall.media.playout import PlayoutMeter


class LiveCall(Protocol):
    """What the server does with a live call (a WebRTC call or a Realtime connection)."""

    id: str
    close_reason: str

    def send(self, message: dict[str, Any]) -> bool: ...

    async def close(self) -> None: ...


class LiveCalls:
    """Live calls, bounded by ``max_sessions``."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[str, LiveCall] = {}
        self.total_opened = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def add(self, session: LiveCall) -> None:
        self.sessions[session.id] = session
        self.total_opened += 1

    def remove(self, session: LiveCall) -> None:
        self.sessions.pop(session.id, None)


@dataclass
class SessionTimeouts:
    media_timeout_s: float = 3.5  # connected, but no audio packets this long -> peer gone
    connect_timeout_s: float = 30.0  # never connected -> close
    stats_interval_s: float = 1.0
    reply_timeout_s: float = 20.0  # an assistant reply with no engine event this long: stalled
    network_interval_s: float = 5.0  # WebRTC stats -> network quality histograms


PARKABLE_REASONS = frozenset({"peer_failed", "peer_closed", "media_timeout", "replaced",
                              "bad_resume_offer"})


@dataclass(frozen=True)
class ParkedCall:
    """What a dropped call leaves for its resume."""

    engine_session: EngineSession  # the conversation
    meter: PlayoutMeter  # what the engine session reads of its replies' playout


@dataclass
class _Parked:
    call: ParkedCall
    expires_s: float


class ParkedCalls:
    def __init__(self, window_s: float, max_parked: int) -> None:
        self.window_s = window_s
        self.max_parked = max_parked
        self._parked: OrderedDict[str, _Parked] = OrderedDict()

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, call_id: str, call: ParkedCall, now_s: float) -> list[EngineSession]:
        """Keep ``call``; returns engine sessions to close now (none kept, or the oldest)."""
        if self.window_s <= 0 or self.max_parked <= 0:
            return [call.engine_session]
        self._parked[call_id] = _Parked(call, now_s + self.window_s)
        out = []
        while len(self._parked) > self.max_parked:
            out.append(self._parked.popitem(last=False)[1].call.engine_session)
        return out

    def take(self, call_id: str) -> ParkedCall | None:
        parked = self._parked.pop(call_id, None)
        return None if parked is None else parked.call

    def expired(self, now_s: float) -> list[EngineSession]:
        gone = [key for key, p in self._parked.items() if p.expires_s <= now_s]
        return [self._parked.pop(key).call.engine_session for key in gone]

    def drain(self) -> list[EngineSession]:
        out = [p.call.engine_session for p in self._parked.values()]
        self._parked.clear()
        return out
