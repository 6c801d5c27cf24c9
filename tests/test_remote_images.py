"""The remote engine's camera (engine.remote.images) through real sockets: frames follow the
frame policy through a turn as input_image items, the end-of-turn frame goes unless the
server has it, images past the retention bound are deleted from the server's conversation
(``serve-engine`` drops them), and a server that refuses images leaves the call on audio.

Time is driven by media units (the session's clock for the camera is unit index x 80 ms):
each unit is pushed only once the server has the one before, and the server's VAD events
are sent between units, so what goes when never depends on the machine's speed."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from omnicall.app.app_state import CALLS_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.realtime.server import create_engine_app
from omnicall.app.setup import create_runner
from omnicall.engine import realtime as rt
from omnicall.engine.base import SessionOptions
from omnicall.engine.conversation.settings import FramePolicySettings
from omnicall.engine.events import CameraSeen, EngineError
from omnicall.engine.remote.engine import RemoteEngine
from omnicall.engine.remote.settings import RemoteSettings
from omnicall.media.aligner import MediaUnit
from omnicall.media.timebase import INPUT_FRAME_SAMPLES
from omnicall.media.video_ring import VideoUnitFrame
from tests.cascade_fixtures import Recorder
from tests.utils import serving, tone, wait_for

VIDEO_EVERY = 6  # units between sampled frames: the media plane's 2 fps on the 80 ms grid


def unit(index: int, value: int | None) -> MediaUnit:
    """Unit ``index``: a tone, and a uniform frame of ``value`` (None: no frame)."""
    audio = tone(300, INPUT_FRAME_SAMPLES / 16_000)
    video = None if value is None else VideoUnitFrame(
        index, index * 7200, Fraction(1, 90_000), np.full((336, 448, 3), value, np.uint8))
    return MediaUnit(index, audio, video)


@dataclass
class Script:
    """What a scripted model server received, and its socket to speak on."""

    received: list[dict[str, Any]] = field(default_factory=list)
    sockets: list[web.WebSocketResponse] = field(default_factory=list)

    def appends(self) -> int:
        return sum(e["type"] == "input_audio_buffer.append" for e in self.received)

    def images(self) -> list[dict[str, Any]]:
        return [e for e in self.received if e.get("image")]

    def deletes(self) -> list[str]:
        return [e["item_id"] for e in self.received if e["type"] == "conversation.item.delete"]

    async def say(self, **fields: Any) -> None:
        event = rt.SERVER_EVENTS.validate_python({"event_id": rt.new_id("event"), **fields})
        await self.sockets[-1].send_str(rt.dump(event))


@contextlib.asynccontextmanager
async def scripted_server(refuse_images: bool = False) -> AsyncIterator[tuple[str, Script]]:
    """A Realtime model server whose VAD the test speaks for; it records each client event
    (validated by the openai package's adapter; images as their item ids, never their
    pixels), confirms deletes and, with ``refuse_images``, answers each image with an error
    naming its event (as vllm-omni does)."""
    script = Script()

    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=rt.MAX_EVENT_BYTES)
        await ws.prepare(request)
        script.sockets.append(ws)
        await script.say(type="session.created", session={"type": "realtime"})
        async for message in ws:
            rt.parse_client_event(message.data)  # every event the engine sends is valid
            data = json.loads(message.data)
            record: dict[str, Any] = {"type": data["type"], "after_appends": script.appends()}
            content = data.get("item", {}).get("content") or [{}]
            if content[0].get("type") == "input_image":
                assert content[0]["image_url"].startswith("data:image/jpeg;base64,")
                record.update(image=True, item_id=data["item"]["id"])
                if refuse_images:
                    await script.say(type="error", error={
                        "type": "invalid_request_error", "code": "invalid_value",
                        "message": "input_image is not supported",
                        "event_id": data["event_id"]})
            elif data["type"] == "conversation.item.delete":
                record["item_id"] = data["item_id"]
                await script.say(type="conversation.item.deleted", item_id=data["item_id"])
            script.received.append(record)
        return ws

    app = web.Application()
    app.router.add_get("/v1/realtime", handle)
    async with serving(app) as port:
        yield f"ws://127.0.0.1:{port}/v1/realtime", script


@contextlib.asynccontextmanager
async def remote_call(ws_url: str, **settings: Any) -> AsyncIterator[tuple[Any, Recorder]]:
    engine = RemoteEngine(RemoteSettings(engine_urls=(ws_url,), **settings))
    await engine.start()
    session = engine.open_session("camera", SessionOptions())
    recorder = Recorder(session)
    try:
        yield session, recorder
    finally:
        await recorder.close()
        await engine.close()


async def push_units(session: Any, sent: Any, units: range, value: Any) -> None:
    """Push each unit (a frame every VIDEO_EVERY units, ``value(index)``) once ``sent()``
    says the server has the one before."""
    for index in units:
        await wait_for(lambda at=index: sent() >= at, timeout_s=10, interval_s=0.005)
        assert session.push(unit(index, value(index) if index % VIDEO_EVERY == 0 else None))
    await wait_for(lambda: sent() >= units.stop, timeout_s=10, interval_s=0.005)


async def speech(script: Script, session: Any, started: bool) -> None:
    """The server's VAD: the user starts (or stops) speaking, seen by the session."""
    await wait_for(lambda: script.sockets)
    if started:
        await script.say(type="input_audio_buffer.speech_started", audio_start_ms=0,
                         item_id="user_1")
    else:
        await script.say(type="input_audio_buffer.speech_stopped", audio_end_ms=0,
                         item_id="user_1")
        await script.say(type="input_audio_buffer.committed", item_id="user_1")
    await wait_for(lambda: session.user_turn_open == started, timeout_s=10, interval_s=0.005)


async def test_frames_go_through_the_turn_and_old_ones_are_deleted() -> None:
    """Quiet: the first frame. Speaking: about one a second (every other sampled frame)
    from a second in, each sent at the next pick; the turn's end: its freshest frame; past
    max_images (4), the oldest are deleted by the item ids the engine gave them. The page
    sees each one (CameraSeen)."""
    async with scripted_server() as (ws_url, script), remote_call(ws_url) as (session, rec):
        await push_units(session, script.appends, range(0, 12), lambda i: 10)
        await speech(script, session, started=True)
        await push_units(session, script.appends, range(12, 84), lambda i: 20 + 2 * i)
        await speech(script, session, started=False)
        await wait_for(lambda: len(script.images()) == 6 and len(script.deletes()) == 2)
        await wait_for(lambda: session.images.deleted_acks == 2)
        await rec.wait(lambda r: len(r.of(CameraSeen)) == 6)
    images = script.images()
    # unit 0 (quiet), then, speech having started at unit 12, units 24, 36, 48, 60 (0.96 s
    # apart: one a second on the 80 ms grid), each sent before the audio of the unit of the
    # next pick (36, 48, 60, 72); unit 72's pick is superseded by the end-of-turn frame
    # (unit 78's, a new picture) after all 84 units
    assert [e["after_appends"] for e in images] == [0, 36, 48, 60, 72, 84]
    ids = [e["item_id"] for e in images]
    assert len(set(ids)) == 6
    assert script.deletes() == ids[:2]  # the two oldest, once 5 and then 6 were sent
    assert list(session.images.item_ids.values()) == ids[2:]
    seen = rec.of(CameraSeen)
    assert [s.image_id for s in seen] == [1, 2, 3, 4, 5, 6]
    assert [s.turn_id for s in seen] == [0, 1, 1, 1, 1, 1]
    assert all(s.thumb_jpeg.startswith(b"\xff\xd8") and not s.sharp for s in seen)
    assert session.images.camera.policy.kept == (3, 4, 5, 6)


@pytest.mark.parametrize("words", ["", "what does this say"])
async def test_a_reused_end_of_turn_frame_is_not_sent_again(words: str) -> None:
    """The scene stays still: its quiet frame went just before a short turn, and at the
    turn's end (within a second of it) the server has it already - nothing is sent again.
    Words that ask to look make the end-of-turn frame the sharp one, which goes."""
    async with scripted_server() as (ws_url, script), remote_call(ws_url) as (session, rec):
        await push_units(session, script.appends, range(0, 6), lambda i: 100)
        await speech(script, session, started=True)
        if words:
            await script.say(type="conversation.item.input_audio_transcription.delta",
                             item_id="user_1", content_index=0, delta=words)
            await wait_for(lambda: session.turn_words == words)
        await push_units(session, script.appends, range(6, 12), lambda i: 100)
        await speech(script, session, started=False)
        await wait_for(lambda: session.images.camera.closed_turn)  # the turn's end was seen
        if words:
            await wait_for(lambda: len(script.images()) == 2)
        await rec.wait(lambda r: len(r.of(CameraSeen)) == len(script.images()))
    seen = rec.of(CameraSeen)
    if not words:
        assert [e["after_appends"] for e in script.images()] == [0]  # no second
        assert [s.sharp for s in seen] == [False]
    else:
        assert [e["after_appends"] for e in script.images()] == [0, 12]
        assert [s.sharp for s in seen] == [False, True]


@contextlib.asynccontextmanager
async def engine_server(**settings: Any) -> AsyncIterator[tuple[str, web.Application]]:
    """``serve-engine --engine loopback`` in this process (to look inside its session)."""
    app = create_engine_app(ServerConfig(engine="loopback", **settings))
    async with serving(app, create_runner(app)) as port:
        yield f"ws://127.0.0.1:{port}/v1/realtime", app


def served(app: web.Application) -> Any:
    return next(iter(app[CALLS_KEY].sessions.values()))


def appended(connection: Any) -> Any:
    """How many 80 ms units of audio the serve-engine connection received."""
    return lambda: round(connection.input.audio_ms / 80)


#: every sampled frame goes (2 fps), two kept: the retention bound is reached at once
EVERY_FRAME = FramePolicySettings(speaking_fps=2.0, quiet_fps=2.0, max_images=2)


async def test_serve_engine_drops_the_images_the_engine_deletes() -> None:
    """Against the real serve-engine: ten frames go, the eight oldest are deleted there
    (conversation.item.deleted each), and it keeps exactly the two the engine kept."""
    async with engine_server() as (ws_url, app), \
            remote_call(ws_url, camera=EVERY_FRAME) as (session, rec):
        await wait_for(lambda: app[CALLS_KEY].sessions)
        connection = served(app)
        await push_units(session, appended(connection), range(0, 60), lambda i: 10 + 4 * i)
        await wait_for(lambda: session.images.deleted_acks == 8)
        await wait_for(lambda: connection.engine_session.video_units == 10)
        await rec.wait(lambda r: len(r.of(CameraSeen)) == 10)
        kept_there = list(connection.input.image_items)
        kept_here = list(session.images.item_ids.values())
    assert connection.input.images == 10 and connection.input.images_deleted == 8
    assert kept_there == kept_here and len(kept_here) == 2
    assert session.images.images_sent == 10 and session.images.deletes_sent == 8
    assert not rec.of(EngineError)  # every delete was of an item the server knew


async def test_a_server_refusing_images_leaves_the_call_on_audio_only() -> None:
    """serve-engine --no-video refuses the first image (an error naming its event): no
    other image is sent for the call, its audio goes on, and the page is told once."""
    async with engine_server(video=False) as (ws_url, app), \
            remote_call(ws_url, camera=EVERY_FRAME) as (session, rec):
        await wait_for(lambda: app[CALLS_KEY].sessions)
        connection = served(app)
        await push_units(session, appended(connection), range(0, 6), lambda i: 10)
        await wait_for(lambda: not session.video)  # the refusal came back
        await push_units(session, appended(connection), range(6, 60), lambda i: 10 + 4 * i)
        await rec.wait(lambda r: r.of(EngineError))
        errors_there = connection.errors_sent
    assert session.images.images_sent == 1 and errors_there == 1  # one image, one refusal
    assert connection.input.images == 0 and connection.engine_session.video_units == 0
    assert connection.input.audio_ms == pytest.approx(60 * 80)  # the audio all went on
    notices = [e for e in rec.of(EngineError) if "does not accept video" in e.message]
    assert len(notices) == 1 and notices[0].recoverable
    assert len(rec.of(CameraSeen)) == 1  # the one that went, before the refusal came


async def test_a_refusing_server_stops_the_frames_of_a_turn_in_flight() -> None:
    """A server that refuses images (vllm-omni) while the user speaks: the frames after the
    refusal are not sent, the end-of-turn frame is not either, and the turn goes on."""
    async with scripted_server(refuse_images=True) as (ws_url, script), \
            remote_call(ws_url) as (session, rec):
        await speech(script, session, started=True)
        # the first pick (unit 12, a second in) goes at the next one (unit 24)
        await push_units(session, script.appends, range(0, 25), lambda i: 20 + 2 * i)
        await wait_for(lambda: not session.video)
        await push_units(session, script.appends, range(25, 72), lambda i: 20 + 2 * i)
        await speech(script, session, started=False)  # refused: no end-of-turn frame either
        await rec.wait(lambda r: r.of(EngineError))
    assert [e["after_appends"] for e in script.images()] == [24]
    assert not script.deletes()
    assert len([e for e in rec.of(EngineError) if "does not accept video" in e.message]) == 1
