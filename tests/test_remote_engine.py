"""The remote engine against real ``omnicall serve-engine`` processes over real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from aiohttp import web

from omnicall.app.app_state import CALLS_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.storage.store import KEY_PREFIX
from omnicall.client import Microphone, connect
from omnicall.media.third_party import use_loopback_candidates
from tests.utils import (
    PAUSED_QUESTION,
    PAUSED_QUESTION_WORDS,
    ServerProcess,
    piper_speech,
    redis_server,
    running_server,
    serving,
    spawn_process,
    splice_pause,
    start_process,
    tone,
    vanish,
    wait_for,
)


@pytest.fixture
async def echo_engines() -> Any:
    servers = [await start_process("serve-engine", "--engine", "loopback") for _ in range(2)]
    yield servers
    for server in servers:
        await server.stop()


def remote_config(*servers: Any, **settings: Any) -> ServerConfig:
    return ServerConfig(engine="remote", ice_loopback=True,
                        engine_url=",".join(s.ws_url for s in servers), **settings)


async def test_a_call_through_a_model_server_hears_its_echo(
        echo_engines: list[ServerProcess]) -> None:
    async with running_server(remote_config(echo_engines[0])) as (url, app):
        call = await connect(url, Microphone(tone(440, 4, rate=48_000)))
        await wait_for(lambda: len(call.received) > 100, timeout_s=15)
        # the echo makes two network hops: wait for it, not for a fixed time
        await wait_for(lambda: (np.abs(call.received_audio().astype(np.int32)) > 3000).sum()
                       > 48_000 * 0.5, timeout_s=15)
        audio = call.received_audio()
        await call.close()
        await wait_for(lambda: len(app[CALLS_KEY]) == 0, timeout_s=10)
    loud = np.abs(audio.astype(np.int32)) > 3000
    assert loud.sum() > 48_000 * 0.5, loud.sum()
    spectrum = np.abs(np.fft.rfft(audio[-48_000:].astype(np.float64)))
    assert abs(np.argmax(spectrum) - 440) < 10


@pytest.fixture(scope="module")
def cascade_engine_server() -> Any:
    server = spawn_process("serve-engine", "--engine", "cascade")
    yield server
    server.stop()


def question(text: str, tail_s: float = 6.0) -> np.ndarray:
    return piper_speech(text, rate=48_000, lead_s=0.5, tail_s=tail_s)


def answered(call: Any) -> list[dict[str, Any]]:
    return [m for m in call.messages if m.get("type") == "turn" and m.get("role") == "assistant"
            and m.get("phase") == "end" and not m.get("interrupted")]


def remote_session(app: Any, call: Any) -> Any:
    return app[CALLS_KEY].sessions[call.session_id].engine_session


async def test_spoken_question_is_answered_by_the_cascade_engine_server(
        cascade_engine_server: Any) -> None:
    async with running_server(remote_config(cascade_engine_server)) as (url, app):
        call = await connect(url, Microphone(question(
            "What is the capital of France?")))
        await wait_for(lambda: answered(call), timeout_s=40)
        # the reply's end is sent once it is generated; its sound is played out in real time
        await wait_for(lambda: np.abs(call.received_audio().astype(np.int32)).max(initial=0)
                       > 3000, timeout_s=10)
        audio = call.received_audio()
        session = remote_session(app, call)
        await call.close()
    heard = [m["text"] for m in call.messages if m.get("type") == "transcript" and m["final"]]
    assert heard and "capital" in heard[0].lower()
    reply = "".join(m["delta"] for m in call.messages if m.get("type") == "assistant_text")
    assert reply.strip()
    stages = {m["stage"] for m in call.messages if m.get("type") == "timing"}
    assert {"speech_start", "speech_end", "end_of_turn", "llm_first_token",
            "first_audio_out"} <= stages  # the page's latency chart works unchanged
    assert np.abs(audio.astype(np.int32)).max() > 3000  # the reply was heard
    assert session.history[:2] == [("user", heard[0]), ("assistant", reply.strip())]


async def test_tools_run_at_the_front_end_as_realtime_function_calls(
        cascade_engine_server: Any) -> None:
    """The engine server's model picks the tool; the front-end (which has the operator's
    --tools) runs it and sends the result back; the answer uses it."""
    config = remote_config(cascade_engine_server, tools="examples.tools")
    async with running_server(config) as (url, app):
        call = await connect(url, Microphone(tone(0, 30, rate=48_000)))
        await wait_for(lambda: call.session_id in app[CALLS_KEY].sessions, timeout_s=10)
        # the data channel is open (the server says hello on it)
        await wait_for(lambda: any(m.get("type") == "state" for m in call.messages),
                       timeout_s=10)
        channel = next(iter(call.pc.sctp._data_channels.values()))  # type: ignore[union-attr]
        channel.send(json.dumps({"type": "text", "text": "What time is it?"}))
        await wait_for(lambda: answered(call), timeout_s=40)
        await call.close()
    tool = next(m for m in call.messages if m.get("type") == "tool")
    assert tool["name"] == "local_time" and tool["ok"], tool
    assert re.fullmatch(r"It is \d\d:\d\d on .*", tool["output"]), tool
    reply = "".join(m["delta"] for m in call.messages if m.get("type") == "assistant_text")
    # answered from the result (the 135M model sometimes garbles the minutes it copies)
    assert re.search(r"\d{1,2}:\d\d", reply), (tool, reply)


async def test_barge_in_truncates_the_reply_at_the_milliseconds_played(
        cascade_engine_server: Any) -> None:
    async with running_server(remote_config(cascade_engine_server)) as (url, app):
        call = await connect(url, Microphone(question(
            "Please tell me a long story about a dragon and a brave knight.", tail_s=20.0)))
        await wait_for(lambda: any(m.get("type") == "timing" and m["stage"] ==
                                   "first_audio_out" for m in call.messages), timeout_s=40)
        heard_before = len(call.received_audio())
        session = remote_session(app, call)
        reply = session.replies.live()
        # 1.5 s of it sent to the caller (measured by the playout, however fast it is made)
        await wait_for(lambda: reply.gate.heard_s() >= 1.5, timeout_s=30)
        channel = next(iter(call.pc.sctp._data_channels.values()))  # type: ignore[union-attr]
        channel.send('{"type": "interrupt"}')
        await wait_for(lambda: session.truncations, timeout_s=5)
        await wait_for(lambda: session.truncated_acks, timeout_s=5)
        await call.close()
    played = session.truncations[0]
    assert 1500 <= played < 4000, played  # what had been sent, not what was made
    assert session.truncated_acks[0] == played  # the engine server truncated its memory there
    assert heard_before >= 0
    assert session.history[-1][0] == "assistant" and session.history[-1][1].endswith("...")


async def test_pool_failover_moves_the_call_and_keeps_the_conversation() -> None:
    """Two engine servers; the one holding the call is killed mid-reply: within 2 s the call
    is on the other, which got the conversation so far, and the next question is answered."""
    servers = [spawn_process("serve-engine", "--engine", "cascade") for _ in range(2)]
    try:
        two_questions = np.concatenate([
            question("What is the capital of France?", tail_s=1.0),
            np.zeros(48_000 * 9, np.int16),
            question("And what is the capital of Spain?", tail_s=8.0)])
        async with running_server(remote_config(*servers)) as (url, app):
            call = await connect(url, Microphone(two_questions))
            session = remote_session(app, call)
            await wait_for(lambda: any(m.get("type") == "timing" and m["stage"] ==
                                       "first_audio_out" for m in call.messages), 40)
            holder = next(s for s in servers if s.ws_url == session.conn.url)
            other = next(s for s in servers if s is not holder)
            history_before = list(session.history)
            holder.proc.kill()  # mid-reply
            killed_at = asyncio.get_running_loop().time()
            await wait_for(lambda: session.conn is not None
                           and session.conn.url == other.ws_url, timeout_s=5)
            moved_s = asyncio.get_running_loop().time() - killed_at
            await wait_for(lambda: any("moved to another server" in m.get("message", "")
                                       for m in call.messages), timeout_s=5)
            await wait_for(lambda: len([m for m in call.messages if m.get("type") ==
                                        "transcript" and m["final"]]) >= 2, timeout_s=40)
            await wait_for(lambda: answered(call), timeout_s=40)
            await call.close()
    finally:
        for server in servers:
            server.stop()
    assert moved_s < 2.0, moved_s
    assert session.failovers == 1
    assert history_before[0][0] == "user" and "capital" in history_before[0][1].lower()
    assert session.history[0] == history_before[0]  # replayed to the new server, kept
    finals = [m["text"] for m in call.messages if m.get("type") == "transcript" and m["final"]]
    assert "spain" in finals[-1].lower()
    # the cut reply was not spoken again: one assistant start per answered user turn at most
    starts = [m for m in call.messages if m.get("type") == "turn"
              and m.get("role") == "assistant" and m.get("phase") == "start"]
    assert len(starts) == len({m["turn"] for m in starts})


async def test_a_stalled_engine_server_is_left_for_another(
        echo_engines: list[ServerProcess]) -> None:
    """SIGSTOP: the server's socket stays open but nothing answers, not even pings."""
    import signal

    async with running_server(remote_config(*echo_engines)) as (url, app):
        call = await connect(url, Microphone(tone(440, 30, rate=48_000)))
        session = remote_session(app, call)
        await wait_for(lambda: len(call.received) > 50, timeout_s=15)
        holder = next(s for s in echo_engines if s.ws_url == session.conn.url)
        holder.proc.send_signal(signal.SIGSTOP)
        try:
            await wait_for(lambda: session.failovers == 1 and session.conn is not None,
                           timeout_s=10)
            before = len(call.received)
            await wait_for(lambda: len(call.received) > before + 50, timeout_s=10)
        finally:
            holder.proc.send_signal(signal.SIGCONT)
        await call.close()
        await wait_for(lambda: len(app[CALLS_KEY]) == 0, timeout_s=10)


def realtime_app(handle: Any) -> web.Application:
    app = web.Application()
    app.router.add_get("/v1/realtime", handle)
    return app


@contextlib.asynccontextmanager
async def garbage_server() -> AsyncIterator[str]:
    """A 'model server' that says hello, then sends nonsense forever."""
    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "session.created", "event_id": "e",
                                      "session": {"type": "realtime"}}))
        with contextlib.suppress(ConnectionError):
            for index in range(10_000):
                await ws.send_str(["{", '{"type": "response.output_audio.delta"}',
                                   json.dumps({"type": "x" * 50})][index % 3])
                await asyncio.sleep(0.005)
        return ws

    async with serving(realtime_app(handle)) as port:
        yield f"ws://127.0.0.1:{port}/v1/realtime"


async def test_a_server_sending_garbage_ends_with_a_readable_error_and_no_leak(
        caplog: pytest.LogCaptureFixture) -> None:
    async with garbage_server() as ws_url, running_server(ServerConfig(
            engine="remote", ice_loopback=True, engine_url=ws_url)) as (url, app):
        call = await connect(url, Microphone(tone(440, 30, rate=48_000)))
        await wait_for(lambda: len(app[CALLS_KEY]) == 0, timeout_s=20)
        # torn down on the server; its last messages (error, then goodbye) may still be on
        # their way to the page
        await wait_for(lambda: any(m.get("type") == "goodbye" for m in call.messages),
                       timeout_s=5)
        errors = [m["message"] for m in call.messages if m.get("type") == "error"]
        goodbye = [m for m in call.messages if m.get("type") == "goodbye"]
        await call.close()
        tasks = [t.get_name() for t in asyncio.all_tasks()
                 if t.get_name().startswith(("call-", "engine-session-"))]
    assert any("unavailable" in e for e in errors), errors
    assert goodbye and goodbye[0]["reason"] == "engine_error"
    assert not tasks
    unreadable = [r for r in caplog.records if "unreadable event" in r.getMessage()]
    assert 0 < len(unreadable) <= 10  # logged a few times, not 50


async def test_a_dropped_call_resumes_on_another_front_end_through_redis(
        cascade_engine_server: Any, tmp_path: Path) -> None:
    """Two front-ends (two workers or machines) share Redis: a call that drops on one comes
    back on the other with its conversation."""
    with redis_server(tmp_path) as redis_url:
        fronts = [await start_process("serve", "--engine", "remote", "--ice-loopback",
                                      "--engine-url", cascade_engine_server.ws_url,
                                      "--store", redis_url) for _ in range(2)]
        use_loopback_candidates(True)
        try:
            call = await connect(fronts[0].http_url, Microphone(question(
                "What is the capital of France?", tail_s=30.0)))
            await wait_for(lambda: answered(call), timeout_s=40)
            vanish(call.pc)  # the laptop lid closes
            again = await connect(fronts[1].http_url, Microphone(question(
                "What is the capital of Spain?", tail_s=10.0)), body={"resume": call.session_id})
            await wait_for(lambda: answered(again), timeout_s=40)
            await again.close()
            await call.close()
        finally:
            use_loopback_candidates(False)
            for front in fronts:
                await front.stop()
        stored = redis.Redis.from_url(redis_url).lrange(KEY_PREFIX + call.session_id, 0, -1)
    assert again.resumed and again.session_id == call.session_id
    assert any(m.get("state") == "resumed" for m in again.messages)
    items = [json.loads(raw) for raw in stored]
    assert [role for role, _ in items[:4]] == ["user", "assistant", "user", "assistant"]
    assert "france" in items[0][1].lower() and "spain" in items[2][1].lower()


async def test_local_turn_mode_commits_and_asks_for_the_reply(
        cascade_engine_server: Any) -> None:
    """--turn-mode local: omnicall's own turn detector ends the turn (commit +
    response.create); the model server's VAD is off."""
    cfg = remote_config(cascade_engine_server, turn_mode="local")
    async with running_server(cfg) as (url, _app):
        call = await connect(url, Microphone(question("How many days are in a week?")))
        await wait_for(lambda: answered(call), timeout_s=40)
        await call.close()
    finals = [m["text"] for m in call.messages if m.get("type") == "transcript" and m["final"]]
    assert finals and "week" in finals[0].lower()
    stages = {m["stage"] for m in call.messages if m.get("type") == "timing"}
    assert {"speech_end", "end_of_turn", "first_audio_out"} <= stages


async def test_local_turn_mode_with_the_end_of_turn_model_waits_through_a_pause(
        cascade_engine_server: Any) -> None:
    """--turn-mode local --turn-model smart: the front-end's Smart Turn judges the pause
    (the fixed 400 ms hangover would commit this sentence at its 0.8 s pause)."""
    whole = question(PAUSED_QUESTION)
    spliced, _ = splice_pause(whole, 0.8, rate=48_000)
    cfg = remote_config(cascade_engine_server, turn_mode="local", turn_model="smart")
    async with running_server(cfg) as (url, app):
        call = await connect(url, Microphone(spliced))
        await wait_for(lambda: answered(call), timeout_s=40)
        verdicts = list(remote_session(app, call).listener.verdicts)
        await call.close()
    user_ends = [m for m in call.messages if m.get("type") == "turn"
                 and m.get("role") == "user" and m.get("phase") == "end"]
    assert len(user_ends) == 1  # one turn, not cut at the pause
    finals = [m["text"].lower() for m in call.messages
              if m.get("type") == "transcript" and m["final"]]
    assert finals and all(w in finals[0] for w in PAUSED_QUESTION_WORDS), finals
    assert verdicts[0] < 0.5 < verdicts[-1], verdicts


async def test_camera_frames_reach_a_model_server_that_takes_images() -> None:
    """A server that accepts input_image gets the camera's frames (the frame policy's: the
    first at once, then through each turn and at its end; tests/test_remote_images.py
    drives that by media units)."""
    from omnicall.app.realtime.server import create_engine_app
    from omnicall.app.setup import create_runner
    from omnicall.client import Microphone, connect
    from tests.utils import ColorVideoTrack

    engine_app = create_engine_app(ServerConfig(engine="cascade"))
    async with serving(engine_app, create_runner(engine_app)) as port:
        cfg = ServerConfig(engine="remote", ice_loopback=True,
                           engine_url=f"ws://127.0.0.1:{port}/v1/realtime")
        async with running_server(cfg) as (url, _):
            call = await connect(url, Microphone(question("What do you see?")),
                                        ColorVideoTrack())
            await wait_for(lambda: answered(call), timeout_s=40)
            connection = next(iter(engine_app[CALLS_KEY].sessions.values()))
            images = connection.input.images  # type: ignore[attr-defined]
            await call.close()
    assert images >= 1
    assert not any("does not accept video" in m.get("message", "") for m in call.messages)


@contextlib.asynccontextmanager
async def image_refusing_server() -> AsyncIterator[tuple[str, list[str]]]:
    """Stands in for vllm-omni's Realtime endpoint where it differs from serve-engine: its
    server VAD reports a turn every second, and an input_image item gets an error event
    naming the client event (vllm-omni rejects images; it cannot run here without a GPU)."""
    received: list[str] = []

    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "session.created", "event_id": "e0",
                                      "session": {"type": "realtime"}}))

        async def vad() -> None:
            for turn in range(100):
                await asyncio.sleep(1.0)
                await ws.send_str(json.dumps({"type": "input_audio_buffer.speech_started",
                                              "event_id": f"s{turn}", "audio_start_ms": 0,
                                              "item_id": f"u{turn}"}))

        ticker = asyncio.ensure_future(vad())
        try:
            async for message in ws:
                event = json.loads(message.data)
                received.append(event["type"])
                content = event.get("item", {}).get("content", [{}])
                if content and content[0].get("type") == "input_image":
                    await ws.send_str(json.dumps({
                        "type": "error", "event_id": "e1", "error": {
                            "type": "invalid_request_error", "code": "invalid_value",
                            "message": "input_image is not supported",
                            "event_id": event.get("event_id")}}))
        finally:
            ticker.cancel()
        return ws

    async with serving(realtime_app(handle)) as port:
        yield f"ws://127.0.0.1:{port}/v1/realtime", received


async def test_a_server_refusing_images_leaves_the_call_audio_only_and_says_so_once(
        caplog: pytest.LogCaptureFixture) -> None:
    from omnicall.client import Microphone, connect
    from tests.utils import ColorVideoTrack

    async with image_refusing_server() as (ws_url, received), running_server(ServerConfig(
            engine="remote", ice_loopback=True, engine_url=ws_url)) as (url, app):
        call = await connect(url, Microphone(tone(440, 30, rate=48_000)),
                                    ColorVideoTrack())
        session = remote_session(app, call)
        await wait_for(lambda: not session.video, timeout_s=10)
        await asyncio.sleep(3.0)  # three more turns start: no more images
        await call.close()
    assert received.count("conversation.item.create") == 1
    assert received.count("input_audio_buffer.append") > 20  # the call went on
    notices = [m for m in call.messages if "does not accept video" in m.get("message", "")]
    assert len(notices) == 1 and notices[0]["recoverable"]
    assert len([r for r in caplog.records if "refuses images" in r.getMessage()]) == 1

