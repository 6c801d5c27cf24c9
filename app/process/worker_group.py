"""One view of a worker group: ``/health`` and ``/metrics`` answer for every worker, and
new calls go to the worker with the fewest.

With ``--workers N`` the kernel hands each HTTP connection to whichever worker accepts it, so a
worker asked for ``/health`` or ``/metrics`` asks its siblings too, over their private Unix
sockets in the group's runtime directory (``worker-K.sock``; ``?scope=worker`` returns one
worker's own view). Metrics get a ``worker`` label; the supervisor's ``status.json`` adds the
restart count and which workers should be serving.

The kernel spreads *connections*, not calls: a browser, a kiosk fleet behind a proxy or any
HTTP client with keep-alive sends every offer down one connection, so every call landed on
one worker (measured: 12 of 12 with ``bench/load.py``). A worker that receives a new call's
offer (already checked: origin, token, rate, body) asks its siblings how many calls they
hold and, when one holds fewer, hands the offer over its Unix socket
(:func:`forward_offer`); the answer names that worker's own ICE candidates, so the media
goes straight to it. A resume stays where it arrived (its parked call may be there).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

logger = logging.getLogger(__name__)

PEER_TIMEOUT_S = 1.0
SCOPE_WORKER = "worker"
#: marks an offer handed over by a sibling; trusted only on a worker's private Unix socket
FORWARDED_HEADER = "X-Omnicall-Forwarded-By"


@dataclass(frozen=True)
class WorkerInfo:
    index: int
    count: int
    runtime_dir: Path

    def socket_path(self, index: int | None = None) -> Path:
        return self.runtime_dir / f"worker-{self.index if index is None else index}.sock"

    def group_status(self) -> dict[str, Any]:
        """The supervisor's ``status.json`` (empty when it is not there yet)."""
        try:
            data = json.loads((self.runtime_dir / "status.json").read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


async def _fetch_one(path: Path, url_path: str) -> bytes | None:
    connector = aiohttp.UnixConnector(path=str(path))
    timeout = aiohttp.ClientTimeout(total=PEER_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http, \
                http.get(f"http://worker{url_path}") as resp:
            if resp.status != 200:
                return None
            return await resp.read()
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        logger.debug("worker socket %s did not answer: %s", path.name, exc)
        return None


async def fetch_siblings(info: WorkerInfo, url_path: str) -> dict[int, bytes | None]:
    """``url_path`` (with ``?scope=worker``) from every other worker; None where none answered."""
    others = [i for i in range(info.count) if i != info.index]
    answers = await asyncio.gather(*(_fetch_one(info.socket_path(i), url_path) for i in others))
    return dict(zip(others, answers, strict=True))


def merge_health(info: WorkerInfo, own: dict[str, Any],
                 siblings: dict[int, bytes | None]) -> dict[str, Any]:
    workers: list[dict[str, Any]] = []
    for index in range(info.count):
        if index == info.index:
            workers.append({"index": index, **own})
            continue
        raw = siblings.get(index)
        try:
            view = json.loads(raw) if raw is not None else None
        except ValueError:
            view = None
        workers.append({"index": index, "status": "down"} if not isinstance(view, dict)
                       else {"index": index, **view})
    serving = [w for w in workers if w.get("status") == "ok"]
    group = info.group_status()
    return {
        "status": "ok" if len(serving) == info.count else "degraded",
        "engine": own.get("engine"),
        "sessions": sum(int(w.get("sessions", 0)) for w in serving),
        "max_sessions": sum(int(w.get("max_sessions", 0)) for w in serving),
        "parked": sum(int(w.get("parked", 0)) for w in serving),
        "pid": own.get("pid"),
        "workers_expected": info.count,
        "workers_serving": len(serving),
        "worker_restarts": int(group.get("restarts", 0)),
        "last_restart_s": group.get("last_restart_s"),
        "workers": workers,
    }


class _Merged:
    """A collector-like object for ``generate_latest``: families from every worker."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def merge_metrics(info: WorkerInfo, expositions: dict[int, bytes | None]) -> bytes:
    """Every worker's exposition, each sample labelled ``worker="K"``, plus the group's own."""
    merged: dict[str, Metric] = {}
    serving = 0
    for index, raw in sorted(expositions.items()):
        if raw is None:
            continue
        serving += 1
        for family in text_string_to_metric_families(raw.decode()):
            target = merged.get(family.name)
            if target is None:
                target = merged[family.name] = Metric(family.name, family.documentation,
                                                      family.type, family.unit)
            for sample in family.samples:
                target.samples.append(sample._replace(
                    labels={**sample.labels, "worker": str(index)}))
    group = info.group_status()
    expected = GaugeMetricFamily("omnicall_workers_expected", "worker processes configured",
                                 value=info.count)
    up = GaugeMetricFamily("omnicall_workers_serving", "worker processes answering now",
                           value=serving)
    restarts = CounterMetricFamily("omnicall_worker_restarts",
                                   "worker processes replaced after they died",
                                   value=int(group.get("restarts", 0)))
    return generate_latest(_Merged([*merged.values(), expected, up, restarts]))


async def least_loaded_sibling(info: WorkerInfo, own_calls: int) -> int | None:
    """The sibling holding the fewest calls if it holds fewer than ``own_calls``."""
    best, best_calls = None, own_calls
    for index, raw in (await fetch_siblings(info, f"/health?scope={SCOPE_WORKER}")).items():
        if raw is None:
            continue
        try:
            calls = json.loads(raw).get("sessions")
        except (ValueError, AttributeError):
            continue
        if isinstance(calls, int) and calls < best_calls:
            best, best_calls = index, calls
    return best


async def forward_offer(info: WorkerInfo, index: int, body: bytes,
                        timeout_s: float) -> tuple[int, bytes] | None:
    """POST a checked offer to sibling ``index``: its (status, JSON body), or None when it
    did not answer (the caller then takes the call itself)."""
    connector = aiohttp.UnixConnector(path=str(info.socket_path(index)))
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http, \
                http.post("http://worker/offer", data=body,
                          headers={FORWARDED_HEADER: str(info.index),
                                   "Content-Type": "application/json"}) as resp:
            return resp.status, await resp.read()
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        logger.warning("worker %d did not take a forwarded offer: %s", index, exc)
        return None
