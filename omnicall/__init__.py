"""omnicall as a library: a real-time voice-and-video assistant server in a few lines.

Run one (blocks until Ctrl-C; prints the URL)::

    import omnicall

    @omnicall.tool(examples=["What's on today?"])
    def todays_events() -> str:
        '''Today's events at the venue.'''
        return "A guided tour at 3 pm."

    omnicall.run(omnicall.Config(instructions="You are the venue's guide."),
                 tools=omnicall.toolbox(todays_events))

or start one inside an asyncio program (``await omnicall.start(...)`` returns a
:class:`Server` with ``url`` and ``stop()``). ``engine=`` takes any
:class:`Engine` object (your own class, or one of the built-in engines); a package can also
register an engine under a name for ``--engine NAME`` (entry point group
``omnicall.engines``, see ``omnicall.engine.registry``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from omnicall.app.config import ConfigError, ServerConfig
from omnicall.app.http.server import create_app
from omnicall.app.process.sockets import BoundSocket, preflight, ready_line
from omnicall.app.serve import Service, run_server
from omnicall.app.setup import create_runner
from omnicall.engine.base import Engine, EngineSession, SessionOptions
from omnicall.engine.events import (
    AssistantAudio,
    AssistantText,
    EngineError,
    EngineEvent,
    StageTiming,
    ToolCall,
    TurnEvent,
    UserTranscript,
)
from omnicall.engine.queued_session import QueuedEngineSession
from omnicall.engine.registry import ENTRY_POINT_GROUP, create_engine
from omnicall.engine.tools import (
    TOOL_ATTRIBUTE,
    Tool,
    Toolbox,
    ToolError,
    load_tools,
    make_tool,
    tool,
)

Config = ServerConfig

__all__ = [
    "ENTRY_POINT_GROUP", "AssistantAudio", "AssistantText", "Config", "ConfigError", "Engine",
    "EngineError", "EngineEvent", "EngineSession", "QueuedEngineSession", "Server",
    "SessionOptions", "StageTiming", "Tool", "ToolCall", "ToolError", "Toolbox", "TurnEvent",
    "UserTranscript", "create_app", "create_engine", "load_tools", "run", "start", "tool",
    "toolbox",
]


def toolbox(*functions: Callable[..., Any], timeout_s: float = 5.0) -> Toolbox:
    """Tools from functions (marked with :func:`tool`, or plain typed functions with a
    docstring)."""
    tools: list[Tool] = []
    for function in functions:
        marked = getattr(function, TOOL_ATTRIBUTE, None)
        tools.append(marked if isinstance(marked, Tool) else make_tool(function))
    return Toolbox(tools, timeout_s)


def _factory(engine: Engine | None, tools: Toolbox | None) -> Callable[..., web.Application]:
    @functools.wraps(create_app)
    def factory(config: ServerConfig, **kwargs: Any) -> web.Application:
        return create_app(config, engine=engine, tools=tools, **kwargs)
    return factory


def run(config: ServerConfig | None = None, *, engine: Engine | None = None,
        tools: Toolbox | None = None) -> None:
    """Serve until SIGINT/SIGTERM, like ``omnicall serve`` (one process; ``workers`` is
    ignored: an engine object lives in this process)."""
    config = (config or ServerConfig()).validate()
    run_server(config, preflight(config), Service(_factory(engine, tools)))


@dataclass
class Server:
    """A server started inside a running event loop."""

    config: ServerConfig
    app: web.Application
    runner: web.AppRunner
    port: int

    @property
    def url(self) -> str:
        host = "localhost" if self.config.host in ("127.0.0.1", "0.0.0.0", "::") \
            else self.config.host
        return f"{'https' if self.config.tls else 'http'}://{host}:{self.port}/"

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start(config: ServerConfig | None = None, *, engine: Engine | None = None,
                tools: Toolbox | None = None) -> Server:
    """Start serving in this event loop (models load and warm up first); ``port=0`` in the
    config picks a free port (see :attr:`Server.url`)."""
    config = (config or ServerConfig()).validate()
    bound: BoundSocket = await asyncio.to_thread(preflight, config)
    app = create_app(config, engine=engine, tools=tools)
    runner = create_runner(app)
    await runner.setup()
    await web.SockSite(runner, bound.sock, ssl_context=bound.ssl_context).start()
    return Server(config, app, runner, bound.port)


def ready_message(server: Server) -> str:
    return ready_line(server.config, server.port)
