"""Network quality from aiortc's own stats objects (and from a real call)."""

from __future__ import annotations

import datetime

from aiortc.stats import RTCInboundRtpStreamStats, RTCRemoteInboundRtpStreamStats

from omnicall.app.network_quality import NetworkQuality, NetworkSample, classify

NOW = datetime.datetime(2026, 1, 1)


def inbound(received: int, lost: int, jitter: int, kind: str = "audio"
            ) -> RTCInboundRtpStreamStats:
    return RTCInboundRtpStreamStats(timestamp=NOW, type="inbound-rtp", id="in", ssrc=1,
                                    kind=kind, transportId="t", packetsReceived=received,
                                    packetsLost=lost, jitter=jitter)


def remote(received: int, lost: int, jitter: int, rtt: float) -> RTCRemoteInboundRtpStreamStats:
    return RTCRemoteInboundRtpStreamStats(timestamp=NOW, type="remote-inbound-rtp", id="rin",
                                          ssrc=2, kind="audio", transportId="t",
                                          packetsReceived=received, packetsLost=lost,
                                          jitter=jitter, roundTripTime=rtt, fractionLost=0.0)


def test_loss_is_per_interval_and_jitter_in_seconds() -> None:
    quality = NetworkQuality()
    first = quality.update([inbound(90, 10, 480), remote(50, 0, 96, 0.04),
                            inbound(10, 5, 9000, kind="video")], now_s=1.0)
    assert first.loss_in == 0.1 and first.jitter_in_s == 0.01
    assert first.rtt_s == 0.04 and first.jitter_out_s == 0.002 and first.loss_out == 0.0
    second = quality.update([inbound(190, 10, 0), remote(100, 50, 0, 0.05)], now_s=6.0)
    assert second.loss_in == 0.0  # nothing lost since the previous sample
    assert second.loss_out == 0.5
    third = quality.update([inbound(190, 10, 0)], now_s=11.0)
    assert third.loss_in is None and third.rtt_s is None  # no new packets, no report
    assert quality.sampled_at_s == 11.0


def test_quality_is_the_worst_of_loss_jitter_and_rtt_in_either_direction() -> None:
    assert classify(NetworkSample()) is None
    assert classify(NetworkSample(rtt_s=0.03, jitter_in_s=0.004, loss_in=0.0)) == "good"
    assert classify(NetworkSample(rtt_s=0.03, loss_in=0.0, loss_out=0.05)) == "fair"
    assert classify(NetworkSample(jitter_in_s=0.03)) == "fair"
    assert classify(NetworkSample(rtt_s=0.3)) == "fair"
    assert classify(NetworkSample(rtt_s=0.03, loss_in=0.1)) == "poor"
    assert classify(NetworkSample(jitter_out_s=0.06)) == "poor"
    assert classify(NetworkSample(rtt_s=0.8, loss_in=0.0)) == "poor"
