"""Calls that dropped (network change, vanished peer) keep their engine session - and with it
the conversation - for a resume window, so the page can reconnect and go on.

Pure bookkeeping: the caller closes the sessions this hands back (expired or pushed out).
Only calls that ended without a hangup are parked; at most ``max_parked`` at a time.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from omnicall.engine.base import EngineSession
from omnicall.media.playout import PlayoutMeter

PARKABLE_REASONS = frozenset({"peer_failed", "peer_closed", "media_timeout", "replaced",
                              "bad_resume_offer"})


def parked_meter(session: EngineSession | None) -> PlayoutMeter | None:
    """The playout meter a parked engine session was opened with: its options cannot change,
    so the call that resumes it measures into that meter instead of a new one."""
    meter = getattr(getattr(session, "options", None), "playout", None)
    return meter if isinstance(meter, PlayoutMeter) else None


@dataclass
class _Parked:
    session: EngineSession
    expires_s: float


class ParkedCalls:
    def __init__(self, window_s: float, max_parked: int) -> None:
        self.window_s = window_s
        self.max_parked = max_parked
        self._parked: OrderedDict[str, _Parked] = OrderedDict()

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, call_id: str, session: EngineSession, now_s: float) -> list[EngineSession]:
        """Keep ``session``; returns sessions to close now (none kept, or the oldest)."""
        if self.window_s <= 0 or self.max_parked <= 0:
            return [session]
        self._parked[call_id] = _Parked(session, now_s + self.window_s)
        out = []
        while len(self._parked) > self.max_parked:
            out.append(self._parked.popitem(last=False)[1].session)
        return out

    def take(self, call_id: str) -> EngineSession | None:
        parked = self._parked.pop(call_id, None)
        return None if parked is None else parked.session

    def expired(self, now_s: float) -> list[EngineSession]:
        gone = [key for key, p in self._parked.items() if p.expires_s <= now_s]
        return [self._parked.pop(key).session for key in gone]

    def drain(self) -> list[EngineSession]:
        out = [p.session for p in self._parked.values()]
        self._parked.clear()
        return out
