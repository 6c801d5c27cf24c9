"""A remote session's reply cut short (engine.remote.session, on the conversation
layer's reply life), against a scripted local Realtime server: its end carries the
milliseconds the server was told in ``conversation.item.truncate``, and the memory keeps
that share of its words."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from omnicall.engine import realtime as rt
from omnicall.engine.base import SessionOptions
from omnicall.engine.events import AssistantAudio, TurnEvent
from omnicall.engine.remote.engine import RemoteEngine
from omnicall.engine.remote.settings import RemoteSettings
from tests.cascade_fixtures import Recorder
from tests.utils import serving, tone, wait_for

REPLY_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
REPLY_S = 3.0


@contextlib.asynccontextmanager
async def speaking_server() -> AsyncIterator[tuple[str, list[dict[str, Any]],
                                                   list[web.WebSocketResponse]]]:
    """A model server that answers each session at once with a 3 s reply (its text, then its
    audio in 100 ms deltas), acknowledges truncations, and records what it is sent; the
    test may speak for its VAD on the sockets it yields."""
    received: list[dict[str, Any]] = []
    sockets: list[web.WebSocketResponse] = []

    async def send(ws: web.WebSocketResponse, fields: dict[str, Any]) -> None:
        event = rt.SERVER_EVENTS.validate_python({"event_id": rt.new_id("event"), **fields})
        await ws.send_str(rt.dump(event))

    async def reply(ws: web.WebSocketResponse) -> None:
        where = {"response_id": "resp_1", "item_id": "item_1", "output_index": 0,
                 "content_index": 0}
        await send(ws, {"type": "response.created", "response": {
            "id": "resp_1", "object": "realtime.response", "status": "in_progress",
            "output": []}})
        await send(ws, {"type": "response.output_item.added", "response_id": "resp_1",
                        "output_index": 0, "item": {"id": "item_1", "type": "message",
                                                    "role": "assistant", "content": []}})
        await send(ws, {"type": "response.output_audio_transcript.delta", **where,
                        "delta": " ".join(REPLY_WORDS)})
        chunk = tone(300, 0.1, rate=rt.REALTIME_RATE_HZ)
        for _ in range(int(REPLY_S / 0.1)):
            await send(ws, {"type": "response.output_audio.delta", **where,
                            "delta": rt.encode_pcm16(chunk)})

    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        sockets.append(ws)
        await send(ws, {"type": "session.created", "session": {"type": "realtime"}})
        async for message in ws:
            event = json.loads(message.data)
            received.append(event)
            if event["type"] == "session.update":
                await reply(ws)
            elif event["type"] == "conversation.item.truncate":
                await send(ws, {"type": "conversation.item.truncated",
                                "item_id": event["item_id"], "content_index": 0,
                                "audio_end_ms": event["audio_end_ms"]})
        return ws

    app = web.Application()
    app.router.add_get("/v1/realtime", handle)
    async with serving(app) as port:
        yield f"ws://127.0.0.1:{port}/v1/realtime", received, sockets


@pytest.mark.parametrize("how", ["interrupt", "server_vad"])
async def test_a_cut_reply_ends_with_the_milliseconds_the_server_was_told(how: str) -> None:
    """interrupt(), or the model server's VAD hearing the caller: the reply's end carries
    heard_ms, the very audio_end_ms of its conversation.item.truncate, and the memory keeps
    the words of that share of the reply."""
    async with speaking_server() as (ws_url, received, sockets):
        engine = RemoteEngine(RemoteSettings(engine_urls=(ws_url,)))
        await engine.start()
        session = engine.open_session("cut", SessionOptions())
        recorder = Recorder(session)
        try:
            await wait_for(lambda: recorder.of(AssistantAudio), timeout_s=10)
            await asyncio.sleep(0.5)  # the caller hears half a second of it
            if how == "interrupt":
                session.interrupt()
            else:
                await sockets[0].send_str(json.dumps({
                    "type": "input_audio_buffer.speech_started", "event_id": "vad_1",
                    "audio_start_ms": 0, "item_id": "user_1"}))
            await wait_for(lambda: session.truncated_acks, timeout_s=5)  # type: ignore[attr-defined]
        finally:
            await recorder.close()
            await engine.close()
    [end] = [e for e in recorder.of(TurnEvent) if e.role == "assistant" and e.phase == "end"]
    [truncate] = [e for e in received if e["type"] == "conversation.item.truncate"]
    assert end.interrupted and end.heard_ms is not None
    assert end.heard_ms == truncate["audio_end_ms"] == session.truncations[0]  # type: ignore[attr-defined]
    assert 400 < end.heard_ms < 2000, end.heard_ms  # half a second heard, not 3 s sent
    heard_words = REPLY_WORDS[:int(len(REPLY_WORDS) * end.heard_ms / (REPLY_S * 1000))]
    assert session.history[-1] == ("assistant", " ".join(heard_words) + " ...")  # type: ignore[attr-defined]
    assert ("response.cancel" in [e["type"] for e in received]) == (how == "interrupt")
