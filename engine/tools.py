"""Tools (function calling): Python functions the assistant may call during a reply.

A tool is a plain function (or coroutine function) with type hints and a docstring,
registered with the :func:`tool` decorator in a module the operator names with
``--tools package.module``::

    from omnicall import tool

    @tool
    def local_time(city: str = "") -> str:
        '''The current local time and date.'''
        ...

Its JSON schema is derived from the signature by pydantic (no hand-written schema) and its
arguments are validated the same way before the call. Every engine reaches tools through
the :class:`ToolRunner` interface: the :class:`Toolbox` runs them in this process (with a
time limit); the Realtime engine server forwards them to its client as function calls.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import inspect
import json
import logging
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from pydantic import TypeAdapter, ValidationError, validate_call

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0
MAX_OUTPUT_CHARS = 2000  # what a tool returns goes into the LLM's prompt: keep it short
FILLER = "One moment, let me check."
APOLOGY = "Sorry, I could not get that information right now."
TOOL_ATTRIBUTE = "__omnicall_tool__"


class ToolError(RuntimeError):
    """A tool module or definition the server cannot use (the message says why)."""


@dataclass(frozen=True)
class ToolSpec:
    """What a model is told about a tool."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    #: requests that need this tool: small models pick tools far better with examples
    #: (they become few-shot turns of the prompt; SmolLM2-135M: 6/20 -> 16/20 right)
    examples: tuple[str, ...] = ()

    def openai(self) -> dict[str, Any]:
        """Chat Completions ``tools`` entry."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}

    def realtime(self) -> dict[str, Any]:
        """Realtime ``session.tools`` entry."""
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": self.parameters}


@dataclass
class ToolOutcome:
    """One call, as the transcript and the page record it."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    output: str = ""
    error: str = ""  # '' when the call succeeded
    ms: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.error


class ToolRunner(Protocol):
    """Where an engine sends its tool calls."""

    timeout_s: float

    def filler(self, name: str) -> str: ...

    def speculative(self, name: str) -> bool:
        """May this tool run before the user's turn has surely ended (no side effects)?"""
        ...

    def specs(self) -> list[ToolSpec]: ...

    async def call(self, call_id: str, name: str, arguments: dict[str, Any]) -> ToolOutcome: ...


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    function: Callable[..., Any]
    filler: str = FILLER  # said when the call takes longer than the filler delay
    #: read-only (no side effects): may run during the end-of-turn hangover, on a reply the
    #: user may still cancel by speaking on - its answer is then ready sooner
    speculative: bool = False

    @property
    def name(self) -> str:
        return self.spec.name


def _describe(function: Callable[..., Any]) -> str:
    doc = inspect.getdoc(function) or ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
    if not first:
        raise ToolError(f"tool {function.__name__!r} needs a docstring: the model reads it to "
                        "decide when to call the tool")
    return first


def make_tool(function: Callable[..., Any], *, name: str | None = None,
              description: str | None = None, filler: str = FILLER,
              examples: tuple[str, ...] | list[str] = (), speculative: bool = False) -> Tool:
    """A :class:`Tool` from a typed function (its schema comes from the signature)."""
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolError(f"tool {function.__name__!r}: *args/**kwargs cannot be described "
                            "to a model; name each argument")
        if param.annotation is inspect.Parameter.empty:
            raise ToolError(f"tool {function.__name__!r}: argument {param.name!r} needs a "
                            "type hint")
    try:
        schema = TypeAdapter(cast(Any, function)).json_schema()
    except (TypeError, ValueError) as exc:  # pydantic cannot describe an annotation
        raise ToolError(f"tool {function.__name__!r}: {exc}") from exc
    schema.pop("additionalProperties", None)
    spec = ToolSpec(name or function.__name__, description or _describe(function), schema,
                    tuple(examples))
    return Tool(spec, function, filler, speculative)


def tool(function: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, filler: str = FILLER,
         examples: tuple[str, ...] | list[str] = (), speculative: bool = False) -> Any:
    """Mark a function as a tool: ``@tool`` or ``@tool(name=..., filler=..., examples=[...])``.

    ``filler``: what the assistant says when the call takes longer than 700 ms;
    ``examples``: a few requests that need this tool (they teach small models when to
    call it); ``speculative=True``: the tool only reads (no side effects), so it may run
    before the turn has surely ended (the answer is ready sooner).

    The function itself is returned unchanged (it stays callable and testable); the
    module's tools are collected by :func:`load_tools`."""
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, TOOL_ATTRIBUTE, make_tool(fn, name=name, description=description,
                                              filler=filler, examples=examples,
                                              speculative=speculative))
        return fn
    return mark(function) if function is not None else mark


class Toolbox:
    """Tools run in this process, each call bounded by ``timeout_s``."""

    def __init__(self, tools: list[Tool], timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ToolError(f"two tools share a name: {sorted(names)}")
        self.tools = {t.name: t for t in tools}
        self.timeout_s = timeout_s
        self._validators = {t.name: validate_call(t.function) for t in tools}

    def __len__(self) -> int:
        return len(self.tools)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self.tools.values()]

    def filler(self, name: str) -> str:
        found = self.tools.get(name)
        return found.filler if found is not None else FILLER

    def speculative(self, name: str) -> bool:
        found = self.tools.get(name)
        return found is not None and found.speculative

    async def call(self, call_id: str, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run one call; failures and time-outs come back in :attr:`ToolOutcome.error`."""
        outcome = ToolOutcome(call_id, name, arguments)
        started = time.monotonic()
        try:
            outcome.output = _as_text(await asyncio.wait_for(self._run(name, arguments),
                                                             self.timeout_s))
        except TimeoutError:
            outcome.error = f"timed out after {self.timeout_s:g} s"
        except ValidationError as exc:
            outcome.error = f"bad arguments: {exc.errors(include_url=False)[0]['msg']}"
        except ToolError as exc:
            outcome.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - an operator's tool may raise anything
            logger.warning("tool %s failed: %s: %s", name, type(exc).__name__, exc)
            outcome.error = f"{type(exc).__name__}: {exc}"
        outcome.ms = (time.monotonic() - started) * 1000
        if outcome.error:
            logger.info("tool %s: %s", name, outcome.error)
        return outcome

    async def _run(self, name: str, arguments: dict[str, Any]) -> Any:
        found = self.tools.get(name)
        if found is None:
            raise ToolError(f"no tool named {name!r}")
        validated = self._validators[name]
        if inspect.iscoroutinefunction(found.function):
            return await validated(**arguments)
        # a blocking tool runs on a thread: the event loop keeps moving media meanwhile
        # (a thread cannot be stopped: one that overruns its time limit finishes unheard)
        return await asyncio.to_thread(functools.partial(validated, **arguments))


def new_call_id() -> str:
    return f"call_{secrets.token_hex(8)}"


def _as_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:MAX_OUTPUT_CHARS]


def collect(module: Any) -> list[Tool]:
    """The tools a module defines (functions marked with :func:`tool`), in source order."""
    found = [getattr(value, TOOL_ATTRIBUTE) for value in vars(module).values()
             if callable(value) and isinstance(getattr(value, TOOL_ATTRIBUTE, None), Tool)]
    return found


def _import(name: str) -> Any:
    """A module name (``examples.tools``) or the path of a ``.py`` file."""
    if name.endswith(".py"):
        path = Path(name)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None or not path.is_file():
            raise ImportError(f"no Python file {name}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(name)


def load_tools(module_name: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Toolbox:
    """Import ``module_name`` (``--tools``: a module name, or a ``.py`` file) and box its
    tools; a :class:`ToolError` says clearly what is wrong (missing module, no tools, a bad
    definition)."""
    if os.getcwd() not in sys.path:  # like uvicorn: modules of the directory it runs in
        sys.path.insert(0, os.getcwd())
    try:
        module = _import(module_name)
    except ImportError as exc:
        raise ToolError(f"--tools {module_name}: cannot import it ({exc}); it must be an "
                        "importable module (on PYTHONPATH), e.g. examples.tools") from exc
    except ToolError as exc:
        raise ToolError(f"--tools {module_name}: {exc}") from exc
    tools = collect(module)
    if not tools:
        raise ToolError(f"--tools {module_name}: the module defines no tools (mark functions "
                        "with @omnicall.tool)")
    logger.info("tools from %s: %s", module_name, ", ".join(t.name for t in tools))
    return Toolbox(tools, timeout_s)
