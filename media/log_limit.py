"""Bounded logging of what clients send: no client can make the server write much.

``clip`` shortens any value a client controls before it reaches a log line; a
:class:`LogLimiter` lets a call log a kind of event a few times, then once more to say the
rest are counted, not logged. Pure bookkeeping (the clock is passed in).
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field

CLIP_CHARS = 80
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 2, CLIP_CHARS, CLIP_CHARS, 40
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = 4


def clip(value: object) -> str:
    """A short ``repr`` of a client-controlled value (long strings and deep nesting cut)."""
    text = _REPR.repr(value)
    return text if len(text) <= 2 * CLIP_CHARS else text[:2 * CLIP_CHARS] + "..."


@dataclass
class LogLimiter:
    """Allows ``per_window`` log lines per key in each ``window_s``; counts the others."""

    per_window: int = 5
    window_s: float = 60.0
    suppressed: int = 0
    _windows: dict[str, tuple[float, int]] = field(default_factory=dict)

    def allow(self, key: str, now_s: float) -> bool:
        start, count = self._windows.get(key, (now_s, 0))
        if now_s - start >= self.window_s:
            start, count = now_s, 0
        count += 1
        if len(self._windows) >= 64 and key not in self._windows:
            self._windows.clear()  # bounded: a client inventing keys resets the table
        self._windows[key] = (start, count)
        if count <= self.per_window:
            return True
        self.suppressed += 1
        return False

    def last_allowed(self, key: str) -> bool:
        """True right after the final allowed line of a window (say the rest are muted)."""
        return self._windows.get(key, (0.0, 0))[1] == self.per_window


def worth_logging(count: int, first: int = 3, every: int = 1000) -> bool:
    """For a repeated event counted in ``count`` (1-based): the first few, then every
    ``every``-th (the counters say how many in between)."""
    return count <= first or count % every == 0
