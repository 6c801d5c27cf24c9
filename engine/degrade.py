"""The degrade ladder: when answers get slow, answer lighter instead of falling over.

Pure and synchronous: fed each turn's time to first token (TTFT), it keeps a rolling window
and moves between levels with hysteresis:

- ``NORMAL``: everything on.
- ``TEXT_FIRST``: rolling P95 TTFT above ``text_first_p95_s`` (seed: 300 ms): new turns are
  answered in captions and the Talker is paused.
- ``FALLBACK``: P95 above ``fallback_p95_s`` (seed: 500 ms): new turns go to the lighter
  fallback engine configuration.

It escalates as soon as the P95 crosses a threshold (with at least ``min_turns`` samples), and
steps down one level only when the P95 has fallen below ``recover_ratio`` x that level's
threshold, measured on turns answered *at the lower load* (the window restarts at every
transition), so it does not flap.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass


class Level(enum.IntEnum):
    NORMAL = 0
    TEXT_FIRST = 1
    FALLBACK = 2


@dataclass(frozen=True)
class LadderConfig:
    text_first_p95_s: float = 0.3
    fallback_p95_s: float = 0.5
    recover_ratio: float = 0.8
    window_turns: int = 20
    min_turns: int = 20  # fewer samples make the "P95" the slowest turn: one outlier would move it


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


class DegradeLadder:
    def __init__(self, config: LadderConfig | None = None) -> None:
        self.config = config or LadderConfig()
        self.level = Level.NORMAL
        self._window: deque[float] = deque(maxlen=self.config.window_turns)
        self.transitions = 0

    def _threshold(self, level: Level) -> float:
        return {Level.TEXT_FIRST: self.config.text_first_p95_s,
                Level.FALLBACK: self.config.fallback_p95_s}[level]

    def observe(self, ttft_s: float) -> Level | None:
        """Add one turn's TTFT; returns the new level when it changed."""
        self._window.append(max(0.0, ttft_s))
        if len(self._window) < self.config.min_turns:
            return None
        now = p95(list(self._window))
        target = self.level
        if now > self.config.fallback_p95_s:
            target = Level.FALLBACK
        elif now > self.config.text_first_p95_s:
            target = max(self.level, Level.TEXT_FIRST)
        if target == self.level and self.level != Level.NORMAL and \
                now < self._threshold(self.level) * self.config.recover_ratio:
            target = Level(self.level - 1)
        if target == self.level:
            return None
        self.level = target
        self.transitions += 1
        self._window.clear()
        return target
