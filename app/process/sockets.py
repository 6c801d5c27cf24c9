"""The sockets a server listens on, checked before any model loads: the TCP port (and
``--metrics-listen``'s), the TLS certificate and key, and the operator's files
(:func:`preflight`); and the ready line that says where to open the page."""

from __future__ import annotations

import errno
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import ifaddr

from omnicall.app.config import ServerConfig

LISTEN_BACKLOG = 512


class StartupError(RuntimeError):
    """The server cannot start; the message is one line that says what to change."""


@dataclass
class BoundSocket:
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
    for flag, folder in (("--transcripts", config.transcripts), ("--record", config.record)):
        if folder:
            from omnicall.app.storage.transcripts import transcript_folder

            try:
                transcript_folder(folder)
            except OSError as exc:
                raise StartupError(f"{flag} {folder}: {exc}") from exc
    if config.engine == "cascade":
        from omnicall.engine.languages import LanguageError, check_languages

        try:
            cascade = config.cascade
            check_languages(config.conversation.language, cascade.asr, cascade.voice,
                            cascade.asr_url, cascade.tts_url)
        except LanguageError as exc:
            raise StartupError(str(exc)) from exc


def preflight(config: ServerConfig) -> BoundSocket:
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
    bound = BoundSocket(sock, ssl_context, int(sock.getsockname()[1]))
    if config.metrics_address is not None:
        host, port = config.metrics_address
        try:
            bound.metrics_sock = _bind_checked(host, port, group, "--metrics-listen",
                                                  "--metrics-listen or OMNICALL_METRICS_LISTEN")
        except StartupError:
            sock.close()
            raise
        bound.metrics_address = (host, int(bound.metrics_sock.getsockname()[1]))
    return bound


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



