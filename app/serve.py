"""The serve loop: build the application (the WebRTC front end or ``serve-engine``'s Realtime
server), start it on its checked sockets, serve until SIGINT / SIGTERM; with ``--workers`` a
supervisor forks the workers, each on its own socket (:mod:`omnicall.app.process.supervisor`)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from omnicall.app.app_state import CONFIG_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.http.server import create_app
from omnicall.app.process.sockets import BoundSocket, bind_socket, ready_line
from omnicall.app.process.supervisor import Supervisor
from omnicall.app.process.worker_group import WorkerInfo
from omnicall.app.setup import create_runner
from omnicall.app.storage.store import StoreError
from omnicall.engine.errors import EngineLoadError
from omnicall.engine.registry import EngineUnavailable
from omnicall.media import log_context

logger = logging.getLogger(__name__)

GIL_SWITCH_INTERVAL_S = 0.001
GC_GEN0_THRESHOLD = 20_000
QUIET_LOGGERS = ("aioice", "aiortc")  # ~15 INFO lines per call; kept at DEBUG level only


AppFactory = Callable[..., web.Application]


@dataclass(frozen=True)
class Service:
    """What a process serves: the app it builds, and whether it is an engine server
    (``serve-engine``: its ready line names the Realtime URL, not the page)."""

    factory: AppFactory = create_app
    engine_server: bool = False


FRONT_END = Service()


def engine_service() -> Service:
    from omnicall.app.realtime.server import create_engine_app  # only serve-engine needs it

    return Service(create_engine_app, engine_server=True)


async def serve(config: ServerConfig, bound: BoundSocket, service: Service = FRONT_END,
                worker: WorkerInfo | None = None, ready_fd: int | None = None) -> None:
    try:
        app = service.factory(config, worker=worker)  # builds the engine (no models load yet)
    except EngineUnavailable as exc:
        logger.error("engine %r: %s", config.engine, exc)
        raise SystemExit(2) from exc
    runner = create_runner(app)
    try:
        await runner.setup()  # starts and warms up the engine before accepting calls
    except EngineLoadError as exc:
        logger.error("the %s engine could not start: %s", config.engine, exc)
        raise SystemExit(2) from exc
    except StoreError as exc:
        logger.error("--store: %s", exc)
        raise SystemExit(2) from exc
    # Keep the cyclic GC's pauses off the 20 ms media clock: objects that live for the whole
    # run (models, modules) are frozen out of collections, and young-generation collections
    # run less often (aiortc allocates per packet).
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    # Decoder threads (aiortc's VP8, the engine's workers) hold the GIL for up to the switch
    # interval whenever the loop wants it back: 5 ms by default, a quarter of a 20 ms frame.
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    await web.SockSite(runner, bound.sock, ssl_context=bound.ssl_context).start()
    metrics_runner = await _serve_metrics(app, bound)
    if worker is not None:
        worker.socket_path().unlink(missing_ok=True)
        await web.UnixSite(runner, str(worker.socket_path())).start()
    if ready_fd is not None:
        os.write(ready_fd, bytes([worker.index if worker is not None else 0]))
    else:
        print(ready_line(config, bound.port, service.engine_server), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        logger.info("shutting down")
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        await runner.cleanup()


async def _serve_metrics(app: web.Application, bound: BoundSocket) -> web.AppRunner | None:
    """``--metrics-listen``: ``/metrics`` and ``/health`` on their own socket (plain http)."""
    if bound.metrics_sock is None or bound.metrics_address is None:
        return None
    from omnicall.app.status_routes import create_metrics_app

    runner = web.AppRunner(create_metrics_app(app), handle_signals=False,
                           keepalive_timeout=app[CONFIG_KEY].header_timeout_s)
    await runner.setup()
    await web.SockSite(runner, bound.metrics_sock).start()
    host, port = bound.metrics_address
    logger.info("metrics on http://%s:%d/metrics", f"[{host}]" if ":" in host else host, port)
    return runner


def run_server(config: ServerConfig, bound: BoundSocket, service: Service = FRONT_END,
               worker: WorkerInfo | None = None, ready_fd: int | None = None) -> None:
    """Serve until SIGINT / SIGTERM on uvloop (asyncio's own loop where it is missing)."""
    coro = serve(config, bound, service, worker, ready_fd)
    try:
        import uvloop
    except ImportError:
        logger.info("uvloop not installed; using asyncio's default loop")
        asyncio.run(coro)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coro)


def configure_logging(level: str) -> None:
    """The server's log: each line of a call's work names the call (``[id]``:
    :mod:`omnicall.media.log_context`)."""
    log_context.install()
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(call)s%(message)s")
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def run_workers(config: ServerConfig, bound: BoundSocket, service: Service) -> int:
    """``--workers N``: a supervisor forks N workers, each listening on its own SO_REUSEPORT
    socket on the port, and replaces any that dies (:mod:`omnicall.app.process.supervisor`). Forked
    before any event loop or model exists."""
    runtime_dir = Path(tempfile.mkdtemp(prefix="omnicall-workers-"))

    def work(index: int, ready_fd: int) -> None:
        logging.getLogger().name = f"worker-{index}"
        own = BoundSocket(bind_socket(config.host, bound.port, listen=True, reuse_port=True),
                       bound.ssl_context, bound.port)
        bound.sock.close()  # the supervisor's keeps the port; this worker listens on its own
        if bound.metrics_sock is not None and bound.metrics_address is not None:
            own.metrics_sock = bind_socket(*bound.metrics_address, listen=True,
                                           reuse_port=True)
            own.metrics_address = bound.metrics_address
            bound.metrics_sock.close()
        run_server(config, own, service, WorkerInfo(index, config.workers, runtime_dir), ready_fd)

    supervisor = Supervisor(config.workers, work, runtime_dir,
                            shutdown_timeout_s=config.shutdown_timeout_s + 2,
                            on_ready=lambda: print(ready_line(
                                config, bound.port, service.engine_server), flush=True))
    logger.info("supervising %d worker processes on port %d", config.workers, bound.port)
    try:
        return supervisor.run()
    finally:
        bound.sock.close()
        if bound.metrics_sock is not None:
            bound.metrics_sock.close()
        shutil.rmtree(runtime_dir, ignore_errors=True)
