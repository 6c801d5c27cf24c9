"""omnicall as a library: a server built from a config object, tools and an engine object in
a few lines (the runnable example, driven by a real WebRTC peer), and an engine that a
package registers through the ``omnicall.engines`` entry point group."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import omnicall
from omnicall.app.app_state import TOOLS_KEY
from omnicall.client import Microphone, connect
from omnicall.engine.loopback import LoopbackEngine
from omnicall.engine.registry import EngineUnavailable, create_engine, engine_names
from tests.utils import ROOT, start_process, tone, wait_for


async def test_the_embedding_example_serves_its_persona_and_tools_to_a_real_call() -> None:
    from examples import embed

    config, tools = embed.build(port=0)
    config = omnicall.Config(**{**config.__dict__, "ice_loopback": True})
    server = await omnicall.start(config, tools=tools)
    try:
        assert server.app[TOOLS_KEY] is tools
        async with aiohttp.ClientSession() as http, http.get(server.url + "health") as resp:
            assert resp.status == 200
        call = await connect(server.url, Microphone(tone(0, 30, rate=48_000)))
        await wait_for(lambda: any(m.get("type") == "turn" and m.get("role") == "assistant"
                                   and m.get("phase") == "end" for m in call.messages), 30)
        greeting = "".join(m["delta"] for m in call.messages
                           if m.get("type") == "assistant_text")
        channel = next(iter(call.pc.sctp._data_channels.values()))  # type: ignore[union-attr]
        channel.send(json.dumps({"type": "text", "text": "What time is it?"}))
        await wait_for(lambda: any(m.get("type") == "tool" for m in call.messages), 30)
        await call.close()
    finally:
        await server.stop()
    assert greeting.startswith("Hello! I am Ada")
    tool = next(m for m in call.messages if m.get("type") == "tool")
    assert tool["name"] == "local_time" and tool["ok"] and tool["output"].startswith("It is")


async def test_an_engine_object_and_plain_functions_as_tools() -> None:
    def opening_hours(day: str) -> str:
        """When the museum opens on a given day."""
        return f"{day}: 9 to 6"

    tools = omnicall.toolbox(opening_hours)
    assert tools.specs()[0].parameters["required"] == ["day"]
    server = await omnicall.start(omnicall.Config(port=0, engine="loopback"),
                                  engine=LoopbackEngine(), tools=tools)
    try:
        async with aiohttp.ClientSession() as http, http.get(server.url + "health") as resp:
            health = await resp.json()
        assert health["engine"] == "loopback"
        assert omnicall.ready_message(server).startswith("omnicall is ready: open http")
    finally:
        await server.stop()


@pytest.fixture
def pirate_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example package as pip would install it: its module and a dist-info folder with
    its entry points (no change to the test environment)."""
    site = tmp_path / "site"
    info = site / "omnicall_pirate-0.1.0.dist-info"
    info.mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "omnicall_pirate" / "omnicall_pirate.py", site)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: omnicall-pirate\n"
                                   "Version: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        '[omnicall.engines]\npirate = omnicall_pirate:PirateEngine\n')
    monkeypatch.syspath_prepend(str(site))
    return site


def test_an_engine_registered_by_a_package_is_found_by_name(pirate_installed: Path) -> None:
    assert "pirate" in engine_names()
    assert omnicall.Config(engine="pirate").validate().engine == "pirate"
    engine: Any = create_engine("pirate", config=omnicall.Config(engine="pirate"))
    assert type(engine).__name__ == "PirateEngine" and engine.name == "pirate"
    assert engine.settings.greeting == "Ahoy! Polly here."
    sys.modules.pop("omnicall_pirate", None)


def test_a_registered_engine_that_cannot_load_says_which(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[omnicall.engines]\nbroken = no_such_mod:Engine\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EngineUnavailable, match=r"engine 'broken' \(no_such_mod:Engine\) "
                                                r"cannot be loaded"):
        create_engine("broken")


async def test_omnicall_serve_finds_the_registered_engine(pirate_installed: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pirate_installed), str(ROOT)]))
    server = await start_process("serve", "--engine", "pirate")
    try:
        async with aiohttp.ClientSession() as http, \
                http.get(server.http_url + "health") as resp:
            health = await resp.json()
    finally:
        assert await server.stop() == 0
    assert health["engine"] == "pirate"
