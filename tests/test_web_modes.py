"""The page in real headless Chromium: call, kiosk and companion modes, token from the URL
fragment, resume after a dropped connection, reconnection after a server restart.

Screenshots of each mode are saved under ``test-artifacts/`` and checked to be non-blank.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from aiohttp import web

from omnicall.app.app_state import CALLS_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.http.server import create_app
from omnicall.app.setup import create_runner
from omnicall.engine.conversation.backchannels import verdict, words_of
from omnicall.media.echo_canceller import RoomSettings
from tests.chromium import chromium_page, have_browser_tools, make_y4m, question_wav
from tests.talking_face import face_for_wav
from tests.test_browser_e2e import INBOUND_AUDIO_JS
from tests.utils import running_server, start_process, wait_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser_tools(), reason="needs chromium, espeak-ng, ffmpeg "
                       "(make system-deps installs them)"),
]

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
QUESTION = "What is the capital of France?"
ANSWERED = ("window.omnicall.messages.some(m => m.type === 'turn' && m.role === 'assistant'"
            " && m.phase === 'end')")


def silent_wav(path: Path, seconds: int) -> Path:
    """A silent 48 kHz mono microphone file for Chromium (typed-message tests)."""
    import wave

    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(48_000)
        out.writeframes(bytes(48_000 * 2 * seconds))
    return path


async def screenshot(page: Any, name: str) -> np.ndarray:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    image = cv2.imread(str(path))
    assert image is not None, f"{path} is not an image"
    # non-blank: real contrast and many distinct colours (text, controls, video)
    assert float(image.std()) > 10, f"{name} screenshot looks blank"
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 50
    return image


async def test_call_page_captions_state_latency_and_devices(tmp_path: Path) -> None:
    cfg = ServerConfig(engine="cascade", ice_loopback=True)
    async with running_server(cfg) as (url, _), chromium_page(
            question_wav(tmp_path, QUESTION), make_y4m(tmp_path / "cam.y4m")) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.wait_for_function(ANSWERED, timeout=30_000)
        await page.wait_for_function(
            "document.getElementById('latency-text').textContent.startsWith('Last answer')",
            timeout=10_000)
        mics = await page.eval_on_selector_all("#mic-select option", "o => o.length")
        cams = await page.eval_on_selector_all("#cam-select option", "o => o.length")
        badge = await page.text_content("#assistant-state")
        user = await page.text_content("#user-caption")
        partial = await page.get_attribute("#user-caption", "class")
        await page.click("#mute")
        muted = await page.evaluate("window.omnicall.stream.getAudioTracks()[0].enabled")
        await screenshot(page, "call-page")
        await page.click("#stop")
    assert not errors, errors
    assert mics >= 2 and cams >= 2  # "default" + Chromium's fake devices
    assert badge in ("listening", "speaking")
    assert user is not None and "capital" in user.lower()
    assert "partial" not in (partial or "")  # the final transcript replaced the partials
    assert muted is False


async def test_kiosk_starts_alone_and_resets_when_idle(tmp_path: Path) -> None:
    """The kiosk answers the person facing its camera (the fake camera shows a real face
    saying the fake microphone's question) and says so on the page."""
    cfg = ServerConfig(engine="cascade", ice_loopback=True, kiosk_idle_s=4)
    face = face_for_wav(tmp_path / "face.y4m", QUESTION, talking=True)
    async with running_server(cfg) as (url, app), chromium_page(
            question_wav(tmp_path, QUESTION), face) as page:
        await page.goto(url + "kiosk?processing=off")  # no click: the kiosk starts by itself
        attract_at_load = await page.evaluate("!document.getElementById('attract').hidden")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        first_session = await page.evaluate("window.omnicall.session")
        listening = await page.text_content("#listening-to")
        await page.wait_for_function(ANSWERED, timeout=30_000)
        assistant = await page.text_content("#assistant-caption")
        font_px = await page.eval_on_selector(
            "#assistant-caption", "e => parseFloat(getComputedStyle(e).fontSize)")
        await screenshot(page, "kiosk")
        # nobody speaks for kiosk_idle_s: a fresh conversation on a new session
        await page.wait_for_function(
            f"window.omnicall.session && window.omnicall.session !== '{first_session}' "
            "&& window.omnicall.phase === 'connected'", timeout=20_000)
        await wait_for(lambda: first_session not in app[CALLS_KEY].sessions, timeout_s=10)
        mode = await page.evaluate("window.omnicall.mode")
    assert mode == "kiosk"
    assert listening == "listening to the person facing the camera"
    assert attract_at_load  # the attract screen shows until someone is there to talk to
    assert assistant is not None and len(assistant.split()) >= 2
    assert font_px >= 30  # big captions


async def test_kiosk_leaves_a_question_no_face_in_front_of_it_asked(tmp_path: Path) -> None:
    """The same question heard while the face in front of the kiosk's camera stays still
    (someone off camera asked it): heard, not answered."""
    cfg = ServerConfig(engine="cascade", ice_loopback=True)
    face = face_for_wav(tmp_path / "face.y4m", QUESTION, talking=False)
    async with running_server(cfg) as (url, app), chromium_page(
            question_wav(tmp_path, QUESTION), face) as page:
        await page.goto(url + "kiosk?processing=off")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        registry = app[CALLS_KEY]
        await wait_for(lambda: len(registry) == 1, timeout_s=5)
        answer = next(iter(registry.sessions.values())).engine_session.answer
        await wait_for(lambda: answer.not_addressed == 1, timeout_s=30)
        messages = await page.evaluate("window.omnicall.messages")
    assert not any(m["type"] == "turn" and m["role"] == "assistant" for m in messages)
    assert answer.addressee.glimpses and all(g.face for g in answer.addressee.glimpses)
    assert not any(g.moving for g in answer.addressee.glimpses)


ROOM_GREETING = (
    "Welcome to the city museum. The permanent collection is on the first and second floors, "
    "with paintings from the sixteenth century to today. The special exhibition about the "
    "harbor is in the east wing, and it stays open until six in the evening. Lockers for "
    "coats and bags are next to the main stairs, and the cafe on the ground floor serves "
    "lunch until three.")
BACKCHANNEL_AT_S = 10.0  # in the microphone file: its audio reaches the server once connected


def backchannel_wav(folder: Path, text: str, at_s: float, total_s: float) -> Path:
    """A 48 kHz microphone file for Chromium: silence, ``text`` at ``at_s``, silence."""
    import wave

    from tests.utils import piper_speech

    speech = piper_speech(text, rate=48_000, lead_s=0.0, tail_s=0.0)
    samples = np.zeros(int(total_s * 48_000), np.int16)
    start = int(at_s * 48_000)
    samples[start:start + len(speech)] = speech
    path = folder / "backchannel.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(48_000)
        out.writeframes(samples.tobytes())
    return path


async def test_kiosk_page_in_a_room_keeps_talking_through_a_backchannel(
        tmp_path: Path) -> None:
    """The kiosk page as a loudspeaker room gets it (docs/room.md): the browser's echo
    canceller on, its noise suppressor and gain control off; the server's canceller on and
    interruptions by words. "Okay." said over the greeting is recorded in the greeting's turn
    as the caller's, no turn starts, and the greeting plays to its end uninterrupted."""
    cfg = ServerConfig(engine="cascade", ice_loopback=True, greeting=ROOM_GREETING)
    mic = backchannel_wav(tmp_path, "Okay.", BACKCHANNEL_AT_S, 60.0)
    async with running_server(cfg) as (url, app), chromium_page(
            mic, make_y4m(tmp_path / "cam.y4m")) as page:
        await page.goto(url + "kiosk")  # the kiosk's own audio processing (no override)
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        audio = await page.evaluate(
            "window.omnicall.stream.getAudioTracks()[0].getSettings()")
        registry = app[CALLS_KEY]
        await wait_for(lambda: len(registry) == 1, timeout_s=5)
        session = next(iter(registry.sessions.values()))
        await page.wait_for_function(
            "window.omnicall.messages.some(m => m.type === 'transcript' && m.final)",
            timeout=40_000)
        await page.wait_for_function(ANSWERED, timeout=60_000)
        messages = await page.evaluate("window.omnicall.messages")
    assert (audio["echoCancellation"], audio["noiseSuppression"],
            audio["autoGainControl"]) == (True, False, False), audio
    assert session.room is not None and session.room.settings == RoomSettings(True, False)
    greeting = next(m for m in messages if m["type"] == "turn" and m["role"] == "assistant")
    heard = [m for m in messages if m["type"] == "transcript" and m["final"]]
    assert [m["turn"] for m in heard] == [greeting["turn"]], heard  # in the greeting's turn
    # "Okay." as the ASR spells it this time ("okay", "ok"): a backchannel, as heard
    assert words_of(heard[0]["text"]) in (["okay"], ["ok"]), heard
    assert verdict(heard[0]["text"]) == "backchannel", heard
    assert not any(m["type"] == "turn" and m["role"] == "user" for m in messages), messages
    ends = [m for m in messages if m["type"] == "turn" and m["phase"] == "end"]
    assert ends and ends[0]["turn"] == greeting["turn"] and not ends[0]["interrupted"], ends


async def test_kiosk_push_to_talk_answers_whoever_holds_the_space_bar(tmp_path: Path) -> None:
    """The face in front of the kiosk stays still (the camera would not take the question),
    but the caller holds the space bar while asking it: what the microphone heard meanwhile
    is the turn, answered at the release."""
    cfg = ServerConfig(engine="cascade", ice_loopback=True)
    mic = backchannel_wav(tmp_path, QUESTION, SPOKEN_AT_S, SPOKEN_AT_S + 8.0)
    face = face_for_wav(tmp_path / "face.y4m", QUESTION, talking=False)
    async with running_server(cfg) as (url, app), chromium_page(mic, face) as page:
        loaded = asyncio.get_running_loop().time()
        await page.goto(url + "kiosk?processing=off")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.keyboard.down("Space")
        pressed = await page.get_attribute("#talk", "aria-pressed")
        registry = app[CALLS_KEY]
        await wait_for(lambda: len(registry) == 1, timeout_s=5)
        call = next(iter(registry.sessions.values()))
        await wait_for(lambda: call.controls.holding, timeout_s=5)
        # the question is in the microphone file from SPOKEN_AT_S, ~2 s long
        await asyncio.sleep(max(0.0, loaded + SPOKEN_AT_S + 3.5
                                - asyncio.get_running_loop().time()))
        await page.keyboard.up("Space")
        await page.wait_for_function(ANSWERED, timeout=30_000)
        messages = await page.evaluate("window.omnicall.messages")
    assert pressed == "true"
    heard = [m["text"] for m in messages if m["type"] == "transcript" and m["final"]]
    assert len(heard) == 1 and "capital" in heard[0].lower(), heard
    assert call.controls.held_turns == 1 and not call.controls.holding
    assert call.engine_session.answer.not_addressed == 0


SPOKEN_AT_S = 5.0  # the push-to-talk question, in the microphone file


async def test_companion_narrow_audio_first_low_video_rate(tmp_path: Path) -> None:
    cfg = ServerConfig(engine="cascade", ice_loopback=True)
    async with running_server(cfg) as (url, app), chromium_page(
            question_wav(tmp_path, QUESTION), make_y4m(tmp_path / "cam.y4m")) as page:
        await page.set_viewport_size({"width": 390, "height": 844})
        await page.goto(url + "companion?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        registry = app[CALLS_KEY]
        await wait_for(lambda: len(registry) == 1, timeout_s=5)
        session = next(iter(registry.sessions.values()))
        await page.wait_for_function(ANSWERED, timeout=30_000)
        overflow = await page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth")
        settings = await page.evaluate(
            "window.omnicall.stream.getVideoTracks()[0].getSettings()")
        mode = await page.evaluate("window.omnicall.mode")
        await screenshot(page, "companion")
    assert mode == "companion"
    assert session.video_fps == 1.0  # the server honours the companion's frame rate
    assert settings["width"] <= 320 and settings["frameRate"] <= 1.5
    assert overflow <= 0, f"page is {overflow}px wider than a phone screen"


async def test_token_from_url_fragment(tmp_path: Path) -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, token="s3cret")
    async with running_server(cfg) as (url, _), chromium_page() as page:
        await page.goto(url + "?processing=off#token=s3cret")
        hash_after = await page.evaluate("location.hash")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
    assert hash_after == ""  # the token leaves the address bar at once


GUM_RECORDER = """
window.gumCalls = [];
const realGum = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
navigator.mediaDevices.getUserMedia = (c) => { window.gumCalls.push(c); return realGum(c); };
"""


async def test_with_video_off_the_page_never_asks_for_the_camera() -> None:
    cfg = ServerConfig(engine="loopback", ice_loopback=True, video=False)
    async with running_server(cfg) as (url, app), chromium_page() as page:
        await page.add_init_script(GUM_RECORDER)
        await page.goto(url + "?processing=off")
        await page.wait_for_function("document.getElementById('camera').disabled",
                                     timeout=10_000)
        note = await page.text_content("#camera-note")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        asked = await page.evaluate("window.gumCalls.map(c => Boolean(c.video))")
        offered = await page.evaluate(
            "window.omnicall.pc.getSenders().filter(s => s.track).map(s => s.track.kind)")
        picker_hidden = await page.evaluate(
            "document.getElementById('cam-select').closest('label').hidden")
        session = app[CALLS_KEY].sessions[await page.evaluate("window.omnicall.session")]
    assert note == "camera off on this server" and picker_hidden
    assert asked == [False]  # one getUserMedia call, audio only
    assert offered == ["audio"]
    assert not [t for t in session.pc.getTransceivers() if t.kind == "video"]
    assert session.input.video_ingest is None  # no frame could reach the engine


SENT_TRACKS = """Object.fromEntries(window.omnicall.pc.getSenders().filter(s => s.track)
  .map(s => [s.track.kind, s.track.id]))"""


async def test_switching_the_microphone_and_camera_mid_call_replaces_the_sent_tracks() -> None:
    """The device pickers (web/devices.js): choosing a microphone or camera mid-call opens
    it with the page's constraints and replaces the track the call sends, in place (no new
    offer); the stream the page holds has the new tracks only."""
    cfg = ServerConfig(engine="loopback", ice_loopback=True)
    async with running_server(cfg) as (url, _), chromium_page() as page:
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.wait_for_function(
            "document.querySelectorAll('#mic-select option').length > 1", timeout=10_000)
        before = await page.evaluate(SENT_TRACKS)
        for select in ("#mic-select", "#cam-select"):
            await page.eval_on_selector(select, """el => {
                el.value = el.options[el.options.length - 1].value;
                el.dispatchEvent(new Event('change'));
            }""")
        await page.wait_for_function(
            f"(() => {{ const t = {SENT_TRACKS}; return t.audio !== {before['audio']!r} "
            f"&& t.video !== {before['video']!r}; }})()", timeout=10_000)
        after = await page.evaluate(SENT_TRACKS)
        held = await page.evaluate(
            "window.omnicall.stream.getTracks().map(t => [t.kind, t.id, t.readyState])")
        senders = await page.evaluate("window.omnicall.pc.getSenders().length")
    assert set(after) == {"audio", "video"} and after != before
    assert sorted(held) == sorted([["audio", after["audio"], "live"],
                                   ["video", after["video"], "live"]])
    assert senders == 2  # replaced in place, not added


async def test_dropped_connection_resumes_the_same_conversation() -> None:
    async with running_server() as (url, app), chromium_page() as page:
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        session = await page.evaluate("window.omnicall.session")
        engine_session = app[CALLS_KEY].sessions[session].engine_session
        await page.evaluate("window.omnicall.simulateDrop()")
        await page.wait_for_function(
            "window.omnicall.reconnects >= 1 && window.omnicall.phase === 'connected'",
            timeout=20_000)
        resumed = await page.evaluate("[window.omnicall.resumed, window.omnicall.session]")
        status = await page.text_content("#status")
        assert resumed == [True, session]
        assert app[CALLS_KEY].sessions[session].engine_session is engine_session
    assert "Reconnected" in (status or "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def server_on(port: int, **settings: Any) -> AsyncIterator[web.Application]:
    app = create_app(ServerConfig(engine="loopback", ice_loopback=True, port=port, **settings))
    runner = create_runner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, reuse_address=True).start()
    try:
        yield app
    finally:
        await runner.cleanup()


async def test_page_reconnects_after_the_server_restarts() -> None:
    port = free_port()
    async with chromium_page() as page:
        async with server_on(port) as first:
            await page.goto(f"http://127.0.0.1:{port}/?processing=off")
            await page.click("#start")
            await page.wait_for_function("window.omnicall.phase === 'connected'",
                                         timeout=20_000)
            await wait_for(lambda: len(first[CALLS_KEY]) == 1, timeout_s=5)
        # the server is gone (restart): it said goodbye, the page says so and keeps trying
        await page.wait_for_function("window.omnicall.phase === 'reconnecting'", timeout=30_000)
        goodbye = await page.evaluate(
            "window.omnicall.messages.find(m => m.type === 'goodbye') || null")
        shown = await page.text_content("#error")
        assert goodbye is not None and goodbye["reason"] == "shutdown"
        assert "restarting" in (shown or "")
        async with server_on(port) as second:
            await page.wait_for_function(
                "window.omnicall.reconnects >= 1 && window.omnicall.phase === 'connected'",
                timeout=40_000)
            await wait_for(lambda: len(second[CALLS_KEY]) == 1, timeout_s=5)
            resumed = await page.evaluate("window.omnicall.resumed")
    assert resumed is False  # a restarted server has no memory of the call: a new one starts


async def test_page_gives_up_when_the_server_stays_away() -> None:
    """Reconnection is bounded: after --reconnect-give-up-s the page says so in plain words
    and offers a Reconnect button, which works once the server is back."""
    port = free_port()
    async with chromium_page() as page:
        async with server_on(port, reconnect_give_up_s=3):
            await page.goto(f"http://127.0.0.1:{port}/?processing=off")
            await page.click("#start")
            await page.wait_for_function("window.omnicall.phase === 'connected'",
                                         timeout=20_000)
        await page.wait_for_function("window.omnicall.phase === 'idle'", timeout=20_000)
        error = await page.text_content("#error")
        button = await page.text_content("#start")
        enabled = await page.is_enabled("#start")
        async with server_on(port) as back:
            await page.click("#start")
            await page.wait_for_function("window.omnicall.phase === 'connected'",
                                         timeout=20_000)
            await wait_for(lambda: len(back[CALLS_KEY]) == 1, timeout_s=5)
    assert "cannot be reached" in (error or "") and "Reconnect" in (error or "")
    assert button == "Reconnect" and enabled


async def test_browser_call_with_the_native_qwen_omni_engine(tmp_path: Path,
                                                             omni_dir: Path) -> None:
    """`--engine qwen-omni --model PATH` behind the real page (tiny random checkpoint: the
    words are gibberish; captions, turns and reply audio are real)."""
    from dataclasses import replace

    from omnicall.app.engine_settings import omni_settings
    from omnicall.engine.qwen_omni.engine import QwenOmniEngine

    cfg = ServerConfig(engine="qwen-omni", model=str(omni_dir), ice_loopback=True)
    engine = QwenOmniEngine(replace(omni_settings(cfg), max_new_tokens=12, max_frames=12,
                                    captions=False))
    async with running_server(cfg, engine=engine) as (url, _), chromium_page(
            question_wav(tmp_path, QUESTION), make_y4m(tmp_path / "cam.y4m")) as page:
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.wait_for_function(ANSWERED, timeout=60_000)
        assistant = await page.text_content("#assistant-caption")
        stages = await page.evaluate(
            "window.omnicall.messages.filter(m => m.type === 'timing').map(m => m.stage)")
        inbound = await page.evaluate(INBOUND_AUDIO_JS)
    assert assistant  # streamed caption text of the reply
    assert inbound is not None and inbound["energy"] > 1e-4, inbound  # the Talker was heard
    assert {"talker_first_frame", "code2wav_first_chunk", "first_audio_out"} <= set(stages)


async def test_browser_call_through_the_remote_tier(tmp_path: Path) -> None:
    """The page -> `serve --engine remote` -> `omnicall serve-engine --engine cascade` (two
    processes, real sockets): a spoken question is answered with captions and audio."""
    engine_server = await start_process("serve-engine", "--engine", "cascade")
    front = await start_process("serve", "--engine", "remote", "--ice-loopback",
                                "--engine-url", engine_server.ws_url)
    try:
        async with chromium_page(question_wav(tmp_path, QUESTION),
                                 make_y4m(tmp_path / "cam.y4m")) as page:
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(front.http_url + "?processing=off")
            await page.click("#start")
            await page.wait_for_function("window.omnicall.phase === 'connected'",
                                         timeout=20_000)
            await page.wait_for_function(ANSWERED, timeout=60_000)
            user = await page.text_content("#user-caption")
            assistant = await page.text_content("#assistant-caption")
            stages = await page.evaluate(
                "window.omnicall.messages.filter(m => m.type === 'timing').map(m => m.stage)")
            await page.wait_for_function(
                "document.getElementById('latency-text').textContent.startsWith('Last answer')",
                timeout=10_000)
            inbound = await page.evaluate(INBOUND_AUDIO_JS)
            await screenshot(page, "remote-tier")
            await page.click("#stop")
    finally:
        assert await front.stop() == 0
        assert await engine_server.stop() == 0
    assert not errors, errors
    assert user is not None and "capital" in user.lower()
    assert assistant and assistant.strip()
    assert {"end_of_turn", "llm_first_token", "first_audio_out"} <= set(stages)
    assert inbound is not None and inbound["energy"] > 1e-4, inbound


async def test_typed_messages_are_answered_and_kept_in_the_transcript(tmp_path: Path) -> None:
    silence = silent_wav(tmp_path / "silence.wav", 20)
    cfg = ServerConfig(engine="cascade", ice_loopback=True)
    async with running_server(cfg) as (url, _), chromium_page(silence) as page:
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.fill("#text-input", "What is the capital of France?")
        await page.click("#text-send")
        await page.wait_for_function(ANSWERED, timeout=40_000)
        entries = await page.eval_on_selector_all(
            "#transcript li", "items => items.map(i => [i.className, i.textContent])")
        typed_back = await page.input_value("#text-input")
        await screenshot(page, "typed-message")
    assert entries[0] == ["user", "What is the capital of France?"]
    assert entries[1][0] == "assistant" and entries[1][1].strip()
    assert typed_back == ""


async def test_a_typed_question_uses_a_tool_and_the_transcript_downloads_and_is_kept(
        tmp_path: Path) -> None:
    """Through the page's text box: the tool call shows in the conversation, the page's
    Download saves it as JSON Lines, and --transcripts keeps the call's file."""
    import json

    silence = silent_wav(tmp_path / "silence.wav", 90)  # the page plays it once (noloop)
    folder = tmp_path / "transcripts"
    cfg = ServerConfig(engine="cascade", ice_loopback=True, tools="examples.tools",
                       transcripts=str(folder))
    async with running_server(cfg) as (url, _), chromium_page(silence) as page:
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.fill("#text-input", "What time is it?")
        await page.click("#text-send")
        await page.wait_for_function(ANSWERED, timeout=40_000)
        entries = await page.eval_on_selector_all(
            "#transcript li", "items => items.map(i => [i.className, i.textContent])")
        async with page.expect_download() as download_info:
            await page.click("#download")
        download = await download_info.value
        saved = tmp_path / "download.jsonl"
        await download.save_as(str(saved))
        await screenshot(page, "tool-call")
        await page.click("#stop")
        await wait_for(lambda: any('"event": "end"' in p.read_text()
                                   for p in folder.glob("*.jsonl")), timeout_s=10)
    assert entries[0] == ["user", "What time is it?"]
    assert entries[1][0] == "tool" and entries[1][1].startswith("local_time({}) → It is ")
    assert entries[2][0] == "assistant" and entries[2][1].strip()
    page_records = [json.loads(line) for line in saved.read_text().splitlines()]
    assert [r.get("role", r["type"]) for r in page_records] == ["user", "tool", "assistant"]
    assert page_records[1]["name"] == "local_time" and page_records[1]["ok"] is True
    assert download.suggested_filename.startswith("omnicall-")
    [kept] = list(folder.glob("*.jsonl"))
    records = [json.loads(line) for line in kept.read_text().splitlines()]
    assert [r["type"] for r in records] == ["call", "turn", "tool", "turn", "call"]
    assert records[1]["text"] == "What time is it?"
    assert records[2]["name"] == "local_time" and records[2]["output"].startswith("It is ")
    assert records[3]["role"] == "assistant" and records[3]["timings_ms"]["llm_first_token"] > 0
    assert records[-1]["event"] == "end" and records[-1]["reason"] in (
        "hangup", "peer_closed", "media_timeout")  # how the page's End reached the server


async def test_the_page_shows_that_the_call_is_recorded(tmp_path: Path) -> None:
    """--record: the page says so while the call lasts; without it, nothing is shown."""
    shown = {}
    for record in ("", str(tmp_path / "recordings")):
        cfg = ServerConfig(engine="loopback", ice_loopback=True, record=record)
        async with running_server(cfg) as (url, _app), chromium_page() as page:
            await page.goto(url + "?processing=off")
            await page.click("#start")
            await page.wait_for_function("window.omnicall.phase === 'connected'",
                                         timeout=20_000)
            await page.wait_for_function(
                "window.omnicall.messages.some(m => m.type === 'state')", timeout=10_000)
            shown[bool(record)] = await page.is_visible("#recording")
    assert shown == {False: False, True: True}
