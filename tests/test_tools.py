"""Tools: schemas from signatures, validated calls, time limits, module loading, and the
example tools that ship in ``examples/``."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
from pathlib import Path

import pytest

from omnicall.engine.tools import FILLER, Toolbox, ToolError, collect, load_tools, make_tool, tool


def museum_hours(day: str, late: bool = False) -> str:
    """Opening hours on a given day.

    Longer notes the model never sees."""
    return f"{day}: 9 to {'9' if late else '6'}"


async def slow(seconds: float) -> str:
    """Waits a while."""
    await asyncio.sleep(seconds)
    return "done"


def broken() -> str:
    """Always fails."""
    raise KeyError("no such record")


def test_the_schema_and_description_come_from_the_signature_and_docstring() -> None:
    spec = make_tool(museum_hours).spec
    assert spec.name == "museum_hours"
    assert spec.description == "Opening hours on a given day."
    assert spec.parameters["required"] == ["day"]
    assert spec.parameters["properties"]["day"]["type"] == "string"
    assert spec.parameters["properties"]["late"] == {"default": False, "title": "Late",
                                                     "type": "boolean"}
    assert spec.openai()["function"]["parameters"] == spec.parameters
    assert spec.realtime()["type"] == "function" and spec.realtime()["name"] == "museum_hours"


def test_tools_without_docstrings_or_type_hints_are_refused() -> None:
    def nodoc(x: int) -> int:
        return x

    def untyped(x) -> int:  # type: ignore[no-untyped-def]
        """Doc."""
        return 1

    def splat(*args: int) -> int:
        """Doc."""
        return 1

    for bad, words in ((nodoc, "docstring"), (untyped, "type hint"), (splat, "*args")):
        with pytest.raises(ToolError, match=re.escape(words)):
            make_tool(bad)


async def test_calls_are_validated_and_coerced_by_the_signature() -> None:
    box = Toolbox([make_tool(museum_hours)])
    ok = await box.call("c1", "museum_hours", {"day": "Monday", "late": "yes"})
    assert ok.ok and ok.output == "Monday: 9 to 9" and ok.ms >= 0
    bad = await box.call("c2", "museum_hours", {"late": True})
    assert not bad.ok and "bad arguments" in bad.error
    missing = await box.call("c3", "no_such_tool", {})
    assert "no tool named" in missing.error


async def test_a_failing_tool_and_a_slow_tool_become_errors_not_crashes() -> None:
    box = Toolbox([make_tool(broken), make_tool(slow)], timeout_s=0.3)
    failed = await box.call("c1", "broken", {})
    assert failed.error == "KeyError: 'no such record'"
    started = time.monotonic()
    late = await box.call("c2", "slow", {"seconds": 5})
    assert late.error == "timed out after 0.3 s"
    assert time.monotonic() - started < 4.0  # not the tool's 5 s: given up at its bound


async def test_a_blocking_tool_runs_off_the_event_loop() -> None:
    ticked = threading.Event()  # set by the event loop while the tool blocks its thread

    def blocking() -> str:
        """Blocks its thread until the event loop has run on (or gives up)."""
        return "ok" if ticked.wait(10) else "the loop stood still"

    box = Toolbox([make_tool(blocking)], timeout_s=30)

    async def ticker() -> None:
        for _ in range(3):
            await asyncio.sleep(0.01)
        ticked.set()

    task = asyncio.ensure_future(ticker())
    outcome = await box.call("c", "blocking", {})
    await task
    assert outcome.output == "ok", outcome  # the loop kept running while the tool blocked


def test_the_decorator_marks_functions_and_load_tools_collects_them(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    module = tmp_path / "kiosk_tools.py"
    module.write_text(
        "from omnicall.engine.tools import tool\n"
        "@tool(filler='Checking.', examples=['Is it raining?'])\n"
        "def weather(city: str) -> str:\n"
        "    '''The weather in a city.'''\n"
        "    return f'Sunny in {city}'\n"
        "def helper() -> None:\n"
        "    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    box = load_tools("kiosk_tools", timeout_s=2.0)
    assert [s.name for s in box.specs()] == ["weather"]
    assert box.filler("weather") == "Checking." and box.filler("other") == FILLER
    assert box.specs()[0].examples == ("Is it raining?",)
    assert box.timeout_s == 2.0
    by_path = load_tools(str(module))  # a .py file works as well as a module name
    assert [s.name for s in by_path.specs()] == ["weather"]
    sys.modules.pop("kiosk_tools", None)


def test_unusable_tool_modules_are_one_clear_error(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "empty_tools.py").write_text("X = 1\n")
    (tmp_path / "bad_tools.py").write_text(
        "from omnicall.engine.tools import tool\n@tool\ndef f(x) -> str:\n    '''Doc.'''\n")
    with pytest.raises(ToolError, match="no_such_module_xyz: cannot import"):
        load_tools("no_such_module_xyz")
    with pytest.raises(ToolError, match="defines no tools"):
        load_tools("empty_tools")
    with pytest.raises(ToolError, match=r"bad_tools: .*needs a type hint"):
        load_tools("bad_tools")


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(ToolError, match="share a name"):
        Toolbox([make_tool(broken), make_tool(broken)])


async def test_the_example_tools_answer_from_the_clock_and_the_faq_file() -> None:
    from examples import tools as examples

    box = Toolbox(collect(examples))
    assert [s.name for s in box.specs()] == ["local_time", "museum_faq"]
    now = await box.call("c1", "local_time", {})
    assert re.fullmatch(r"It is \d\d:\d\d on \w+day, \d\d \w+ \d{4}", now.output), now.output
    faq = json.loads((Path(examples.__file__).parent / "faq.json").read_text())
    hours = await box.call("c2", "museum_faq", {"question": "What are the opening hours?"})
    assert hours.output == faq["opening hours"]
    ticket = await box.call("c3", "museum_faq", {"question": "How much is a ticket?"})
    assert ticket.output == faq["tickets"]
    unknown = await box.call("c4", "museum_faq", {"question": "Capital of France?"})
    assert unknown.output.startswith("The FAQ has no answer")


def test_tool_decorator_leaves_the_function_callable() -> None:
    @tool
    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    assert double(4) == 8
