"""A seeded network impairment, decided one datagram at a time (pure, synchronous).

The kernel here has no ``netem``, so tests and benches impair WebRTC calls in user space: a
UDP relay (:mod:`bench.udp_relay`) asks an :class:`ImpairmentCore` what to do with every
datagram it receives and carries the verdict out. The core holds no sockets and reads no
clock: each call passes ``now_s`` (the relay's event-loop time, a test's made-up time), and
its randomness comes from one ``random.Random`` seeded by ``(seed, name)``, so the same
datagrams at the same times get the same verdicts on every run.

What it can do to a datagram, in this order:

1. an **outage** (``outages``, absolute ``(start_s, duration_s)`` spans on the caller's
   clock, or :meth:`ImpairmentCore.add_outage`): everything is dropped, STUN and DTLS too;
2. **loss**: random (each datagram dropped with ``loss``) or bursty (:class:`BurstLoss`, a
   Gilbert-Elliott chain stepped once a datagram);
3. a **bandwidth cap** (``rate_bps``): datagrams are serialized onto a link of that rate
   behind a bounded queue (``queue_bytes``); one that does not fit is tail-dropped;
4. **delay** with **jitter** (``delay_s`` plus a uniform draw in ``[-jitter_s, +jitter_s]``,
   never below zero and never above ``MAX_DELAY_S``), and **reordering** (``reorder``: a
   datagram skips the base delay and jitter and overtakes the ones before it). Jitter alone
   reorders too (like netem) unless ``keep_order`` is set.

A verdict is :class:`Deliver` (at ``at_s`` on the same clock) or :class:`Drop` (with why).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

MAX_DELAY_S = 2.0  # no datagram is held longer than this (the relay stays bounded in time)


@dataclass(frozen=True)
class BurstLoss:
    """Gilbert-Elliott: a good and a bad state, each with its own loss; the chain moves
    good -> bad with ``p_enter`` and bad -> good with ``p_leave`` per datagram.

    The long-run loss is ``pi_bad * loss_bad + (1 - pi_bad) * loss_good`` with
    ``pi_bad = p_enter / (p_enter + p_leave)``; the mean burst is ``1 / p_leave`` datagrams."""

    p_enter: float
    p_leave: float
    loss_bad: float = 1.0
    loss_good: float = 0.0

    @classmethod
    def with_mean(cls, loss: float, mean_burst: float = 3.0) -> BurstLoss:
        """A chain whose long-run loss is ``loss`` in bursts of ``mean_burst`` datagrams
        (everything lost while bad, nothing while good)."""
        if not 0 < loss < 1 or mean_burst < 1:
            raise ValueError(f"need 0 < loss < 1 and mean_burst >= 1, got {loss}, {mean_burst}")
        p_leave = 1.0 / mean_burst
        return cls(p_enter=loss * p_leave / (1 - loss), p_leave=p_leave)

    @property
    def mean_loss(self) -> float:
        pi_bad = self.p_enter / (self.p_enter + self.p_leave)
        return pi_bad * self.loss_bad + (1 - pi_bad) * self.loss_good


@dataclass(frozen=True)
class Impairment:
    """What one direction of a link does to its datagrams (all zero: a perfect link)."""

    loss: float = 0.0
    burst: BurstLoss | None = None
    delay_s: float = 0.0
    jitter_s: float = 0.0
    reorder: float = 0.0
    keep_order: bool = False
    rate_bps: float | None = None
    queue_bytes: int = 30_000  # ~0.8 s at 300 kbps: a home router's buffer
    outages: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        for name in ("loss", "reorder"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.delay_s < 0 or self.jitter_s < 0 or self.delay_s > MAX_DELAY_S:
            raise ValueError(f"delay {self.delay_s} s / jitter {self.jitter_s} s out of range")
        if self.rate_bps is not None and self.rate_bps <= 0:
            raise ValueError(f"rate_bps must be positive, got {self.rate_bps}")
        if self.queue_bytes <= 0:
            raise ValueError(f"queue_bytes must be positive, got {self.queue_bytes}")
        if any(duration < 0 for _, duration in self.outages):
            raise ValueError(f"negative outage in {self.outages}")


@dataclass(frozen=True)
class Deliver:
    at_s: float


@dataclass(frozen=True)
class Drop:
    reason: str  # "outage", "loss", "burst", "queue"


Verdict = Deliver | Drop


@dataclass
class ImpairmentCore:
    """Verdicts for one direction. ``seed`` and ``name`` fix the random draws."""

    impairment: Impairment
    seed: int = 0
    name: str = ""
    outages: list[tuple[float, float]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    bytes_in: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(f"{self.seed}:{self.name}")
        self._bad = False
        self._link_free_at = float("-inf")
        self._last_at = float("-inf")
        self.outages = [*self.impairment.outages, *self.outages]

    def add_outage(self, start_s: float, duration_s: float) -> None:
        """Drop everything from ``start_s`` for ``duration_s`` (the caller's clock)."""
        if duration_s < 0:
            raise ValueError(f"negative outage {duration_s}")
        self.outages.append((start_s, duration_s))

    def in_outage(self, now_s: float) -> bool:
        return any(start <= now_s < start + duration for start, duration in self.outages)

    def decide(self, size: int, now_s: float) -> Verdict:
        """The fate of one datagram of ``size`` bytes arriving at ``now_s``."""
        imp = self.impairment
        self.counts["in"] += 1
        self.bytes_in += size
        if self.in_outage(now_s):
            return self._drop("outage")
        # every datagram draws the same numbers whatever happens to it, so one setting's
        # change does not reshuffle the others' decisions
        lost_random = self._rng.random() < imp.loss
        lost_burst = self._step_burst()
        jitter = self._rng.uniform(-imp.jitter_s, imp.jitter_s) if imp.jitter_s else 0.0
        overtakes = self._rng.random() < imp.reorder
        if lost_burst:
            return self._drop("burst")
        if lost_random:
            return self._drop("loss")
        leaves = now_s
        if imp.rate_bps is not None:
            start = max(now_s, self._link_free_at)
            backlog = (start - now_s) * imp.rate_bps / 8
            if backlog + size > imp.queue_bytes:
                return self._drop("queue")
            self._link_free_at = start + size * 8 / imp.rate_bps
            leaves = self._link_free_at
        if overtakes:
            at = leaves
            self.counts["reordered"] += 1
        else:
            at = leaves + min(MAX_DELAY_S, max(0.0, imp.delay_s + jitter))
            if imp.keep_order:
                at = max(at, self._last_at)
            self._last_at = max(self._last_at, at)
        self.counts["delivered"] += 1
        return Deliver(at)

    def _step_burst(self) -> bool:
        burst = self.impairment.burst
        if burst is None:
            return False
        draw_state, draw_loss = self._rng.random(), self._rng.random()
        self._bad = draw_state >= burst.p_leave if self._bad else draw_state < burst.p_enter
        return draw_loss < (burst.loss_bad if self._bad else burst.loss_good)

    def _drop(self, reason: str) -> Drop:
        self.counts[reason] += 1
        self.counts["dropped"] += 1
        return Drop(reason)

    @property
    def loss_fraction(self) -> float:
        return self.counts["dropped"] / self.counts["in"] if self.counts["in"] else 0.0
