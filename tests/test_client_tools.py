"""Tools a Realtime client declared: calls go out as function-call events, the client's
result (or a timeout) comes back."""

from __future__ import annotations

import asyncio
import json

from openai.types import realtime as rt_types

from omnicall.app.realtime.client_tools import MAX_TOOLS, ClientTools, client_tool_specs
from omnicall.engine.tools import MAX_OUTPUT_CHARS, ToolSpec
from omnicall.media.clock import MonotonicClock


def function_tool(name: str | None, parameters: object = None) -> rt_types.RealtimeFunctionTool:
    return rt_types.RealtimeFunctionTool(type="function", name=name, description="d",
                                         parameters=parameters)


def test_specs_keep_named_function_tools_up_to_the_limit() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    specs = client_tool_specs([function_tool("weather", schema), function_tool(None),
                               function_tool("time", "not a schema")])
    assert [s.name for s in specs] == ["weather", "time"]
    assert specs[0].parameters == schema
    assert specs[1].parameters == {"type": "object", "properties": {}}
    assert len(client_tool_specs([function_tool(f"t{n}") for n in range(MAX_TOOLS + 5)])) \
        == MAX_TOOLS
    assert client_tool_specs(None) == []


async def test_a_call_is_answered_by_the_clients_result() -> None:
    sent: list[tuple[str, str, str]] = []
    went_out = asyncio.Event()

    async def send(call_id: str, name: str, arguments: str) -> None:
        sent.append((call_id, name, arguments))
        went_out.set()

    tools = ClientTools(send, MonotonicClock(), [ToolSpec("weather", "d", {})], timeout_s=5.0)
    assert [s.name for s in tools.specs()] == ["weather"] and not tools.speculative("weather")
    call = asyncio.create_task(tools.call("call_1", "weather", {"city": "Oslo"}))
    await asyncio.wait_for(went_out.wait(), 5.0)
    assert sent == [("call_1", "weather", json.dumps({"city": "Oslo"}))]
    assert not tools.resolve("call_nope", "x")
    assert tools.resolve("call_1", "y" * (MAX_OUTPUT_CHARS + 10))
    outcome = await call
    assert outcome.ok and outcome.output == "y" * MAX_OUTPUT_CHARS and outcome.ms >= 0
    assert not tools.resolve("call_1", "late") and not tools.pending


async def test_a_call_without_a_result_times_out() -> None:
    async def send(call_id: str, name: str, arguments: str) -> None:
        return None

    tools = ClientTools(send, MonotonicClock(), [], timeout_s=0.05)
    outcome = await tools.call("call_2", "t", {})
    assert not outcome.ok and "no result within 0.05 s" in outcome.error
    assert not tools.pending
