"""Per-call network quality from WebRTC statistics (pure: fed aiortc's stats objects).

From the call's audio streams: what we receive (``inbound-rtp``: jitter and loss seen here)
and what the browser reports about what we send (``remote-inbound-rtp`` from its RTCP
receiver reports: round-trip time, jitter and loss there). Loss is the fraction of packets
lost since the previous sample, not since the call began.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

AUDIO_CLOCK_HZ = 48_000  # Opus RTP timestamps: RTCP jitter is in these units


@dataclass(frozen=True)
class NetworkSample:
    rtt_s: float | None = None
    jitter_in_s: float | None = None
    jitter_out_s: float | None = None
    loss_in: float | None = None  # 0..1 since the previous sample
    loss_out: float | None = None


def _loss(received: int, lost: int, before: tuple[int, int] | None) -> float | None:
    if before is None:
        expected, missing = received + lost, lost
    else:
        expected = (received - before[0]) + (lost - before[1])
        missing = lost - before[1]
    if expected <= 0:
        return None
    return min(1.0, max(0.0, missing / expected))


@dataclass
class NetworkQuality:
    sampled_at_s: float = float("-inf")
    _in: tuple[int, int] | None = None
    _out: tuple[int, int] | None = None
    last: NetworkSample = field(default_factory=NetworkSample)

    def update(self, stats: Iterable[Any], now_s: float) -> NetworkSample:
        self.sampled_at_s = now_s
        values: dict[str, float | None] = {}
        for stat in stats:
            if getattr(stat, "kind", None) != "audio":
                continue
            if stat.type == "inbound-rtp":
                values["jitter_in_s"] = stat.jitter / AUDIO_CLOCK_HZ
                values["loss_in"] = _loss(stat.packetsReceived, stat.packetsLost, self._in)
                self._in = (stat.packetsReceived, stat.packetsLost)
            elif stat.type == "remote-inbound-rtp":
                values["rtt_s"] = stat.roundTripTime
                values["jitter_out_s"] = stat.jitter / AUDIO_CLOCK_HZ
                values["loss_out"] = _loss(stat.packetsReceived, stat.packetsLost, self._out)
                self._out = (stat.packetsReceived, stat.packetsLost)
        self.last = NetworkSample(**values)
        return self.last


Quality = Literal["good", "fair", "poor"]
QUALITIES: tuple[Quality, ...] = ("good", "fair", "poor")


@dataclass(frozen=True)
class QualityThresholds:
    """Where a call's audio network stops being good (``fair_*``) and becomes poor
    (``poor_*``), on the worse of the two directions. The page's indicator uses the same
    numbers (web/network_quality.js)."""

    fair_loss: float = 0.02
    poor_loss: float = 0.08
    fair_jitter_s: float = 0.02  # RTCP interarrival jitter (a mean deviation, not a range)
    poor_jitter_s: float = 0.05
    fair_rtt_s: float = 0.25
    poor_rtt_s: float = 0.5


def classify(sample: NetworkSample, limits: QualityThresholds = QualityThresholds()
             ) -> Quality | None:
    """``good`` / ``fair`` / ``poor`` for one sample (None: it measured nothing)."""
    losses = [x for x in (sample.loss_in, sample.loss_out) if x is not None]
    jitters = [x for x in (sample.jitter_in_s, sample.jitter_out_s) if x is not None]
    if not losses and not jitters and sample.rtt_s is None:
        return None
    loss, jitter = max(losses, default=0.0), max(jitters, default=0.0)
    rtt = sample.rtt_s or 0.0
    if loss >= limits.poor_loss or jitter >= limits.poor_jitter_s or rtt >= limits.poor_rtt_s:
        return "poor"
    if loss >= limits.fair_loss or jitter >= limits.fair_jitter_s or rtt >= limits.fair_rtt_s:
        return "fair"
    return "good"
