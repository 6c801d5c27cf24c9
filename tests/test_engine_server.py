"""``omnicall serve-engine``: the Realtime protocol server, driven by the openai package's own
client and by a hostile raw WebSocket, over real sockets."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import cv2
import numpy as np
import pytest
from aiohttp import web
from openai import AsyncOpenAI

from omnicall.app.app_state import CALLS_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.realtime.server import create_engine_app
from omnicall.app.setup import create_runner
from omnicall.engine import realtime as rt
from tests.utils import ServerProcess, piper_speech, serving, start_process, tone


@pytest.fixture
async def echo_server() -> AsyncIterator[ServerProcess]:
    server = await start_process("serve-engine", "--engine", "loopback")
    yield server
    assert await server.stop() == 0


@contextlib.asynccontextmanager
async def engine_app(**settings: Any) -> AsyncIterator[tuple[str, web.Application]]:
    """serve-engine in this process (to look inside its sessions)."""
    app = create_engine_app(ServerConfig(engine="loopback", **settings))
    async with serving(app, create_runner(app)) as port:
        yield f"ws://127.0.0.1:{port}/v1/realtime", app


def pcm24k(seconds: float, freq: float = 440) -> str:
    return rt.encode_pcm16(tone(freq, seconds, rate=24_000))


async def receive_until(ws: aiohttp.ClientWebSocketResponse, kind: str,
                        timeout_s: float = 10) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout_s):
        while True:
            message = await ws.receive()
            assert message.type == aiohttp.WSMsgType.TEXT, message
            event = json.loads(message.data)
            rt.SERVER_EVENTS.validate_python(event)  # every event the server sends is typed
            seen.append(event)
            if event["type"] == kind:
                return seen


async def test_the_openai_client_works_unchanged(echo_server: ServerProcess) -> None:
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{echo_server.port}/v1", api_key="none")
    kinds: dict[str, int] = {}
    async with client.realtime.connect(model="omnicall") as conn:
        await conn.session.update(session={"type": "realtime", "instructions": "be brief"})
        await conn.input_audio_buffer.append(audio=pcm24k(1.0))
        async for event in conn:  # typed by the openai package itself
            kinds[event.type] = kinds.get(event.type, 0) + 1
            if kinds.get("response.output_audio.delta", 0) >= 8:
                break
    assert kinds["session.created"] == 1 and kinds["session.updated"] == 1
    assert kinds["response.created"] == 1
    async with aiohttp.ClientSession() as http:
        async with http.get(echo_server.http_url + "health") as resp:
            assert (await resp.json())["engine"] == "loopback"
        async with http.get(echo_server.http_url + "metrics") as resp:
            assert "omnicall_calls_started_total 1.0" in await resp.text()


async def test_hostile_events_get_error_events_and_the_session_goes_on(
        echo_server: ServerProcess) -> None:
    bad = ["{", "[]", "[" * 3000 + "]" * 3000, json.dumps({"type": "nope"}),
           json.dumps({"type": "input_audio_buffer.append", "audio": "%%%"}),
           json.dumps({"type": "input_audio_buffer.append", "audio": "AA=="}),
           json.dumps({"type": "conversation.item.delete", "item_id": "x"}),
           json.dumps({"type": "session.update", "session": {
               "type": "realtime", "audio": {"input": {"format": {"type": "audio/pcmu"}}}}}),
           json.dumps({"type": "conversation.item.create", "item": {
               "type": "message", "role": "user",
               "content": [{"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}}),
           json.dumps({"type": "x" * 100_000})]
    async with aiohttp.ClientSession() as http, http.ws_connect(echo_server.ws_url) as ws:
        await receive_until(ws, "session.created")
        codes = []
        for text in bad:
            await ws.send_str(text)
            events = await receive_until(ws, "error")
            codes.append(events[-1]["error"]["code"])
        await ws.send_bytes(b"\x00\x01")
        codes.append((await receive_until(ws, "error"))[-1]["error"]["code"])
        # still serving: audio in, audio out
        await ws.send_str(rt.dump(rt.audio_append(tone(300, 1.0, rate=24_000))))
        events = await receive_until(ws, "response.output_audio.delta")
    assert codes[:4] == ["invalid_event"] * 4
    assert codes[4:6] == ["invalid_value"] * 2
    assert codes[6] == "item_not_found" and codes[7] == "unsupported_audio_format"
    assert codes[8] == "invalid_value" and codes[9] == "invalid_event"
    assert codes[10] == "invalid_event"
    assert events[-1]["type"] == "response.output_audio.delta"


async def test_hostile_tool_events_are_refused_and_the_session_goes_on(
        echo_server: ServerProcess) -> None:
    tool = {"type": "function", "name": "t", "description": "d",
            "parameters": {"type": "object", "properties": {}}}
    bad = [  # a result nobody asked for, out of order; tools for an engine without any;
        # a deeply nested schema; a huge result
        json.dumps({"type": "conversation.item.create", "item": {
            "type": "function_call_output", "call_id": "call_nope", "output": "x"}}),
        json.dumps({"type": "session.update", "session": {"type": "realtime",
                                                          "tools": [tool] * 500}}),
        json.dumps({"type": "session.update", "session": {"type": "realtime", "tools": [
            {**tool, "parameters": {"a": [[[[[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]]]]]}}]}}),
        json.dumps({"type": "conversation.item.create", "item": {
            "type": "function_call_output", "call_id": "c" * 10_000, "output": "x" * 500_000}}),
    ]
    async with aiohttp.ClientSession() as http, http.ws_connect(echo_server.ws_url) as ws:
        await receive_until(ws, "session.created")
        codes = []
        for text in bad:
            await ws.send_str(text)
            codes.append((await receive_until(ws, "error"))[-1]["error"]["code"])
        await ws.send_str(rt.dump(rt.audio_append(tone(300, 1.0, rate=24_000))))
        events = await receive_until(ws, "response.output_audio.delta")
    assert codes == ["invalid_value", "unsupported", "unsupported", "invalid_value"]
    assert events[-1]["type"] == "response.output_audio.delta"


async def test_wrong_model_and_missing_key_are_refused() -> None:
    server = await start_process("serve-engine", "--engine", "loopback", "--token", "k3y",
                                 "--served-model-name", "qwen3-omni")
    try:
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(server.ws_url)
            assert refused.value.status == 401
            headers = {"Authorization": "Bearer k3y"}
            async with http.ws_connect(server.ws_url, params={"model": "gpt-4o"},
                                       headers=headers) as ws:
                events = await receive_until(ws, "error")
                assert events[0]["error"]["code"] == "model_not_found"
                assert (await ws.receive()).type == aiohttp.WSMsgType.CLOSE
                assert ws.close_code == 1008
            async with http.ws_connect(server.ws_url, params={"model": "qwen3-omni"},
                                       headers=headers) as ws:
                created = await receive_until(ws, "session.created")
                assert created[0]["session"]["model"] == "qwen3-omni"
    finally:
        await server.stop()


async def test_images_reach_the_engine_as_video_frames() -> None:
    ok, png = cv2.imencode(".png", np.full((48, 64, 3), 200, np.uint8))
    assert ok
    async with engine_app() as (url, app), aiohttp.ClientSession() as http, \
            http.ws_connect(url) as ws:
        await receive_until(ws, "session.created")
        await ws.send_str(json.dumps({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{
                "type": "input_image",
                "image_url": "data:image/png;base64," + base64.b64encode(png).decode()}]}}))
        await ws.send_str(rt.dump(rt.audio_append(tone(300, 0.5, rate=24_000))))
        await receive_until(ws, "response.output_audio.delta")
        connection = next(iter(app[CALLS_KEY].sessions.values()))
        assert connection.engine_session.video_units == 1  # type: ignore[attr-defined]


def image_item(png: bytes, item_id: str, event_id: str = "") -> str:
    return json.dumps({"type": "conversation.item.create",
                       **({"event_id": event_id} if event_id else {}),
                       "item": {"id": item_id, "type": "message", "role": "user", "content": [{
                           "type": "input_image",
                           "image_url": "data:image/png;base64," + base64.b64encode(png).decode()
                       }]}})


async def test_deleted_image_items_leave_the_conversation_and_memory_stays_bounded() -> None:
    """conversation.item.delete: the item's image no longer reaches the engine, the server
    says conversation.item.deleted; an unknown id gets item_not_found; a client creating
    hundreds of image items holds the newest 64 ids and one image, not hundreds."""
    from omnicall.app.realtime.input import MAX_IMAGE_ITEMS

    ok, png = cv2.imencode(".png", np.full((48, 64, 3), 200, np.uint8))
    assert ok
    async with engine_app() as (url, app), aiohttp.ClientSession() as http, \
            http.ws_connect(url) as ws:
        await receive_until(ws, "session.created")
        connection: Any = next(iter(app[CALLS_KEY].sessions.values()))
        await ws.send_str(image_item(png.tobytes(), "img_kept"))
        await ws.send_str(image_item(png.tobytes(), "img_gone"))  # replaces the first
        await ws.send_str(json.dumps({"type": "conversation.item.delete",
                                      "item_id": "img_gone"}))
        deleted = (await receive_until(ws, "conversation.item.deleted"))[-1]
        assert deleted["item_id"] == "img_gone"
        await ws.send_str(rt.dump(rt.audio_append(tone(300, 0.5, rate=24_000))))
        await receive_until(ws, "response.output_audio.delta")
        await ws.send_str(json.dumps({"type": "conversation.item.delete", "event_id": "del_1",
                                      "item_id": "img_gone"}))
        unknown = (await receive_until(ws, "error"))[-1]["error"]
        await ws.send_str(image_item(png.tobytes(), "img_kept"))  # an id already taken
        taken = (await receive_until(ws, "error"))[-1]["error"]
        for n in range(200):
            await ws.send_str(image_item(png.tobytes(), f"img_{n}"))
        await ws.send_str(json.dumps({"type": "conversation.item.delete", "item_id": "img_199"}))
        await receive_until(ws, "conversation.item.deleted")  # events are handled in order
        assert connection.engine_session.video_units == 0  # the deleted image never went
        assert connection.input.images == 202 and connection.input.images_deleted == 2
        assert list(connection.input.image_items) == [f"img_{n}" for n in
                                                      range(200 - MAX_IMAGE_ITEMS, 199)]
        assert len(connection.input.video) == 0  # the last one was deleted while waiting
    assert unknown["code"] == "item_not_found" and unknown["event_id"] == "del_1"
    assert taken["code"] == "invalid_value" and "already exists" in taken["message"]


async def test_a_no_video_server_refuses_images_and_goes_on() -> None:
    ok, png = cv2.imencode(".png", np.full((48, 64, 3), 200, np.uint8))
    assert ok
    async with engine_app(video=False) as (url, app), aiohttp.ClientSession() as http, \
            http.ws_connect(url) as ws:
        await receive_until(ws, "session.created")
        await ws.send_str(json.dumps({"type": "conversation.item.create", "event_id": "img_1",
                                      "item": {"type": "message", "role": "user", "content": [{
                                          "type": "input_image", "image_url":
                                          "data:image/png;base64," +
                                          base64.b64encode(png).decode()}]}}))
        refused = (await receive_until(ws, "error"))[-1]["error"]
        await ws.send_str(rt.dump(rt.audio_append(tone(300, 0.5, rate=24_000))))
        await receive_until(ws, "response.output_audio.delta")  # the call goes on
        connection = next(iter(app[CALLS_KEY].sessions.values()))
        assert connection.engine_session.video_units == 0  # type: ignore[attr-defined]
    # the remote engine knows this answer to its image (by event id): audio only from then
    assert refused["code"] == "unsupported" and refused["event_id"] == "img_1"
    assert "no images" in refused["message"]


async def test_manual_turns_with_the_cascade_engine() -> None:
    """turn_detection null: the client commits its audio and asks for the reply."""
    server = await start_process("serve-engine", "--engine", "cascade")
    try:
        speech = piper_speech("What is the capital of France?", rate=24_000, tail_s=0.3)
        async with aiohttp.ClientSession() as http, http.ws_connect(server.ws_url) as ws:
            await receive_until(ws, "session.created")
            await ws.send_str(rt.dump(rt.session_update(instructions=None, server_vad=False)))
            updated = await receive_until(ws, "session.updated")
            assert updated[-1]["session"]["audio"]["input"]["turn_detection"] is None
            for start in range(0, len(speech), 4800):
                await ws.send_str(rt.dump(rt.audio_append(speech[start:start + 4800])))
            await ws.send_str(rt.dump(rt.commit()))  # right behind: the audio is the turn
            await ws.send_str(rt.dump(rt.response_create()))
            events = await receive_until(ws, "response.done", timeout_s=60)
    finally:
        await server.stop()
    kinds = [e["type"] for e in events]
    assert "input_audio_buffer.committed" in kinds
    assert "input_audio_buffer.speech_started" not in kinds  # no server VAD
    heard = next(e for e in events
                 if e["type"] == "conversation.item.input_audio_transcription.completed")
    assert "capital" in heard["transcript"].lower()
    assert "".join(e["delta"] for e in events
                   if e["type"] == "response.output_audio_transcript.delta").strip()
    audio = [rt.decode_pcm16(e["delta"]) for e in events
             if e["type"] == "response.output_audio.delta"]
    assert sum(len(a) for a in audio) > 24_000 * 0.5
    assert events[-1]["response"]["status"] == "completed"


async def test_workers_share_health_and_metrics() -> None:
    server = await start_process("serve-engine", "--engine", "loopback", "--workers", "2")
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(server.http_url + "health") as resp:
                health = await resp.json()
            async with http.ws_connect(server.ws_url) as ws:
                await receive_until(ws, "session.created")
                async with http.get(server.http_url + "metrics") as resp:
                    metrics = await resp.text()
    finally:
        assert await server.stop() == 0
    assert health["workers_serving"] == 2 and health["engine"] == "loopback"
    assert "omnicall_workers_serving 2.0" in metrics
    assert 'omnicall_calls_started_total{worker="' in metrics


async def test_the_native_qwen_omni_engine_behind_serve_engine(omni_dir: Any) -> None:
    """--engine qwen-omni (tiny random checkpoint): server VAD turns, a streamed reply with
    audio; manual turns are not something this engine does, and it says so."""
    server = await start_process("serve-engine", "--engine", "qwen-omni", "--model",
                                 str(omni_dir), timeout_s=180)
    try:
        speech = piper_speech("What is the capital of France?", rate=24_000, tail_s=1.5)
        async with aiohttp.ClientSession() as http, http.ws_connect(server.ws_url) as ws:
            await receive_until(ws, "session.created")
            for start in range(0, len(speech), 1920):
                await ws.send_str(rt.dump(rt.audio_append(speech[start:start + 1920])))
                await asyncio.sleep(0.02)
            events = await receive_until(ws, "response.output_audio.delta", timeout_s=120)
            await ws.send_str(rt.dump(rt.session_update(instructions=None, server_vad=False)))
            refused = await receive_until(ws, "error", timeout_s=60)
    finally:
        await server.stop()
    kinds = [e["type"] for e in events]
    assert "input_audio_buffer.speech_started" in kinds and "response.created" in kinds
    assert rt.decode_pcm16(events[-1]["delta"]).size > 0
    assert refused[-1]["error"]["code"] == "unsupported"


async def test_input_goes_through_the_media_plane_and_controls_reach_the_engine() -> None:
    """Appends of any size become whole 80 ms units, none lost; a clear drops what waits;
    typed text and cancels take the same path as a call's page."""
    async with engine_app() as (url, app), aiohttp.ClientSession() as http, \
            http.ws_connect(url) as ws:
        await receive_until(ws, "session.created")
        audio = tone(300, 1.0, rate=24_000)
        for start in range(0, len(audio), 3331):  # chunks that are no multiple of a frame
            await ws.send_str(rt.dump(rt.audio_append(audio[start:start + 3331])))
        await ws.send_str(json.dumps({"type": "input_audio_buffer.clear"}))
        await receive_until(ws, "input_audio_buffer.cleared")
        connection: Any = next(iter(app[CALLS_KEY].sessions.values()))
        assert connection.input.audio_ms == pytest.approx(1000.0)
        assert 11 <= connection.input.units_taken <= 12
        assert connection.input.ring.dropped_frames == 0
        assert connection.buffer_frames() == {"realtime_input": 0}
        await ws.send_str(json.dumps({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "hello"}]}}))
        await ws.send_str(json.dumps({"type": "response.create"}))
        refused = await receive_until(ws, "error")
        assert refused[-1]["error"]["code"] == "unsupported"  # loopback takes no typed text
        await ws.send_str(json.dumps({"type": "response.cancel"}))
        await ws.send_str(json.dumps({"type": "input_audio_buffer.clear"}))
        await receive_until(ws, "input_audio_buffer.cleared")  # events are handled in order
        assert connection.controls.interrupts == 1
        assert connection.engine_session.interrupts == 1
