"""``omnicall`` command line: ``omnicall serve [flags]``, ``omnicall memory [flags]``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import logging
import os
import signal
import socket
import ssl
import sys
from collections.abc import Sequence

from aiohttp import web

from app.config import ConfigError, ServerConfig, add_arguments, config_from
from app.server import create_app
from engine.errors import EngineLoadError
from engine.registry import EngineUnavailable

logger = logging.getLogger(__name__)

GC_GEN0_THRESHOLD = 20_000


async def serve(config: ServerConfig) -> None:
    try:
        app = create_app(config)  # builds the engine (no models load yet)
    except EngineUnavailable as exc:
        logger.error("engine %r: %s", config.engine, exc)
        raise SystemExit(2) from exc
    runner = web.AppRunner(app, handle_signals=False)
    try:
        await runner.setup()  # starts and warms up the engine before accepting calls
    except EngineLoadError as exc:
        logger.error("the %s engine could not start: %s", config.engine, exc)
        raise SystemExit(2) from exc
    # Keep the cyclic GC's pauses off the 20 ms media clock: objects that live for the whole
    # run (models, modules) are frozen out of collections, and young-generation collections
    # run less often (aiortc allocates per packet).
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    ssl_context = None
    if config.tls:
        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ssl_context.load_cert_chain(config.cert, config.key)
    site = web.TCPSite(runner, config.host, config.port, ssl_context=ssl_context,
                       reuse_port=config.workers > 1 or None)
    await site.start()
    port = config.port
    sockets = getattr(site._server, "sockets", None)  # the real port when --port 0
    if sockets:
        port = sockets[0].getsockname()[1]
    scheme = "https" if config.tls else "http"
    host = "localhost" if config.host in ("127.0.0.1", "0.0.0.0", "::") else config.host
    print(f"omnicall is ready: open {scheme}://{host}:{port}/ in a browser", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        logger.info("shutting down")
        await runner.cleanup()


def _run(coro_config: ServerConfig) -> None:
    try:
        import uvloop
    except ImportError:
        logger.info("uvloop not installed; using asyncio's default loop")
        asyncio.run(serve(coro_config))
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(coro_config))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="omnicall",
                                     description="real-time voice and video assistant")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_parser = sub.add_parser("serve", help="start the server")
    add_arguments(serve_parser)
    sub.add_parser("memory", help="expected GPU memory of a Qwen3-Omni call", add_help=False)
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["memory"]:
        from engine.qwen_omni.memory import main as memory_main  # heavy: only when asked

        return memory_main(raw[1:])
    args = parser.parse_args(raw)
    try:
        config = config_from(args)
    except ConfigError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=config.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if config.workers > 1:
        return _run_workers(config)
    _run(config)
    return 0


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _run_workers(config: ServerConfig) -> int:
    """``--workers N``: N server processes share the port (SO_REUSEPORT; the kernel spreads
    new connections), so calls use every core. Forked before any event loop or model exists;
    each worker has its own engine and its own ``--max-sessions``. The parent is worker 0 and
    stops the others when it stops."""
    if config.port == 0:
        config = dataclasses.replace(config, port=_free_port(config.host))
    children: list[int] = []
    for index in range(1, config.workers):
        pid = os.fork()
        if pid == 0:  # child
            logging.getLogger().name = f"worker-{index}"
            try:
                _run(config)
            finally:
                os._exit(0)
        children.append(pid)
    logger.info("started %d worker processes on port %d", config.workers, config.port)
    try:
        _run(config)
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
