"""Prometheus metrics: unit behaviour and counters moving during a real call."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from omnicall.app.app_state import CALLS_KEY, METRICS_KEY
from omnicall.app.calls import SessionTimeouts
from omnicall.app.metrics import Metrics, counter_deltas
from omnicall.app.network_quality import NetworkSample
from omnicall.client import Microphone, connect
from tests.utils import running_server, tone, wait_for


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(parsed: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    return parsed.get((name, tuple(sorted(labels.items()))), 0.0)


def test_turn_histograms_and_deltas() -> None:
    live = {"sessions": 0, "max_sessions": 4, "parked": 0, "buffers": {}, "workers": {"think": 2},
            "tasks": 3, "degrade_level": 1}
    metrics = Metrics(lambda: live)
    metrics.observe_turn({"speech_end": 10.0, "asr_start": 10.15, "end_of_turn": 10.4,
                          "asr_done": 10.3, "llm_first_token": 10.5, "first_audio_out": 10.8})
    parsed = samples(metrics.exposition().decode())
    assert value(parsed, "omnicall_time_to_first_audio_seconds_count") == 1
    assert abs(value(parsed, "omnicall_time_to_first_audio_seconds_sum") - 0.8) < 1e-9
    assert abs(value(parsed, "omnicall_ttft_seconds_sum") - 0.1) < 1e-9
    # the ASR's own work is measured even when it ended before the end of the turn...
    assert abs(value(parsed, "omnicall_stage_seconds_sum", stage="asr") - 0.15) < 1e-9
    # ...and what was left of it after the end of the turn is its own series (0 here)
    assert value(parsed, "omnicall_stage_seconds_sum", stage="asr_tail") == 0
    assert value(parsed, "omnicall_stage_seconds_count", stage="asr_tail") == 1
    assert value(parsed, "omnicall_engine_queue_depth", worker="think") == 2
    assert value(parsed, "omnicall_event_loop_tasks") == 3
    assert value(parsed, "omnicall_degrade_level") == 1
    assert value(parsed, "process_resident_memory_bytes") > 10_000_000
    reported: dict[str, int] = {}
    assert counter_deltas({"underruns": 3}, reported)["underruns"] == 3
    assert counter_deltas({"underruns": 5}, reported)["underruns"] == 2


async def test_metrics_move_during_a_real_call() -> None:
    sent = ("omnicall_media_frames_total", {"where": "egress", "kind": "sent_frames"})
    async with running_server() as (url, app), aiohttp.ClientSession() as http:

        def sent_now() -> float:  # egress counts reach the metrics on the session's stats tick
            return value(samples(app[METRICS_KEY].exposition().decode()), sent[0], **sent[1])

        async with http.post(url + "offer", data=b"{nope") as resp:
            assert resp.status == 400
        call = await connect(url, Microphone(tone(300, 5, rate=48_000)))
        await wait_for(lambda: len(call.received) > 50, timeout_s=10)
        await wait_for(lambda: sent_now() > 0, timeout_s=10)  # a stats tick
        async with http.get(url + "metrics") as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain")
            first = samples(await resp.text())
        await wait_for(lambda: sent_now() > value(first, sent[0], **sent[1]), timeout_s=10)
        async with http.get(url + "metrics") as resp:
            second = samples(await resp.text())
        await call.close()
        # the server notices the hangup and counts the call when its teardown is done
        await wait_for(lambda: len(app[CALLS_KEY]) == 0, timeout_s=10)
        async with http.get(url + "metrics") as resp:
            third = samples(await resp.text())
    assert value(first, "omnicall_active_sessions") == 1
    assert value(first, "omnicall_offers_rejected_total", reason="bad_request") == 1
    # every refusal reason is a series from the start, at 0 until it happens
    assert ("omnicall_offers_rejected_total", (("reason", "rate_limited"),)) in first
    assert value(first, "omnicall_calls_started_total") == 1
    build = next(labels for (name, labels) in first if name == "omnicall_build_info")
    assert dict(build)["engine"] == "loopback" and dict(build)["version"]
    assert value(second, sent[0], **sent[1]) > value(first, sent[0], **sent[1]) > 0
    assert value(third, "omnicall_active_sessions") == 0
    assert sum(v for (n, _), v in third.items() if n == "omnicall_calls_total") == 1


async def test_network_quality_of_a_real_call_is_observed() -> None:
    timeouts = SessionTimeouts(network_interval_s=0.5, stats_interval_s=0.2)
    async with running_server(timeouts=timeouts) as (url, app):
        call = await connect(url, Microphone(tone(300, 10, rate=48_000)))
        await wait_for(lambda: len(call.received) > 100, timeout_s=10)
        session = app[CALLS_KEY].sessions[call.session_id]
        # aiortc's client sends RTCP receiver reports every few seconds: round-trip time
        await wait_for(lambda: session.network.last.rtt_s is not None, timeout_s=15)
        parsed = samples(app[METRICS_KEY].exposition().decode())
        await call.close()
    # a loopback call is a good one, and its samples are labelled so
    assert value(parsed, "omnicall_network_rtt_seconds_count", quality="good") >= 1
    assert 0 < value(parsed, "omnicall_network_rtt_seconds_sum", quality="good") < 1.0
    assert value(parsed, "omnicall_network_jitter_seconds_count", direction="in",
                 quality="good") >= 1
    assert value(parsed, "omnicall_network_packet_loss_ratio_count", direction="in",
                 quality="good") >= 1
    assert value(parsed, "omnicall_network_packet_loss_ratio_sum", direction="in",
                 quality="good") == 0
    assert value(parsed, "omnicall_network_quality_samples_total", quality="poor") == 0


def test_network_histograms_are_labelled_by_the_calls_quality() -> None:
    live = {"sessions": 0, "max_sessions": 4, "parked": 0, "buffers": {}, "workers": {},
            "tasks": 0, "degrade_level": 0}
    metrics = Metrics(lambda: live)
    metrics.observe_network(NetworkSample(rtt_s=0.04, jitter_in_s=0.003, loss_in=0.0))
    metrics.observe_network(NetworkSample(rtt_s=0.05, jitter_in_s=0.004, loss_in=0.12))
    metrics.observe_network(NetworkSample())  # measured nothing: not observed
    parsed = samples(metrics.exposition().decode())
    assert value(parsed, "omnicall_network_rtt_seconds_count", quality="good") == 1
    assert value(parsed, "omnicall_network_packet_loss_ratio_count", direction="in",
                 quality="poor") == 1
    assert value(parsed, "omnicall_network_quality_samples_total", quality="fair") == 0
    assert value(parsed, "omnicall_network_quality_samples_total", quality="poor") == 1
