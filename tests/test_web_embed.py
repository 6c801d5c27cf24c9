"""The JavaScript client library (web/client/omnicall.js) in real headless Chromium, through
the embedding example (examples/web_embed): a page that is only the library and a few lines
makes a real call to a real server, gets its events, and hangs up for good."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.web_embed.serve import add_example
from omnicall.app.app_state import CALLS_KEY, PARKED_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.http.server import create_app
from omnicall.app.setup import create_runner
from tests.chromium import chromium_page, have_browser_tools, question_wav
from tests.utils import serving, wait_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser_tools(), reason="needs chromium, espeak-ng, ffmpeg "
                       "(make system-deps installs them)"),
]

QUESTION = "What is the capital of France?"
LOGGED = "[...document.querySelectorAll('#log li')].map(li => li.textContent)"


async def test_the_embedding_example_calls_gets_events_and_hangs_up(tmp_path: Path) -> None:
    app = add_example(create_app(ServerConfig(engine="cascade", ice_loopback=True)))
    async with serving(app, create_runner(app)) as port, chromium_page(
            question_wav(tmp_path, QUESTION)) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(f"http://127.0.0.1:{port}/embed/")
        await page.click("#call")
        await page.wait_for_function(
            "document.getElementById('status').textContent === 'connected'", timeout=20_000)
        registry = app[CALLS_KEY]
        await wait_for(lambda: len(registry) == 1, timeout_s=5)
        session = await page.evaluate("window.call.session")
        # the spoken question: its transcript, the reply's captions, the turns as events
        await page.wait_for_function(
            f"{LOGGED}.includes('turn') && document.getElementById('assistant').textContent"
            " && window.call.state === 'connected'", timeout=40_000)
        await page.wait_for_function(
            "document.getElementById('you').textContent.toLowerCase().includes('capital')",
            timeout=30_000)
        rtt_ms = await page.evaluate("window.call.ping()")
        offered = await page.evaluate(
            "window.call.pc.getSenders().filter(s => s.track).map(s => s.track.kind)")
        await page.click("#hangup")
        status = await page.text_content("#status")
        # a hangup is final: the call is gone and nothing is parked for a resume
        await wait_for(lambda: len(registry) == 0, timeout_s=10)
        parked = len(app[PARKED_KEY])
        logged = await page.evaluate(LOGGED)
        tracks = await page.evaluate(
            "window.call.stream.getTracks().map(t => t.readyState)")
    assert not errors, errors
    assert session and parked == 0
    assert "state: ready" in logged and "transcript" in logged, logged
    assert any(line.startswith("assistant_text: ") for line in logged), logged
    assert 0 < rtt_ms < 5000
    assert offered == ["audio"]  # camera: false
    assert status == "ended (hangup)"
    assert tracks == ["ended"]  # the microphone the library opened is stopped
