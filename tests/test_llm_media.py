"""``--llm-vision``, ``--llm-audio-in`` and ``--llm-audio-out`` against real servers: the
cascade with ``transformers serve`` on tiny random checkpoints built here (a LLaVA for images,
a Qwen2-Audio for speech, a Llama that answers in text only), behind a recording proxy that
shows what the server received; the server's own voice from a server that streams vllm-omni's
documented chunks field by field (``modality: "audio"``, base64 WAV in ``delta.content``) and
OpenAI's (``delta.audio``). Random weights answer noise: the tests check what was sent, that
the reply was spoken and captioned, and what the caller got."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import wave
from collections.abc import AsyncIterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from aiohttp import web

from omnicall.app.config import ServerConfig
from omnicall.engine.base import SessionOptions
from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.conversation.settings import TurnSettings
from omnicall.engine.events import (
    AssistantAudio,
    AssistantText,
    CameraSeen,
    EngineError,
    TurnEvent,
    UserTranscript,
)
from omnicall.media.aligner import MediaUnit
from omnicall.media.video_ring import VideoUnitFrame
from tests.cascade_fixtures import Recorder
from tests.chromium import chromium_page, have_browser_tools, question_wav
from tests.llm_servers import audio_parts, decode_data_url, image_urls, mean_colour
from tests.utils import feed_units, piper_speech, running_server, serving, wait_for

RED, BLUE = (220, 30, 30), (30, 60, 220)
VIDEO_EVERY_UNITS = 6  # the ingest samples ~2 fps onto the 80 ms unit grid


def camera_frame(index: int, colour: tuple[int, int, int]) -> VideoUnitFrame:
    image = np.zeros((480, 640, 3), np.uint8)
    image[:] = colour
    return VideoUnitFrame(index, index * 7200, Fraction(1, 90_000), image)


async def speak_with_camera(session: Any, speech: np.ndarray, colour_at: Any) -> None:
    """Push the speech as 80 ms units, a camera frame every ``VIDEO_EVERY_UNITS`` units
    coloured by ``colour_at(unit index)``, at the media plane's pace (the turn detector's
    clock), waiting while the session is full."""
    await feed_units(session, speech, realtime=True, video=lambda index: camera_frame(
        index, colour_at(index)) if index % VIDEO_EVERY_UNITS == 0 else None)


def ended(recorder: Recorder, turns: int = 1) -> bool:
    return len([e for e in recorder.of(TurnEvent)
                if e.role == "assistant" and e.phase == "end"]) >= turns


def close_colour(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return max(abs(x - y) for x, y in zip(a, b, strict=True)) < 30


async def started(settings: CascadeSettings) -> CascadeEngine:
    engine = CascadeEngine(settings, progress=None)
    await engine.start()
    return engine


def turn_bodies(proxy: Any) -> list[dict[str, Any]]:
    """The turns' own requests (streamed), not the one-token early prefills."""
    return [b for b in proxy.chat_bodies() if b.get("stream")]


async def test_the_frames_of_the_turn_reach_a_vision_model(tiny_vlm_server: Any,
                                                           recording_proxy: Any) -> None:
    """A camera that turns from red to blue while the user asks: the turn's request carries
    the frames the policy picked, the last one blue (from the turn's last second); frames
    went early while the user spoke; the reply is spoken and captioned; the page got a
    thumbnail."""
    proxy = recording_proxy(tiny_vlm_server)
    engine = await started(CascadeSettings(
        llm_url=proxy.base_url, llm_model=tiny_vlm_server.model, llm_vision=True,
        turns=TurnSettings(turn_model="fixed"), max_reply_tokens=16))
    try:
        session = engine.open_session("vlm", SessionOptions())
        recorder = Recorder(session)
        speech = piper_speech("What am I holding in my hand right now? Is it a cup or a book?",
                              tail_s=1.5)
        switch = len(speech) // 1280 // 2
        await speak_with_camera(session, speech, lambda i: RED if i < switch else BLUE)
        await recorder.wait(ended, timeout_s=60)
        await recorder.close()
    finally:
        await engine.close()
    body = turn_bodies(proxy)[-1]
    urls = image_urls(body)
    assert len(urls) >= 2, urls  # red while speaking, blue later: not a single frame
    colours = [mean_colour(decode_data_url(u)[1]) for u in urls]
    assert close_colour(colours[0], RED) and close_colour(colours[-1], BLUE), colours
    user = body["messages"][-1]
    assert user["role"] == "user" and user["content"][-1]["type"] == "text"
    assert user["content"][-1]["text"].strip()  # the transcript follows the pictures
    assert not any("What the camera shows" in str(m["content"]) for m in body["messages"])
    early = [b for b in proxy.chat_bodies() if b.get("max_tokens") == 1]
    assert early, "no frame went to the server while the user spoke"
    for warm in early:  # each early prefill is a prefix of the turn's pictures
        assert image_urls(warm) == urls[:len(image_urls(warm))]
    seen = recorder.of(CameraSeen)
    assert seen and seen[-1].thumb_jpeg[:2] == b"\xff\xd8"
    assert "".join(e.delta for e in recorder.of(AssistantText)).strip()
    assert sum(len(e.samples) for e in recorder.of(AssistantAudio)) > 24_000 * 0.3
    assert not recorder.of(EngineError)


async def test_a_server_refusing_images_gets_words_and_each_page_is_told_once(
        tiny_vlm_server: Any, recording_proxy: Any) -> None:
    """The refusal is the server's: the call that finds it and every later call of the
    engine send no image again, and each call's page is told once."""
    proxy = recording_proxy(tiny_vlm_server, refuse_images=True)
    engine = await started(CascadeSettings(
        llm_url=proxy.base_url, llm_model=tiny_vlm_server.model, llm_vision=True,
        turns=TurnSettings(turn_model="fixed"), max_reply_tokens=8))
    recorders = []
    try:
        for call, turns in (("blind", 2), ("later", 1)):
            session = engine.open_session(call, SessionOptions())
            recorder = Recorder(session)
            for turn in range(turns):
                frame = camera_frame(turn * 50, RED)
                session.push(MediaUnit(turn * 50, np.zeros(1280, np.int16), frame))
                await wait_for(lambda f=frame, s=session: s.answer.camera.eyes.camera.latest
                               is f, timeout_s=10)  # seen before the words come
                session.send_text(f"Can you see this? ({turn})")
                await recorder.wait(lambda r, n=turn + 1: ended(r, n), timeout_s=60)
            await recorder.close()
            recorders.append(recorder)
    finally:
        await engine.close()
    refused = [r for r in proxy.requests if r.status == 400]
    assert len(refused) == 1 and image_urls(refused[0].body)  # asked once with the image
    assert not any(image_urls(body) for body in turn_bodies(proxy)[-2:])
    for recorder, turns in zip(recorders, (2, 1), strict=True):
        errors = recorder.of(EngineError)
        assert len(errors) == 1 and "camera" in errors[0].message
        assert len([e for e in recorder.of(TurnEvent) if e.role == "assistant"
                    and e.phase == "end" and not e.interrupted]) == turns


async def test_the_user_s_own_speech_reaches_an_audio_model(tiny_audio_server: Any,
                                                            recording_proxy: Any) -> None:
    proxy = recording_proxy(tiny_audio_server)
    engine = await started(CascadeSettings(
        llm_url=proxy.base_url, llm_model=tiny_audio_server.model, llm_audio_in=True,
        turns=TurnSettings(turn_model="fixed"), max_reply_tokens=8))
    try:
        session = engine.open_session("ears", SessionOptions())
        recorder = Recorder(session)
        speech = piper_speech("What is the weather like today?", tail_s=1.5)
        await speak_with_camera(session, speech, lambda i: RED)
        await recorder.wait(ended, timeout_s=60)
        await recorder.close()
    finally:
        await engine.close()
    body = turn_bodies(proxy)[-1]
    (sent,) = audio_parts(body)
    assert sent["format"] == "wav"
    with wave.open(io.BytesIO(base64.b64decode(sent["data"]))) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16_000, 1, 2)
        heard_s = wav.getnframes() / 16_000
    spoken_s = (len(speech) - 1.5 * 16_000 - 0.3 * 16_000) / 16_000
    assert spoken_s * 0.8 < heard_s < spoken_s + 1.5, (heard_s, spoken_s)
    assert not image_urls(body)  # --llm-vision is off
    final = [t for t in recorder.of(UserTranscript) if t.final]
    assert final and "weather" in final[-1].text.lower()  # the caption: the local ASR
    assert sum(len(e.samples) for e in recorder.of(AssistantAudio)) > 24_000 * 0.3


# -- the server's own voice (--llm-audio-out) ------------------------------------------------
SERVER_TEXT = "Hello from the server. It speaks for itself."
SERVER_VOICE_S = 1.2


def server_voice() -> np.ndarray:
    t = np.arange(int(24_000 * SERVER_VOICE_S)) / 24_000
    return (np.sin(2 * np.pi * 330 * t) * 8000).astype(np.int16)


def wav_file(samples: np.ndarray, rate: int = 24_000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.tobytes())
    return buffer.getvalue()


def sse(chunk: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(chunk)}\n\n".encode()


def omni_chunks(fmt: str) -> list[dict[str, Any]]:
    """A reply as vllm-omni streams it (serving_chat: OmniChatCompletionStreamResponse):
    text chunks with ``modality: "text"``, then audio chunks with ``modality: "audio"`` whose
    ``delta.content`` is base64 audio (each a whole WAV file by default, raw PCM16 with
    ``audio.format: pcm16``), ``finish_reason`` on the last; or as OpenAI streams it
    (``delta.audio`` with ``transcript`` and base64 PCM16 ``data``)."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "omni"}
    pieces = np.array_split(server_voice(), 4)
    if fmt == "openai":
        chunks = [{**base, "choices": [{"index": 0, "delta": {
            "role": "assistant", "audio": {"id": "audio_1", "transcript": SERVER_TEXT}}}]}]
        chunks += [{**base, "choices": [{"index": 0, "delta": {"audio": {
            "data": base64.b64encode(p.tobytes()).decode()}}}]} for p in pieces]
        return [*chunks, {**base, "choices": [{"index": 0, "delta": {},
                                                "finish_reason": "stop"}]}]
    chunks = [{**base, "modality": "text", "choices": [{"index": 0, "delta": {
        "role": "assistant", "content": ""}}]}]
    chunks += [{**base, "modality": "text", "choices": [{"index": 0, "delta": {
        "content": word + " "}}]} for word in SERVER_TEXT.split()]
    for piece in pieces:
        audio = wav_file(piece) if fmt == "wav" else piece.tobytes()
        chunks.append({**base, "modality": "audio", "choices": [{"index": 0, "delta": {
            "role": "assistant", "content": base64.b64encode(audio).decode()}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 10}})
    chunks[-1]["choices"][0]["finish_reason"] = "stop"
    return chunks


@pytest.fixture
async def omni_server(request: pytest.FixtureRequest
                      ) -> AsyncIterator[tuple[str, list[Any], str]]:
    """A server streaming ``request.param``'s format ('wav', 'pcm16', 'openai'), or text
    only ('text'); yields its /v1 URL, the request bodies it received and the format."""
    fmt = request.param
    bodies: list[Any] = []

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "omni", "object": "model"}]})

    async def chat(req: web.Request) -> web.StreamResponse:
        bodies.append(await req.json())
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        chunks = omni_chunks(fmt) if fmt != "text" else [c for c in omni_chunks("wav")
                                                          if c.get("modality") != "audio"]
        for chunk in chunks:
            await resp.write(sse(chunk))
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    async with serving(app) as port:
        yield f"http://127.0.0.1:{port}/v1", bodies, fmt


@pytest.mark.parametrize("omni_server", ["wav", "pcm16", "openai", "text"], indirect=True)
async def test_the_server_s_voice_plays_and_its_text_is_the_caption(
        omni_server: tuple[str, list[Any], str]) -> None:
    url, bodies, fmt = omni_server
    engine = await started(CascadeSettings(llm_url=url, llm_audio_out=True,
                                           turns=TurnSettings(turn_model="fixed")))
    try:
        session = engine.open_session("voice", SessionOptions())
        recorder = Recorder(session)
        session.send_text("Say something.")
        await recorder.wait(ended, timeout_s=60)
        await recorder.close()
    finally:
        await engine.close()
    assert bodies[-1]["modalities"] == ["text", "audio"]
    assert bodies[-1]["audio"]["format"] == "pcm16"
    caption = "".join(e.delta for e in recorder.of(AssistantText)).strip()
    assert caption == SERVER_TEXT
    played = np.concatenate([e.samples for e in recorder.of(AssistantAudio)])
    pts = [e.pts for e in recorder.of(AssistantAudio)]
    assert pts == sorted(pts) and pts[0] == 0
    if fmt == "text":  # no audio came: the local voice said it
        assert len(played) > 24_000 * 0.5
        assert not np.array_equal(played[:len(server_voice())], server_voice())
    else:  # exactly the server's samples (24 kHz in, 24 kHz out), in 80 ms frames
        assert np.array_equal(played, server_voice())


# -- the whole call: a browser's camera to a vision model --------------------------------------
def blue_card_y4m(path: Path) -> Path:
    """A fake camera file: a blue card with a white box in the middle, 8 s at 15 fps."""
    subprocess.run(["ffmpeg", "-y", "-loglevel", "error", "-f", "lavfi", "-i",
                    "color=c=0x1e3cdc:size=640x480:rate=15", "-vf",
                    "drawbox=x=260:y=180:w=120:h=120:color=white:t=fill", "-t", "8",
                    "-pix_fmt", "yuv420p", str(path)], check=True, capture_output=True)
    return path


@pytest.mark.browser
@pytest.mark.skipif(not have_browser_tools(), reason="needs chromium, espeak-ng, ffmpeg "
                    "(make system-deps installs them)")
async def test_a_browser_asks_what_do_you_see_and_its_camera_reaches_the_model(
        tmp_path: Path, tiny_vlm_server: Any, recording_proxy: Any) -> None:
    """Headless Chromium with a fake camera (a blue card with a white box) and a fake
    microphone asking "What do you see?": the turn's request to the VLM carries that camera's
    frame, and the reply comes back spoken and captioned."""
    proxy = recording_proxy(tiny_vlm_server)
    camera = blue_card_y4m(tmp_path / "blue.y4m")
    wav = question_wav(tmp_path, "What do you see?")
    cfg = ServerConfig(engine="cascade", ice_loopback=True, llm_url=proxy.base_url,
                       llm_model=tiny_vlm_server.model, llm_vision=True, max_reply_tokens=16)
    async with running_server(cfg) as (url, _), chromium_page(wav, camera) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.wait_for_function(
            "window.omnicall.messages.some(m => m.type === 'turn' && m.role === 'assistant'"
            " && m.phase === 'end')", timeout=60_000)
        messages = await page.evaluate("window.omnicall.messages")
        await page.click("#stop")
    assert not errors, errors
    body = turn_bodies(proxy)[-1]
    urls = image_urls(body)
    assert urls, "no camera frame reached the model"
    mime, jpeg = decode_data_url(urls[-1])
    image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    # "what do you see" asks to look: the turn ends on a sharp frame, the camera's own 640 px
    assert mime == "image/jpeg" and image.shape[:2] == (480, 640)
    last_part = [p for p in body["messages"][-1]["content"] if p["type"] == "image_url"][-1]
    assert last_part["image_url"]["detail"] == "high"
    b, g, r = (int(v) for v in image[20, 20])
    assert b > 150 and r < 80, (r, g, b)  # the blue card
    assert min(int(v) for v in image[240, 320]) > 200  # the white box in the middle
    text = body["messages"][-1]["content"][-1]["text"].lower()
    assert "see" in text  # the transcript of the question follows the frame
    assert any(m["type"] == "assistant_text" for m in messages)
    assert any(m["type"] == "camera" for m in messages)  # the page's thumbnail
