"""A worker group answers /health and /metrics for all its workers and shares its calls."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from omnicall.app.process.worker_group import (
    FORWARDED_HEADER,
    WorkerInfo,
    merge_health,
    merge_metrics,
)
from omnicall.client import Microphone, connect
from omnicall.media.third_party import use_loopback_candidates
from tests.utils import start_process, tone, wait_for


def exposition(calls: int) -> bytes:
    registry = CollectorRegistry()
    counter = Counter("omnicall_calls", "calls", ["outcome"], registry=registry)
    counter.labels("hangup").inc(calls)
    return generate_latest(registry)


def test_merge_metrics_labels_each_worker_and_adds_group_facts(tmp_path: Path) -> None:
    (tmp_path / "status.json").write_text(json.dumps({"restarts": 3}))
    info = WorkerInfo(0, 3, tmp_path)
    text = merge_metrics(info, {0: exposition(2), 1: exposition(5), 2: None}).decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("omnicall_calls_total", (("outcome", "hangup"), ("worker", "0")))] == 2
    assert samples[("omnicall_calls_total", (("outcome", "hangup"), ("worker", "1")))] == 5
    assert samples[("omnicall_workers_expected", ())] == 3
    assert samples[("omnicall_workers_serving", ())] == 2
    assert samples[("omnicall_worker_restarts_total", ())] == 3


def test_merge_health_sums_serving_workers_and_names_the_down_one(tmp_path: Path) -> None:
    info = WorkerInfo(1, 3, tmp_path)
    own = {"status": "ok", "engine": "loopback", "sessions": 2, "max_sessions": 4, "parked": 0,
           "pid": 11}
    other = json.dumps({"status": "ok", "sessions": 1, "max_sessions": 4, "parked": 1,
                        "pid": 10}).encode()
    health = merge_health(info, own, {0: other, 2: None})
    assert health["status"] == "degraded" and health["workers_serving"] == 2
    assert health["sessions"] == 3 and health["max_sessions"] == 8 and health["parked"] == 1
    assert [w["status"] for w in health["workers"]] == ["ok", "ok", "down"]
    assert health["worker_restarts"] == 0  # no status.json yet


async def test_new_calls_go_to_the_worker_with_fewest_even_down_one_connection() -> None:
    use_loopback_candidates(True)
    server = await start_process("serve", "--engine", "loopback", "--workers", "2",
                                 "--ice-loopback", "--token", "s3cret")
    auth = {"Authorization": "Bearer s3cret"}
    calls = []
    try:
        # one aiohttp session: every offer rides one keep-alive connection, to one worker
        async with aiohttp.ClientSession() as http:
            for _ in range(4):
                calls.append(await connect(
                    server.http_url, Microphone(tone(300, 8, rate=48_000)), http=http,
                    headers=auth))
            async with http.get(server.http_url + "health") as resp:
                health = await resp.json()
        assert sorted(w["sessions"] for w in health["workers"]) == [2, 2]
        # each call is live on the worker that took it: its echo comes back
        await wait_for(lambda: all(len(c.received_audio()) > 48_000 for c in calls),
                       timeout_s=20)
        # the hand-over mark is trusted only on the workers' private Unix sockets
        async with aiohttp.ClientSession() as http, http.post(
                server.http_url + "offer", json={"sdp": "v=0", "type": "offer"},
                headers={FORWARDED_HEADER: "0"}) as resp:
            assert resp.status == 401
    finally:
        for call in calls:
            await call.close()
        await server.stop()
