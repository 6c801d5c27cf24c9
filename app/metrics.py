"""Prometheus metrics for the server (prometheus-client), served at ``GET /metrics``.

One :class:`Metrics` per application (its own ``CollectorRegistry``, no module globals).
Latency histograms are observed per turn from the engine's stage timestamps; media counters
are advanced by each call from its own counters (deltas, once a second and at close);
gauges that describe the present (active calls, buffer occupancy, worker queues) are read
at scrape time from the live sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    Info,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from omnicall.app.network_quality import QUALITIES, NetworkSample, classify

LATENCY_BUCKETS_S = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.25, 1.5,
                     2.0, 3.0, 5.0)

NETWORK_RTT_BUCKETS_S = (0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0)
NETWORK_JITTER_BUCKETS_S = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2)
PACKET_LOSS_BUCKETS = (0.0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
# every reason POST /offer can be refused for: each series exists (at 0) from the start
OFFER_REJECT_REASONS = ("bad_request", "unauthorized", "origin", "timeout", "too_large",
                        "rate_limited", "full")

# (histogram stage label, from stage, to stage) measured per turn from StageTiming events.
# "asr" is the final transcription's own work (it may run during the hangover, speculatively);
# "asr_tail" is what of it was left after the end of the turn (0 when it finished before).
STAGE_SPANS = (
    ("end_of_turn", "speech_end", "end_of_turn"),
    ("asr", "asr_start", "asr_done"),
    ("asr_tail", "end_of_turn", "asr_done"),
    ("thinker_first_token", "asr_done", "llm_first_token"),
    ("thinker_first_clause", "llm_first_token", "llm_first_clause"),
    ("talker_first_chunk", "llm_first_clause", "tts_first_chunk"),
    # native Thinker-Talker engine
    ("talker_first_frame", "llm_first_token", "talker_first_frame"),
    ("code2wav_first_chunk", "talker_first_frame", "code2wav_first_chunk"),
)

MEDIA_COUNTERS = {
    "audio_ring_dropped": ("ingest", "audio frames dropped by a full input ring"),
    "video_dropped": ("ingest", "sampled video frames replaced before use"),
    "ingest_refusals": ("ingest", "units the engine refused (back-pressure)"),
    "underruns": ("egress", "playout queue underruns"),
    "late_frames": ("egress", "output frames sent late"),
    "silence_frames": ("egress", "output frames sent as silence"),
    "sent_frames": ("egress", "output frames sent"),
}


class _LiveCollector(Collector):
    def __init__(self, sample: Callable[[], dict[str, Any]]) -> None:
        self._sample = sample

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = self._sample()
        for name, help_text, key in _PLAIN_GAUGES:
            yield GaugeMetricFamily(name, help_text, value=now[key])
        for name, help_text, label, key in _LABELLED_GAUGES:
            family = GaugeMetricFamily(name, help_text, labels=[label])
            for label_value, value in now[key].items():
                family.add_metric([label_value], value)
            yield family


# (metric, help, key in the live sample)
_PLAIN_GAUGES = (
    ("omnicall_active_sessions", "calls in progress", "sessions"),
    ("omnicall_max_sessions", "calls accepted at most", "max_sessions"),
    ("omnicall_parked_sessions", "dropped calls kept for a resume", "parked"),
    ("omnicall_degrade_level", "0 normal, 1 text first, 2 fallback engine", "degrade_level"),
    ("omnicall_event_loop_tasks", "asyncio tasks alive", "tasks"),
)
# (metric, help, label name, key of a {label value: value} dict in the live sample)
_LABELLED_GAUGES = (
    ("omnicall_buffer_frames", "frames queued now, summed over calls", "buffer", "buffers"),
    ("omnicall_engine_queue_depth", "model jobs waiting or running per worker", "worker",
     "workers"),
)


class Metrics:
    def __init__(self, sample: Callable[[], dict[str, Any]],
                 build: dict[str, str] | None = None) -> None:
        self.registry = CollectorRegistry()
        Info("omnicall_build", "version and engine of this server",
             registry=self.registry).info(build or {})
        self.ttft = Histogram(
            "omnicall_ttft_seconds", "end of the user's turn -> first assistant text token",
            registry=self.registry, buckets=LATENCY_BUCKETS_S)
        self.ttfa = Histogram(
            "omnicall_time_to_first_audio_seconds",
            "end of user speech -> first assistant audio leaving the engine",
            registry=self.registry, buckets=LATENCY_BUCKETS_S)
        self.stage = Histogram(
            "omnicall_stage_seconds", "per-turn latency of each pipeline stage",
            ["stage"], registry=self.registry, buckets=LATENCY_BUCKETS_S)
        self.media = Counter("omnicall_media_frames", "media frame events by kind",
                             ["where", "kind"], registry=self.registry)
        self.calls = Counter("omnicall_calls", "calls by how they ended", ["outcome"],
                             registry=self.registry)
        self.calls_started = Counter("omnicall_calls_started", "calls accepted (offers answered)",
                                     registry=self.registry)
        self.offers_rejected = Counter("omnicall_offers_rejected", "refused POST /offer",
                                       ["reason"], registry=self.registry)
        for reason in OFFER_REJECT_REASONS:
            self.offers_rejected.labels(reason)
        self.stalls = Counter("omnicall_engine_stalls", "replies cancelled for making no "
                              "progress (--reply-timeout-s)", registry=self.registry)
        # labelled by the call's quality at that sample (good/fair/poor: network_quality.
        # classify), so an operator sees which calls suffer; three values, never per call
        self.network_rtt = Histogram(
            "omnicall_network_rtt_seconds", "round-trip time to each caller (RTCP), sampled "
            "per call", ["quality"], registry=self.registry, buckets=NETWORK_RTT_BUCKETS_S)
        self.network_jitter = Histogram(
            "omnicall_network_jitter_seconds", "audio interarrival jitter per call: in = at "
            "the server, out = reported by the caller", ["direction", "quality"],
            registry=self.registry, buckets=NETWORK_JITTER_BUCKETS_S)
        self.network_loss = Histogram(
            "omnicall_network_packet_loss_ratio", "audio packets lost between samples per "
            "call: in = towards the server, out = towards the caller", ["direction", "quality"],
            registry=self.registry, buckets=PACKET_LOSS_BUCKETS)
        self.network_samples = Counter(
            "omnicall_network_quality_samples", "network samples of calls by quality",
            ["quality"], registry=self.registry)
        for quality in QUALITIES:
            self.network_samples.labels(quality)
        self.turns = Counter("omnicall_turns", "user turns answered or interrupted",
                             ["result"], registry=self.registry)
        self.degrade = Counter("omnicall_degrade_transitions", "degrade ladder moves",
                               ["to"], registry=self.registry)
        self.registry.register(_LiveCollector(sample))
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes, cpu, fds

    def observe_turn(self, stages: dict[str, float]) -> None:
        """``stages``: stage name -> monotonic seconds, for one finished turn."""
        ttft = turn_ttft_s(stages)
        if ttft is not None:
            self.ttft.observe(ttft)
        if "speech_end" in stages and "first_audio_out" in stages:
            self.ttfa.observe(max(0.0, stages["first_audio_out"] - stages["speech_end"]))
        for label, start, end in STAGE_SPANS:
            if start in stages and end in stages:
                self.stage.labels(label).observe(max(0.0, stages[end] - stages[start]))

    def observe_network(self, sample: NetworkSample) -> None:
        quality = classify(sample)
        if quality is None:
            return
        self.network_samples.labels(quality).inc()
        if sample.rtt_s is not None:
            self.network_rtt.labels(quality).observe(sample.rtt_s)
        for direction, jitter, loss in (("in", sample.jitter_in_s, sample.loss_in),
                                        ("out", sample.jitter_out_s, sample.loss_out)):
            if jitter is not None:
                self.network_jitter.labels(direction, quality).observe(jitter)
            if loss is not None:
                self.network_loss.labels(direction, quality).observe(loss)

    def add_media(self, deltas: dict[str, int]) -> None:
        for name, value in deltas.items():
            if value > 0 and name in MEDIA_COUNTERS:
                self.media.labels(MEDIA_COUNTERS[name][0], name).inc(value)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def turn_ttft_s(stages: dict[str, float]) -> float | None:
    """End of the user's turn -> first assistant token (0 when it came during the hangover)."""
    if "end_of_turn" in stages and "llm_first_token" in stages:
        return max(0.0, stages["llm_first_token"] - stages["end_of_turn"])
    return None


def counter_deltas(current: dict[str, Any], reported: dict[str, int],
                   names: Iterable[str] = MEDIA_COUNTERS) -> dict[str, int]:
    """What grew since the last report; updates ``reported`` in place."""
    deltas = {}
    for name in names:
        value = int(current.get(name, 0))
        deltas[name] = value - reported.get(name, 0)
        reported[name] = value
    return deltas
