"""``omnicall`` command line: ``omnicall serve``, ``omnicall serve-engine`` (the same flags),
``omnicall memory``."""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import ipaddress
import logging
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import ifaddr
from aiohttp import web

from omnicall.app.app_state import CONFIG_KEY
from omnicall.app.config import ConfigError, ServerConfig, add_arguments, config_from
from omnicall.app.server import create_app, create_runner
from omnicall.app.store import StoreError
from omnicall.app.supervisor import Supervisor
from omnicall.app.worker_group import WorkerInfo
from omnicall.engine.errors import EngineLoadError
from omnicall.engine.registry import EngineUnavailable

logger = logging.getLogger(__name__)

GIL_SWITCH_INTERVAL_S = 0.001
GC_GEN0_THRESHOLD = 20_000
LISTEN_BACKLOG = 512
QUIET_LOGGERS = ("aioice", "aiortc")  # ~15 INFO lines per call; kept at DEBUG level only


class StartupError(RuntimeError):
    """The server cannot start; the message is one line that says what to change."""


@dataclass
class Listener:
    """Checked before any model loads: the bound socket and the loaded TLS context."""

    sock: socket.socket
    ssl_context: ssl.SSLContext | None
    port: int
    #: ``--metrics-listen``: the metrics' own socket (plain http) and its address
    metrics_sock: socket.socket | None = None
    metrics_address: tuple[str, int] | None = None


def bind_socket(host: str, port: int, *, listen: bool, reuse_port: bool) -> socket.socket:
    """A TCP socket bound to ``host:port`` (listening when ``listen``). ``reuse_port``: every
    worker binds its own socket to the same port and the kernel spreads new connections over
    them evenly (one shared socket lets whichever worker wakes first take them all)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        if listen:
            sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def check_operator_settings(config: ServerConfig) -> None:
    """--tools, --transcripts and the language settings, checked before any model loads."""
    if config.tools:
        from omnicall.engine.tools import ToolError, load_tools

        try:
            load_tools(config.tools, config.tool_timeout_s)
        except ToolError as exc:
            raise StartupError(str(exc)) from exc
    if config.transcripts:
        from omnicall.app.transcripts import transcript_folder

        try:
            transcript_folder(config.transcripts)
        except OSError as exc:
            raise StartupError(f"--transcripts {config.transcripts}: {exc}") from exc
    if config.engine == "cascade":
        from omnicall.engine.languages import LanguageError, check_languages

        try:
            check_languages(config.language, config.asr, config.voice)
        except LanguageError as exc:
            raise StartupError(str(exc)) from exc


def preflight(config: ServerConfig) -> Listener:
    """Load the TLS files and bind the port first: a mistake there is a one-line error in a
    second, not a traceback after the models have loaded. With ``--workers`` the socket is
    bound but not listening: it holds the port for the workers' own sockets (SO_REUSEPORT)."""
    ssl_context = None
    check_operator_settings(config)
    if config.tls:
        for flag, path in (("--cert", config.cert), ("--key", config.key)):
            try:
                present = Path(path).is_file()
            except OSError as exc:  # a folder this user may not enter (a container's mount)
                raise StartupError(f"{flag} {path}: cannot be read ({exc.strerror})") from exc
            if not present:
                raise StartupError(f"{flag} {path}: no such file")
        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            ssl_context.load_cert_chain(config.cert, config.key)
        except (ssl.SSLError, OSError) as exc:
            raise StartupError(f"--cert {config.cert} / --key {config.key}: not a usable "
                               f"certificate and key ({exc})") from exc
    group = config.workers > 1
    sock = _bind_checked(config.host, config.port, group, "--host", "--port or OMNICALL_PORT")
    listener = Listener(sock, ssl_context, int(sock.getsockname()[1]))
    if config.metrics_address is not None:
        host, port = config.metrics_address
        try:
            listener.metrics_sock = _bind_checked(host, port, group, "--metrics-listen",
                                                  "--metrics-listen or OMNICALL_METRICS_LISTEN")
        except StartupError:
            sock.close()
            raise
        listener.metrics_address = (host, int(listener.metrics_sock.getsockname()[1]))
    return listener


def _bind_checked(host: str, port: int, group: bool, host_flag: str,
                  port_hint: str) -> socket.socket:
    """:func:`bind_socket`, or a one-line StartupError naming the flag to change."""
    try:
        return bind_socket(host, port, listen=not group, reuse_port=group)
    except socket.gaierror as exc:
        raise StartupError(f"{host_flag} {host}: not a known address ({exc})") from exc
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(f"port {port} on {host} is already in use (another "
                               f"omnicall?); choose another with {port_hint}") from exc
        if exc.errno == errno.EACCES:
            raise StartupError(f"port {port} needs administrator rights; use a port "
                               "above 1023") from exc
        if exc.errno == errno.EADDRNOTAVAIL:
            raise StartupError(f"{host_flag} {host}: not an address of this "
                               "machine") from exc
        raise StartupError(f"cannot listen on {host}:{port}: {exc}") from exc


def ready_urls(host: str, port: int, tls: bool) -> list[str]:
    """Where people can open the page: localhost first, then this machine's addresses when
    listening on all of them."""
    scheme = "https" if tls else "http"
    if host in ("127.0.0.1", "localhost", "::1"):
        return [f"{scheme}://localhost:{port}/"]
    if host not in ("0.0.0.0", "::", ""):
        return [f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}/"]
    urls = [f"{scheme}://localhost:{port}/"]
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if isinstance(ip.ip, str):
                address = ipaddress.ip_address(ip.ip)
                if not (address.is_loopback or address.is_link_local):
                    urls.append(f"{scheme}://{address}:{port}/")
            elif host == "::":
                address = ipaddress.ip_address(ip.ip[0])
                if not (address.is_loopback or address.is_link_local):
                    urls.append(f"{scheme}://[{address}]:{port}/")
    return urls


def ready_line(config: ServerConfig, port: int, engine_server: bool = False) -> str:
    urls = ready_urls(config.host, port, config.tls)
    if engine_server:
        ws = [u.replace("http", "ws", 1) + "v1/realtime" for u in urls]
        return (f"omnicall engine server is ready: {ws[0]} (model "
                f"{config.served_model_name!r}, engine {config.engine})")
    line = f"omnicall is ready: open {urls[0]} in a browser"
    if len(urls) > 1:
        line += f" (from other machines: {', '.join(urls[1:])}"
        line += ")" if config.tls else "; browsers allow the microphone there only over https)"
    return line


AppFactory = Callable[..., web.Application]


@dataclass(frozen=True)
class Service:
    """What a process serves: the app it builds, and whether it is an engine server
    (``serve-engine``: its ready line names the Realtime URL, not the page)."""

    factory: AppFactory = create_app
    engine_server: bool = False


FRONT_END = Service()


def engine_service() -> Service:
    from omnicall.app.engine_server import create_engine_app  # only serve-engine needs it

    return Service(create_engine_app, engine_server=True)


async def serve(config: ServerConfig, listener: Listener, service: Service = FRONT_END,
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
    await web.SockSite(runner, listener.sock, ssl_context=listener.ssl_context).start()
    metrics_runner = await _serve_metrics(app, listener)
    if worker is not None:
        worker.socket_path().unlink(missing_ok=True)
        await web.UnixSite(runner, str(worker.socket_path())).start()
    if ready_fd is not None:
        os.write(ready_fd, bytes([worker.index if worker is not None else 0]))
    else:
        print(ready_line(config, listener.port, service.engine_server), flush=True)
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


async def _serve_metrics(app: web.Application, listener: Listener) -> web.AppRunner | None:
    """``--metrics-listen``: ``/metrics`` and ``/health`` on their own socket (plain http)."""
    if listener.metrics_sock is None or listener.metrics_address is None:
        return None
    from omnicall.app.status_routes import create_metrics_app

    runner = web.AppRunner(create_metrics_app(app), handle_signals=False,
                           keepalive_timeout=app[CONFIG_KEY].header_timeout_s)
    await runner.setup()
    await web.SockSite(runner, listener.metrics_sock).start()
    host, port = listener.metrics_address
    logger.info("metrics on http://%s:%d/metrics", f"[{host}]" if ":" in host else host, port)
    return runner


def run_server(config: ServerConfig, listener: Listener, service: Service = FRONT_END,
               worker: WorkerInfo | None = None, ready_fd: int | None = None) -> None:
    """Serve until SIGINT / SIGTERM on uvloop (asyncio's own loop where it is missing)."""
    coro = serve(config, listener, service, worker, ready_fd)
    try:
        import uvloop
    except ImportError:
        logger.info("uvloop not installed; using asyncio's default loop")
        asyncio.run(coro)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coro)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="omnicall",
                                     description="real-time voice and video assistant")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_parser = sub.add_parser("serve", help="start the server")
    add_arguments(serve_parser)
    engine_parser = sub.add_parser(
        "serve-engine", help="serve an engine over the OpenAI Realtime protocol "
        "(ws://HOST:PORT/v1/realtime) for front-ends started with --engine remote")
    add_arguments(engine_parser)
    sub.add_parser("memory", help="expected GPU memory of a Qwen3-Omni call", add_help=False)
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["memory"]:
        from omnicall.engine.qwen_omni.memory import main as memory_main  # heavy: only when asked

        return memory_main(raw[1:])
    args = parser.parse_args(raw)
    command_parser = engine_parser if args.command == "serve-engine" else serve_parser
    service = engine_service() if args.command == "serve-engine" else FRONT_END
    try:
        config = config_from(args)
        if args.command == "serve-engine" and config.engine == "remote":
            raise ConfigError("serve-engine hosts a local engine: cascade, qwen-omni or loopback")
    except ConfigError as exc:
        command_parser.error(str(exc))
    configure_logging(config.log_level)
    try:
        listener = preflight(config)
    except StartupError as exc:
        print(f"omnicall: {exc}", file=sys.stderr, flush=True)
        return 2
    if config.workers > 1:
        return _run_workers(config, listener, service)
    run_server(config, listener, service)
    return 0


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def _run_workers(config: ServerConfig, listener: Listener, service: Service) -> int:
    """``--workers N``: a supervisor forks N workers, each listening on its own SO_REUSEPORT
    socket on the port, and replaces any that dies (:mod:`omnicall.app.supervisor`). Forked
    before any event loop or model exists."""
    runtime_dir = Path(tempfile.mkdtemp(prefix="omnicall-workers-"))

    def work(index: int, ready_fd: int) -> None:
        logging.getLogger().name = f"worker-{index}"
        own = Listener(bind_socket(config.host, listener.port, listen=True, reuse_port=True),
                       listener.ssl_context, listener.port)
        listener.sock.close()  # the supervisor's keeps the port; this worker listens on its own
        if listener.metrics_sock is not None and listener.metrics_address is not None:
            own.metrics_sock = bind_socket(*listener.metrics_address, listen=True,
                                           reuse_port=True)
            own.metrics_address = listener.metrics_address
            listener.metrics_sock.close()
        run_server(config, own, service, WorkerInfo(index, config.workers, runtime_dir), ready_fd)

    supervisor = Supervisor(config.workers, work, runtime_dir,
                            shutdown_timeout_s=config.shutdown_timeout_s + 2,
                            on_ready=lambda: print(ready_line(
                                config, listener.port, service.engine_server), flush=True))
    logger.info("supervising %d worker processes on port %d", config.workers, listener.port)
    try:
        return supervisor.run()
    finally:
        listener.sock.close()
        if listener.metrics_sock is not None:
            listener.metrics_sock.close()
        shutil.rmtree(runtime_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
