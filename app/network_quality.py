"""Per-call network quality from WebRTC statistics (pure: fed aiortc's stats objects).

From the call's audio streams: what we receive (``inbound-rtp``: jitter and loss seen here)
and what the browser reports about what we send (``remote-inbound-rtp`` from its RTCP
receiver reports: round-trip time, jitter and loss there). Loss is the fraction of packets
lost since the previous sample, not since the call began.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

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
