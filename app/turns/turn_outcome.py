"""What a finished assistant turn does to the server: it is counted in the metrics, and its
time to first token moves the degrade ladder, which every live call is told about."""

from __future__ import annotations

import logging

from aiohttp import web

from omnicall.app.app_state import CALLS_KEY, ENGINE_KEY, LADDER_KEY, METRICS_KEY
from omnicall.app.metrics import turn_ttft_s

logger = logging.getLogger(__name__)


def on_turn(app: web.Application, stages: dict[str, float], interrupted: bool) -> None:
    """A turn finished: record it, and move the degrade ladder if answers got slow."""
    metrics = app[METRICS_KEY]
    metrics.observe_turn(stages)
    metrics.turns.labels("interrupted" if interrupted else "answered").inc()
    ttft = turn_ttft_s(stages)
    if ttft is None:
        return
    level = app[LADDER_KEY].observe(ttft)
    if level is None:
        return
    logger.warning("degrade ladder -> %s (rolling P95 time to first token)", level.name)
    metrics.degrade.labels(level.name.lower()).inc()
    app[ENGINE_KEY].set_level(level)
    for session in app[CALLS_KEY].sessions.values():
        session.send({"type": "degrade", "level": level.name.lower()})
