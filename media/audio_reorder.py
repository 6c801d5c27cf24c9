"""Adaptive receive reorder buffer for incoming audio packets (pure, synchronous, I/O free).

The server never plays the caller's audio: it is transcribed, so what matters is that every
packet is used and in order, not that packets are evenly spaced. So this buffer adds no delay
while packets come in order: each is released the moment it arrives. Only when one is missing
(a later packet arrived first) does it hold the later ones, waiting up to ``target_s`` (from
the moment the gap was seen) for the missing packet: when it comes, everything is released in
order; when it does not, the buffer gives up on it (``skipped``) and releases the rest, and
the decoder rebuilds it from the next packet's FEC or conceals it (PLC). A packet that comes
after its gap was given up on is ``late`` and dropped (its place is already filled).

The wait adapts to the network (like WebRTC's NetEq, but only spent on gaps): each packet's
transit (arrival time minus its RTP timestamp in seconds) goes into a window of the last
``window_packets``; the wait needed is the spread of those transits (its ``quantile`` minus
its minimum: how much later than the fastest packets a slow one arrives), bounded to
``[min_s, max_s]``. It grows at once when the spread grows and shrinks back at
``shrink_s_per_s`` when the network calms (the window also forgets: ~2 s), so a calm call
goes back to waiting (almost) nothing for a lost packet.

Bounded: at most ``capacity`` packets held; one more gives up on the oldest gap (overflow
policy: release, never drop what arrived). Sequence numbers are 16-bit RTP ones (unwrapped
here); a jump of more than ``MAX_MISORDER`` either way resyncs (held packets released).
Time is the caller's clock (``now_s``): the shell calls :meth:`poll` at :meth:`deadline`.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_MISORDER = 100  # packets: further than this either way is a new stream, not reordering
MAX_TRANSIT_STEP_S = 1.0  # one packet's transit this far from the last one: timestamps jumped
_UINT16 = 1 << 16
_UINT32 = 1 << 32


@dataclass(frozen=True)
class ReorderSettings:
    min_s: float = 0.0  # never wait less than this for a missing packet
    max_s: float = 0.12  # nor more (beyond ~120 ms FEC/PLC does better than waiting)
    window_packets: int = 100  # transits measured (2 s of 20 ms packets)
    quantile: float = 0.95  # of the transit spread: the late packets worth waiting for
    shrink_s_per_s: float = 0.04  # how fast the wait falls back once the network calms
    capacity: int = 50  # packets held at most (1 s of 20 ms packets)
    clock_rate: int = 48_000  # RTP timestamp units per second (Opus)

    def __post_init__(self) -> None:
        if not 0 <= self.min_s <= self.max_s <= 1.0:
            raise ValueError(f"need 0 <= min_s <= max_s <= 1 s, got {self.min_s}, {self.max_s}")
        if self.window_packets < 2 or self.capacity < 1 or self.clock_rate <= 0:
            raise ValueError("window_packets >= 2, capacity >= 1 and clock_rate > 0 needed")
        if not 0 < self.quantile <= 1 or self.shrink_s_per_s < 0:
            raise ValueError("0 < quantile <= 1 and shrink_s_per_s >= 0 needed")


class AdaptiveReorderBuffer(Generic[T]):
    """Packets in (any order) -> packets out (in sequence order), waiting only on gaps."""

    def __init__(self, settings: ReorderSettings | None = None) -> None:
        self.settings = settings or ReorderSettings()
        self.target_s = self.settings.min_s
        self._next: int | None = None  # unwrapped sequence number expected next
        self._held: dict[int, tuple[T, float]] = {}  # seq -> (item, arrival)
        self._ts_origin: int | None = None
        self._ts_last = 0  # unwrapped RTP timestamp of the latest packet
        self._transits: deque[float] = deque()  # arrival order, for forgetting
        self._sorted: list[float] = []  # the same, sorted, for the quantile
        self._updated_s: float | None = None
        self.released = 0
        self.reordered = 0  # arrived after a later packet, still in time: used
        self.late = 0  # arrived after its gap was given up on: dropped
        self.duplicates = 0
        self.skipped = 0  # missing packets given up on (lost, or later than the wait)
        self.resyncs = 0
        self.overflows = 0
        self.held_max = 0

    # -- input -----------------------------------------------------------------------------

    def push(self, seq: int, timestamp: int, item: T, now_s: float) -> list[T]:
        """One packet arrived at ``now_s``: the packets now released, in order."""
        out: list[T] = []
        if self._next is None:
            self._next = seq
        delta = (seq - self._next) % _UINT16
        ahead = delta - _UINT16 if delta >= _UINT16 // 2 else delta
        if ahead < -MAX_MISORDER or ahead > MAX_MISORDER:  # a new stream: start over
            self.resyncs += 1
            resume = self._next + ahead
            out += self._flush()
            self._next, ahead = resume, 0
            self._forget()
        self._measure(timestamp, now_s)
        if ahead < 0:
            self.late += 1
            return out + self._expire(now_s)
        unwrapped = self._next + ahead
        if unwrapped in self._held:
            self.duplicates += 1
            return out + self._expire(now_s)
        if self._held and unwrapped < max(self._held):
            self.reordered += 1
        self._held[unwrapped] = (item, now_s)
        self.held_max = max(self.held_max, len(self._held))
        out += self._release_in_order()
        if len(self._held) > self.settings.capacity:
            self.overflows += 1
            out += self._give_up()
        return out + self._expire(now_s)

    def poll(self, now_s: float) -> list[T]:
        """The packets released because the wait for a missing one ran out by ``now_s``."""
        return self._expire(now_s)

    def deadline(self) -> float | None:
        """When the wait for the missing packet runs out (None: nothing held)."""
        if not self._held:
            return None
        return min(arrived for _, arrived in self._held.values()) + self.target_s

    @property
    def held(self) -> int:
        return len(self._held)

    # -- release ---------------------------------------------------------------------------

    def _release_in_order(self) -> list[T]:
        out: list[T] = []
        assert self._next is not None
        while self._next in self._held:
            out.append(self._held.pop(self._next)[0])
            self._next += 1
        self.released += len(out)
        return out

    def _give_up(self) -> list[T]:
        """Skip the missing packets before the oldest held one; release what follows."""
        assert self._next is not None
        first = min(self._held)
        self.skipped += first - self._next
        self._next = first
        return self._release_in_order()

    def _expire(self, now_s: float) -> list[T]:
        out: list[T] = []
        while (due := self.deadline()) is not None and now_s >= due:
            out += self._give_up()
        return out

    def _flush(self) -> list[T]:
        out: list[T] = []
        while self._held:
            out += self._give_up()
        return out

    # -- the adaptive wait -----------------------------------------------------------------

    def _forget(self) -> None:
        self._ts_origin = None
        self._transits.clear()
        self._sorted.clear()

    def _measure(self, timestamp: int, now_s: float) -> None:
        if self._ts_origin is None:
            self._ts_origin = self._ts_last = timestamp
        else:
            delta = (timestamp - self._ts_last) % _UINT32
            self._ts_last += delta - _UINT32 if delta >= _UINT32 // 2 else delta
        # this packet's timestamp, unwrapped near the latest one (a late packet is behind it)
        offset = (timestamp - self._ts_last) % _UINT32
        unwrapped = self._ts_last + (offset - _UINT32 if offset >= _UINT32 // 2 else offset)
        transit = now_s - (unwrapped - self._ts_origin) / self.settings.clock_rate
        if self._transits and abs(transit - self._transits[-1]) > MAX_TRANSIT_STEP_S:
            self._forget()  # the timestamps jumped (a new source): measure afresh
            self._ts_origin = self._ts_last = timestamp
            transit = now_s
        self._transits.append(transit)
        bisect.insort(self._sorted, transit)
        if len(self._transits) > self.settings.window_packets:
            old = self._transits.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, old)]
        self._adapt(now_s)

    def spread_s(self) -> float:
        """The measured transit spread (quantile minus minimum) over the window."""
        if len(self._sorted) < 2:
            return 0.0
        index = min(len(self._sorted) - 1, int(self.settings.quantile * len(self._sorted)))
        return self._sorted[index] - self._sorted[0]

    def _adapt(self, now_s: float) -> None:
        s = self.settings
        wanted = min(s.max_s, max(s.min_s, self.spread_s()))
        elapsed = 0.0 if self._updated_s is None else max(0.0, now_s - self._updated_s)
        self._updated_s = now_s
        if wanted >= self.target_s:
            self.target_s = wanted
        else:
            self.target_s = max(wanted, self.target_s - s.shrink_s_per_s * elapsed)
