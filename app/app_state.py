"""What a server application holds: its keys (no module globals) and its live calls.

``serve`` and ``serve-engine`` hang all their state off the aiohttp application under these
keys (:func:`omnicall.app.setup.install_common` sets them); the route handlers read them
from ``request.app``.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from omnicall.app.calls import LiveCalls, ParkedCalls, SessionTimeouts
from omnicall.app.config import ServerConfig
from omnicall.app.metrics import Metrics
from omnicall.app.process.worker_group import WorkerInfo
from omnicall.app.storage.store import TranscriptStore
from omnicall.app.tracing import Tracing
from omnicall.engine.base import Engine
from omnicall.engine.degrade import DegradeLadder
from omnicall.engine.tasks import TaskOwner
from omnicall.engine.tools import Toolbox
from omnicall.media.clock import Clock

CONFIG_KEY = web.AppKey("config", ServerConfig)
ENGINE_KEY = web.AppKey("engine", Engine)
CLOCK_KEY = web.AppKey("clock", Clock)
CALLS_KEY = web.AppKey("calls", LiveCalls)
PARKED_KEY = web.AppKey("parked", ParkedCalls)
APP_TASKS_KEY = web.AppKey("app_tasks", TaskOwner)
TIMEOUTS_KEY = web.AppKey("timeouts", SessionTimeouts)
METRICS_KEY = web.AppKey("metrics", Metrics)
LADDER_KEY = web.AppKey("ladder", DegradeLadder)
WORKER_KEY = web.AppKey("worker", WorkerInfo)
STORE_KEY = web.AppKey("store", TranscriptStore)
TOOLS_KEY: web.AppKey[Toolbox | None] = web.AppKey("tools")
TRANSCRIPTS_KEY: web.AppKey[Path | None] = web.AppKey("transcripts")
RECORDINGS_KEY: web.AppKey[Path | None] = web.AppKey("recordings")  # --record
TRACING_KEY: web.AppKey[Tracing | None] = web.AppKey("tracing")  # --otel-endpoint
