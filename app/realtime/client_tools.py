"""The tools a Realtime client declared in ``session.update`` (``omnicall serve-engine``).

The engine's calls of them go to the client as function-call events, and its
``function_call_output`` item is the result (the ``response.create`` that follows continues the
same reply). Each call waits for its result at most ``timeout_s``; what waits is bounded by
the engine (one reply's calls at a time).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from openai.types import realtime as rt_types

from omnicall.engine.tools import FILLER, MAX_OUTPUT_CHARS, ToolOutcome, ToolSpec
from omnicall.media.clock import Clock

MAX_TOOLS = 64  # declared tools kept; the rest are not offered to the engine

#: sends one function call to the client: (call_id, name, arguments as JSON)
SendCall = Callable[[str, str, str], Awaitable[None]]


def client_tool_specs(tools: list[Any] | None) -> list[ToolSpec]:
    """The function tools of a ``session.update`` (named ones, at most ``MAX_TOOLS``)."""
    specs = [ToolSpec(t.name or "", t.description or "", _schema(t.parameters))
             for t in tools or []
             if isinstance(t, rt_types.RealtimeFunctionTool) and t.name]
    return specs[:MAX_TOOLS]


def _schema(parameters: object) -> dict[str, Any]:
    return dict(parameters) if isinstance(parameters, dict) else {"type": "object",
                                                                   "properties": {}}


class ClientTools:
    """A :class:`~omnicall.engine.tools.ToolRunner` whose tools run on the client."""

    def __init__(self, send_call: SendCall, clock: Clock, specs: list[ToolSpec],
                 timeout_s: float) -> None:
        self._send_call = send_call
        self.clock = clock
        self._specs = specs
        self.timeout_s = timeout_s
        self.pending: dict[str, asyncio.Future[str]] = {}

    def specs(self) -> list[ToolSpec]:
        return self._specs

    def filler(self, name: str) -> str:
        return FILLER

    def speculative(self, name: str) -> bool:
        return False  # the client's tools may act: only for a turn that surely ended

    async def call(self, call_id: str, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        outcome = ToolOutcome(call_id, name, arguments)
        started = self.clock.now()
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.pending[call_id] = future
        try:
            await self._send_call(call_id, name, json.dumps(arguments))
            outcome.output = await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            outcome.error = f"the client sent no result within {self.timeout_s:g} s"
        finally:
            self.pending.pop(call_id, None)
        outcome.ms = (self.clock.now() - started) * 1000
        return outcome

    def resolve(self, call_id: str, output: str) -> bool:
        future = self.pending.get(call_id)
        if future is None or future.done():
            return False
        future.set_result(output[:MAX_OUTPUT_CHARS])
        return True
