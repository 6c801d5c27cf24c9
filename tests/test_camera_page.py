"""What the assistant looked at, on the caller's page.

A camera frame that went to the model (``CameraSeen``) reaches the caller's page as a small
JPEG thumbnail over the data channel, in a real aiortc call; nothing of it reaches the
``--transcripts`` file, the transcript store, the logs, or a ``serve-engine`` client. In real
headless Chromium the page shows the thumbnail for a moment and the camera's state (off / on /
sent), without moving anything else on the page; and with the default cascade engine the
thumbnail appears after a spoken turn.

The engine here is the loopback engine taught to look (:class:`SeeingSession`): it runs the
shared :class:`~omnicall.engine.conversation.camera.Camera` on the frames the media plane
samples and, when a test asks, ends a turn the way an engine does (the turn's frame to the
model, a ``CameraSeen`` with its thumbnail, a short reply).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from pathlib import Path
from typing import Any

import aiohttp
import cv2
import numpy as np
import pytest

from omnicall.app.app_state import CALLS_KEY, STORE_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.realtime.server import create_engine_app
from omnicall.app.setup import create_runner
from omnicall.client import Microphone, connect
from omnicall.engine import realtime as rt
from omnicall.engine.base import EngineSession, SessionOptions
from omnicall.engine.conversation.camera import Camera, thumbnail_jpeg
from omnicall.engine.events import (
    AssistantAudio,
    AssistantText,
    CameraSeen,
    TurnEvent,
    UserTranscript,
)
from omnicall.engine.loopback import LoopbackEngine, LoopbackSession
from omnicall.media.timebase import FRAME_MS
from tests.chromium import chromium_page, have_browser_tools, make_y4m, question_wav
from tests.utils import ColorVideoTrack, running_server, serving, tone, wait_for

JPEG_URL = "data:image/jpeg;base64,/9j/"  # a JPEG's first bytes (FF D8 FF) in base64


class SeeingSession(LoopbackSession):
    """Every sampled frame goes through the shared camera; :meth:`look` makes the next frame
    end a turn: the turn's frame goes to the model and the page hears of it (``CameraSeen``),
    then a short reply."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.camera = Camera()
        self.asked: list[str] = []  # words of the turns still to end
        self.seen: list[CameraSeen] = []
        self.turns = 0

    def look(self, words: str = "What am I holding in my hand?") -> None:
        self.asked.append(words)

    async def process(self) -> None:
        while True:
            unit = await self.next_unit()
            if unit.video is None:
                continue
            at_s = unit.index * FRAME_MS / 1000
            self.camera.see(unit.video, at_s, speaking=bool(self.asked))
            if not self.asked:
                continue
            words = self.asked.pop(0)
            self.turns += 1
            turn = self.turns
            sighting = self.camera.end_turn(at_s, words)
            assert sighting is not None
            seen = CameraSeen(turn, sighting.image_id, thumbnail_jpeg(sighting),
                              sighting.selection.sharp)
            self.seen.append(seen)
            for event in (TurnEvent("user", "start", turn),
                          UserTranscript(words, final=True, turn_id=turn),
                          TurnEvent("user", "end", turn), seen,
                          TurnEvent("assistant", "start", turn), AssistantText("A mug.", turn),
                          AssistantAudio(np.zeros(2400, np.int16), 24_000, 0, turn),
                          TurnEvent("assistant", "end", turn)):
                await self.emit(event)


class SeeingEngine(LoopbackEngine):
    def __init__(self) -> None:
        super().__init__()
        self.sessions: list[SeeingSession] = []

    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        session = SeeingSession(session_id, options, self._worker)
        self.sessions.append(session)
        return session


def only_file(folder: Path) -> str:
    """The text of the one file in ``folder`` (a call's --transcripts file)."""
    files = list(folder.iterdir())
    assert len(files) == 1, files
    return files[0].read_text()


def traces(jpeg: bytes) -> list[str]:
    """What would betray the image in text: its base64 (any part), its bytes' repr."""
    b64 = base64.b64encode(jpeg).decode("ascii")
    return [b64[:32], b64[len(b64) // 2:len(b64) // 2 + 32], repr(jpeg)[2:34], "/9j/"]


async def test_the_thumbnail_goes_to_the_page_only(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """A real call with --transcripts and the transcript store: the page gets each frame's
    thumbnail as a JPEG data URL; the file, the store and the logs (every level) get nothing
    of it."""
    caplog.set_level(logging.DEBUG)
    engine = SeeingEngine()
    cfg = ServerConfig(engine="loopback", ice_loopback=True, transcripts=str(tmp_path))
    async with running_server(cfg, engine=engine) as (url, app):
        call = await connect(url, Microphone(tone(300, 20, rate=48_000)),
                                    ColorVideoTrack())
        await wait_for(lambda: engine.sessions and engine.sessions[0].camera.latest is not None,
                       timeout_s=15)
        seeing = engine.sessions[0]
        seeing.look()
        seeing.look("and now?")
        await wait_for(lambda: sum(m.get("type") == "camera" for m in call.messages) == 2, 15)
        session = app[CALLS_KEY].sessions[call.session_id]
        stored = await app[STORE_KEY].load(call.session_id)
        frames_seen = session.events.frames_seen
        await call.close()
        await wait_for(lambda: len(app[CALLS_KEY]) == 0, timeout_s=10)
    camera = [m for m in call.messages if m.get("type") == "camera"]
    assert [m["turn"] for m in camera] == [1, 2] and frames_seen == 2
    assert [m["sharp"] for m in camera] == [True, False]  # "in my hand" asks to look
    for message, seen in zip(camera, seeing.seen, strict=True):
        assert message["thumb"].startswith(JPEG_URL) and message["image"] == seen.image_id
        jpeg = base64.b64decode(message["thumb"].split(",", 1)[1])
        assert jpeg == seen.thumb_jpeg
        image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
        assert image.shape == (72, 96, 3)  # the media plane's 448 x 336, thumbnailed
    written = only_file(tmp_path)
    records = [json.loads(line) for line in written.splitlines()]
    assert [(r["type"], r.get("role")) for r in records] == [
        ("call", None), ("turn", "user"), ("turn", "assistant"), ("turn", "user"),
        ("turn", "assistant"), ("call", None)]
    assert stored == [("user", "What am I holding in my hand?"), ("assistant", "A mug."),
                      ("user", "and now?"), ("assistant", "A mug.")]
    for seen in seeing.seen:
        for trace in traces(seen.thumb_jpeg):
            assert trace not in written and trace not in caplog.text
            assert all(trace not in text for item in stored for text in item)
    assert "camera" not in written and "thumb" not in caplog.text


async def test_a_serve_engine_client_receives_nothing_image_bearing() -> None:
    """serve-engine: the client's input_image goes to the model, the engine says so
    (CameraSeen), and no server event carries any image back."""
    engine = SeeingEngine()
    ok, png = cv2.imencode(".png", np.full((336, 448, 3), 90, np.uint8))
    assert ok
    app = create_engine_app(ServerConfig(engine="loopback"), engine=engine)
    received: list[str] = []
    async with serving(app, create_runner(app)) as port, aiohttp.ClientSession() as http, \
            http.ws_connect(f"ws://127.0.0.1:{port}/v1/realtime") as ws:

        async def receive_until(kind: str) -> None:
            async with asyncio.timeout(10):
                while True:
                    text = (await ws.receive()).data
                    received.append(text)
                    if json.loads(text)["type"] == kind:
                        return

        await receive_until("session.created")
        engine.sessions[0].look()
        await ws.send_str(json.dumps({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{
                "type": "input_image",
                "image_url": "data:image/png;base64," + base64.b64encode(png).decode()}]}}))
        await ws.send_str(rt.dump(rt.audio_append(tone(300, 0.5, rate=24_000))))
        await receive_until("response.done")
    seen = engine.sessions[0].seen
    assert len(seen) == 1  # a frame went to the model, and the engine said so
    kinds = [json.loads(text)["type"] for text in received]
    assert "response.output_audio_transcript.delta" in kinds  # the turn's reply came
    everything = "".join(received)
    for trace in traces(seen[0].thumb_jpeg):
        assert trace not in everything
    assert "image" not in everything and "camera" not in everything


# -- the page, in real headless Chromium ------------------------------------------------------

CAMERA_STATE = "document.getElementById('camera-state').dataset.camera"
THUMB_SHOWN = ("(() => { const i = document.getElementById('seen-thumb');"
               " return !i.hidden && i.complete && i.naturalWidth > 0"
               " && i.src.startsWith('data:image/jpeg;base64,'); })()")
LAYOUT_JS = """() => ['.captions', '.text-form', '#self', '.seen'].map((s) => {
  const r = document.querySelector(s).getBoundingClientRect();
  return [s, Math.round(r.x), Math.round(r.y), Math.round(r.width), Math.round(r.height)];
})"""


async def camera_state(page: Any) -> str:
    return str(await page.evaluate(CAMERA_STATE))


@pytest.mark.browser
@pytest.mark.skipif(not have_browser_tools(), reason="needs chromium, espeak-ng, ffmpeg "
                    "(make system-deps installs them)")
async def test_the_page_shows_what_the_assistant_saw_for_a_moment(tmp_path: Path) -> None:
    """off before the call, on while the camera runs, sent (sharp marked) with the thumbnail
    for a few seconds after a frame went to the model, then on again; off when the camera is
    turned off and when the call ends. Nothing else on the page moves meanwhile, and the image
    is in no log line nor in the page's kept messages."""
    engine = SeeingEngine()
    cfg = ServerConfig(engine="loopback", ice_loopback=True)
    async with running_server(cfg, engine=engine) as (url, app), chromium_page(
            None, make_y4m(tmp_path / "cam.y4m", seconds=8)) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(url + "?processing=off")
        before_call = await camera_state(page)
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.wait_for_function(f"{CAMERA_STATE} === 'on'", timeout=5_000)
        await wait_for(lambda: engine.sessions and engine.sessions[0].camera.latest is not None,
                       timeout_s=15)
        layout_on = await page.evaluate(LAYOUT_JS)
        engine.sessions[0].look()
        await page.wait_for_function(f"{CAMERA_STATE} === 'sent' && {THUMB_SHOWN}",
                                     timeout=10_000)
        shown = await page.evaluate("""() => {
          const i = document.getElementById('seen-thumb');
          const s = document.getElementById('camera-state');
          return {alt: i.alt, width: i.naturalWidth, height: i.naturalHeight, text: s.textContent,
                  sharp: s.dataset.sharp, live: s.getAttribute('aria-live')}; }""")
        layout_sent = await page.evaluate(LAYOUT_JS)
        await page.wait_for_function(f"{CAMERA_STATE} === 'on'", timeout=8_000)  # a moment
        hidden_after = await page.evaluate("document.getElementById('seen-thumb').hidden")
        layout_after = await page.evaluate(LAYOUT_JS)
        kept = await page.evaluate("window.omnicall.messages.filter(m => m.type === 'camera')")
        log_text = await page.text_content("#events")
        transcript = await page.evaluate("window.omnicallView.transcriptLines()")
        await page.click("#camera")  # turned off on the page
        camera_off = await camera_state(page)
        await page.click("#camera")
        camera_on_again = await camera_state(page)
        await page.click("#stop")
        after_call = await camera_state(page)
        await wait_for(lambda: len(app[CALLS_KEY]) == 0, timeout_s=10)
    assert not errors, errors
    assert before_call == "off" and camera_off == "off" and camera_on_again == "on"
    assert after_call == "off" and hidden_after
    assert shown["width"] == 96 and shown["height"] == 72, shown
    assert shown["sharp"] == "true" and shown["text"] == "sharp frame sent"
    assert "assistant" in shown["alt"] and shown["live"] == "polite"
    assert layout_on == layout_sent == layout_after  # no layout shift
    assert len(kept) == 1 and "thumb" not in kept[0] and kept[0]["thumbChars"] > 500
    assert kept[0]["sharp"] is True and kept[0]["turn"] == 1
    assert log_text is not None and "frame went to the assistant" in log_text
    for text in (log_text, transcript):
        assert "base64" not in text and "/9j/" not in text


@pytest.mark.browser
@pytest.mark.skipif(not have_browser_tools(), reason="needs chromium, espeak-ng, ffmpeg "
                    "(make system-deps installs them)")
async def test_the_camera_state_is_off_under_no_video(tmp_path: Path) -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, video=False)
    async with running_server(cfg) as (url, _), chromium_page(
            None, make_y4m(tmp_path / "cam.y4m")) as page:
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        state = await camera_state(page)
        text = await page.text_content("#camera-state")
        await page.click("#stop")
    assert state == "off" and text == "camera off"


@pytest.mark.browser
@pytest.mark.skipif(not have_browser_tools(), reason="needs chromium, espeak-ng, ffmpeg "
                    "(make system-deps installs them)")
async def test_after_a_spoken_turn_the_cascade_shows_its_frame(tmp_path: Path) -> None:
    """The default engine: a spoken question from the fake microphone, the fake camera's test
    pattern; at the end of the turn the cascade says which frame it looked at (described in
    words by its face detector, or shown to a --llm-vision model) and the page shows the
    thumbnail (a JPEG) with the state "sent"."""
    wav = question_wav(tmp_path, "What am I holding in my hand?")
    cfg = ServerConfig(engine="cascade", ice_loopback=True)
    async with running_server(cfg) as (url, _), chromium_page(
            wav, make_y4m(tmp_path / "cam.y4m", seconds=8)) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.wait_for_function(f"{CAMERA_STATE} === 'sent' && {THUMB_SHOWN}",
                                     timeout=30_000)
        thumb_src = await page.evaluate("document.getElementById('seen-thumb').src")
        await page.wait_for_function(
            "window.omnicall.messages.some(m => m.type === 'turn' && m.role === 'assistant'"
            " && m.phase === 'end')", timeout=30_000)
        messages = await page.evaluate("window.omnicall.messages")
        await page.click("#stop")
    assert not errors, errors
    jpeg = base64.b64decode(thumb_src.split(",", 1)[1])
    image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None and max(image.shape[:2]) == 96
    camera = [m for m in messages if m["type"] == "camera"]
    assert camera and camera[0]["thumbChars"] > 500
    user_turns = {m["turn"] for m in messages if m["type"] == "transcript" and m["final"]}
    assert camera[0]["turn"] in user_turns  # the frame went with the spoken turn


@pytest.mark.browser
@pytest.mark.skipif(not have_browser_tools(), reason="needs chromium, espeak-ng, ffmpeg "
                    "(make system-deps installs them)")
async def test_offline_a_label_held_up_is_read_and_the_page_shows_the_facts(
        tmp_path: Path) -> None:
    """The default engine, offline: the fake camera holds up a printed label, the fake
    microphone asks "What does this say?"; the reply quotes the label (read by the PP-OCR
    model from the frame the call carried) and the page lists the facts it was given beside
    the thumbnail."""
    from tests.scenes import WALLS, hold_label, wall, y4m_of

    label = ("EXIT", "Gate B12")
    camera = y4m_of(hold_label(wall(WALLS["grey"], 7), label, 7), tmp_path / "label.y4m")
    wav = question_wav(tmp_path, "What does this say?")
    cfg = ServerConfig(engine="cascade", ice_loopback=True)
    async with running_server(cfg) as (url, _), chromium_page(wav, camera) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.wait_for_function(
            "window.omnicall.messages.some(m => m.type === 'turn' && m.role === 'assistant'"
            " && m.phase === 'end')", timeout=60_000)
        facts_shown = await page.evaluate(
            "[...document.querySelectorAll('#seen-facts li')].map(li => li.textContent)")
        messages = await page.evaluate("window.omnicall.messages")
        await page.click("#stop")
        facts_after = await page.evaluate("document.querySelectorAll('#seen-facts li').length")
    assert not errors, errors
    heard = [m["text"] for m in messages if m["type"] == "transcript" and m["final"]]
    reply = "".join(m["delta"] for m in messages if m["type"] == "assistant_text")
    camera_messages = [m for m in messages if m["type"] == "camera"]
    assert camera_messages and camera_messages[-1]["sharp"] is True, (heard, camera_messages)
    assert 'text reads "EXIT / Gate B12"' in camera_messages[-1]["facts"], camera_messages
    assert reply.strip() == 'It says "EXIT / Gate B12".', (heard, reply)
    assert 'Text reads "EXIT / Gate B12"' in facts_shown, facts_shown
    assert facts_after == 0  # the call is over: nothing of it stays on the page
