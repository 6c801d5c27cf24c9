"""OpenTelemetry traces (--otel-endpoint): a call's and its turns' spans, built from the engine's
events (the SDK's in-memory exporter reads them), and exported over OTLP/HTTP to a real
receiver: by a Tracing, by a real call through the server, and by a Realtime connection."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from aiohttp import ClientSession
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from omnicall.app.app_state import TRACING_KEY
from omnicall.app.config import ConfigError, ServerConfig
from omnicall.app.tracing import (
    MAX_OPEN_TURNS,
    MAX_TOOL_CALLS_KEPT,
    CallTrace,
    Tracing,
    traces_url,
)
from omnicall.app.turns.event_pump import EventPump
from omnicall.engine import realtime as rt
from omnicall.engine.events import (
    AssistantText,
    EngineEvent,
    StageTiming,
    ToolCall,
    TurnEvent,
    UserTranscript,
)
from omnicall.media.clock import ManualClock
from tests.otlp_receiver import otlp_receiver
from tests.test_recordings import ask
from tests.utils import piper_speech, running_server, start_process

STAGES = {"speech_start": 10.0, "speech_end": 11.2, "end_of_turn": 11.6, "asr_start": 11.6,
          "asr_done": 11.75, "llm_first_token": 11.9, "llm_first_clause": 12.0,
          "tts_first_chunk": 12.1, "first_audio_out": 12.15}


def traced(clock: ManualClock) -> tuple[Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    return Tracing("http://127.0.0.1:9", clock, processor=SimpleSpanProcessor(exporter),
                   attributes={"omnicall.engine": "cascade"}), exporter


def pump_for(trace: CallTrace) -> EventPump:
    async def route(event: EngineEvent) -> None:
        return None
    return EventPump(route, trace=trace)


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


async def test_a_turn_is_a_span_under_its_call_with_its_stages_stretches_and_tools() -> None:
    clock = ManualClock(start=10.0)
    tracing, exporter = traced(clock)
    trace = tracing.call("c1", "webrtc", {"omnicall.mode": "kiosk"})
    pump = pump_for(trace)
    pump.observe(UserTranscript("what is the weather", final=True, turn_id=3))
    for stage, at_s in STAGES.items():
        pump.observe(StageTiming(3, stage, at_s))
    await clock.advance(2.0)  # 12.0: a tool returned after 150 ms
    pump.observe(ToolCall(3, "call-1", "weather", {"city": "Oslo"}, "sunny", "", 150.0))
    pump.observe(ToolCall(3, "call-2", "clock", {}, "", "timed out", 5.0))
    pump.observe(AssistantText("It is sunny.", 3))
    await clock.advance(1.0)  # 13.0: the reply played out
    pump.observe(TurnEvent("assistant", "end", 3, heard_ms=850))
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans if s.name == "call"] == []  # the call is still on
    named = by_name(spans)
    turn = named["turn"]
    ns = trace.wall_ns
    assert (turn.start_time, turn.end_time) == (ns(10.0), ns(13.0))
    assert turn.attributes is not None
    assert turn.attributes["omnicall.call_id"] == "c1" and turn.attributes["omnicall.turn_id"] == 3
    assert turn.attributes["omnicall.interrupted"] is False
    assert turn.attributes["omnicall.heard_ms"] == 850
    assert turn.attributes["omnicall.user_chars"] == len("what is the weather")  # not the words
    assert "what is the weather" not in repr(
        [dict(s.attributes or {}) for s in spans])
    assert turn.attributes["omnicall.stage.first_audio_out_ms"] == 2150.0
    assert [(e.name, e.timestamp) for e in turn.events] == [
        (stage, ns(at_s)) for stage, at_s in STAGES.items()]
    # the stretches between stages, children of the turn
    for name, start_s, end_s in (("end_of_speech", 11.2, 11.6), ("asr", 11.6, 11.75),
                                 ("first_token", 11.75, 11.9), ("first_clause", 11.9, 12.0),
                                 ("tts", 12.0, 12.1), ("first_sound_out", 11.6, 12.15)):
        span = named[name]
        assert span.parent is not None and span.parent.span_id == turn.context.span_id, name
        assert (span.start_time, span.end_time) == (ns(start_s), ns(end_s)), name
        assert span.context.trace_id == turn.context.trace_id
    assert "look" not in named  # not reported: not written
    weather, clock_tool = named["tool weather"], named["tool clock"]
    assert (weather.start_time, weather.end_time) == (ns(11.85), ns(12.0))
    assert weather.attributes is not None and weather.attributes["omnicall.tool.ok"] is True
    assert clock_tool.status.status_code.name == "ERROR"
    assert clock_tool.status.description == "timed out"
    trace.end("hangup")
    call = by_name(exporter.get_finished_spans())["call"]
    assert turn.parent is not None and turn.parent.span_id == call.context.span_id
    assert call.attributes == {"omnicall.call_id": "c1", "omnicall.kind": "webrtc",
                               "omnicall.engine": "cascade", "omnicall.mode": "kiosk",
                               "omnicall.close_reason": "hangup", "omnicall.turns": 1,
                               "omnicall.barge_ins": 0}
    assert call.end_time == ns(13.0)


async def test_a_barge_in_is_marked_on_its_turn_and_counted_on_the_call() -> None:
    clock = ManualClock(start=5.0)
    tracing, exporter = traced(clock)
    trace = tracing.call("c2", "realtime")
    pump = pump_for(trace)
    pump.observe(StageTiming(1, "end_of_turn", 5.0))
    await clock.advance(0.7)
    pump.observe(TurnEvent("assistant", "end", 1, interrupted=True, heard_ms=320))
    turn = by_name(exporter.get_finished_spans())["turn"]
    barge_in = next(e for e in turn.events if e.name == "barge_in")
    assert barge_in.timestamp == trace.wall_ns(5.7)
    assert barge_in.attributes == {"omnicall.heard_ms": 320}
    assert turn.attributes is not None and turn.attributes["omnicall.interrupted"] is True
    trace.end("closed")
    trace.end("again")  # once only
    trace.turn_ended(TurnEvent("assistant", "end", 2), {})  # after the end: nothing
    calls = [s for s in exporter.get_finished_spans() if s.name == "call"]
    assert len(calls) == 1 and calls[0].attributes is not None
    assert calls[0].attributes["omnicall.barge_ins"] == 1
    assert calls[0].attributes["omnicall.close_reason"] == "closed"
    assert len([s for s in exporter.get_finished_spans() if s.name == "turn"]) == 1


def test_turns_that_never_end_keep_a_bounded_table() -> None:
    clock = ManualClock()
    tracing, _ = traced(clock)
    trace = tracing.call("c3", "webrtc")
    for turn_id in range(200):
        for n in range(MAX_TOOL_CALLS_KEPT + 5):
            trace.observe(ToolCall(turn_id, f"{n}", "t", {}, "", "", 1.0))
        trace.observe(UserTranscript("hi", final=True, turn_id=turn_id))
    assert len(trace._tools) <= MAX_OPEN_TURNS
    assert all(len(calls) <= MAX_TOOL_CALLS_KEPT for calls in trace._tools.values())
    assert len(trace._user_chars) <= MAX_OPEN_TURNS


def test_the_endpoint_is_a_receiver_base_url_or_its_traces_url() -> None:
    assert traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert traces_url("https://x/v1/traces") == "https://x/v1/traces"
    assert ServerConfig(otel_endpoint="http://collector:4318").validate().otel_endpoint
    with pytest.raises(ConfigError, match="otel_endpoint"):
        ServerConfig(otel_endpoint="collector:4317").validate()


async def test_spans_reach_a_real_otlp_receiver_and_a_dead_one_holds_nothing_up() -> None:
    clock = ManualClock(start=1.0)
    async with otlp_receiver() as receiver:
        tracing = Tracing(receiver.url, clock)
        trace = tracing.call("c4", "webrtc")
        trace.turn_ended(TurnEvent("assistant", "end", 1), {"end_of_turn": 0.5,
                                                             "first_audio_out": 0.8})
        trace.end("hangup")
        await asyncio.to_thread(tracing.close)  # sends what is queued
        assert {s.name for s in receiver.spans} == {"call", "turn", "first_sound_out"}
        call = receiver.named("call")[0]
        assert call.resource["service.name"] == "omnicall"
        assert call.attributes["omnicall.call_id"] == "c4"
        assert {s.trace_id for s in receiver.spans} == {call.trace_id}
        dead_url = receiver.url
    # the receiver is gone: making spans stays instant, closing is bounded by the timeout
    tracing = Tracing(dead_url, clock)
    loop = asyncio.get_running_loop()
    started = loop.time()
    for n in range(50):
        tracing.call(f"gone-{n}", "webrtc").end("hangup")
    assert loop.time() - started < 1.0
    await asyncio.wait_for(asyncio.to_thread(tracing.close), timeout=30)


async def test_a_real_call_is_traced_end_to_end() -> None:
    async with otlp_receiver() as receiver:
        config = ServerConfig(engine="cascade", ice_loopback=True, otel_endpoint=receiver.url)
        async with running_server(config) as (url, app):
            assert app[TRACING_KEY] is not None
            messages = await ask(url, "What is the capital of France?")
            await receiver.wait_for(lambda spans: any(s.name == "call" for s in spans))
    turn_end = next(m for m in messages if m["type"] == "turn" and m["role"] == "assistant"
                    and m["phase"] == "end")
    call = receiver.named("call")[0]
    (turn,) = [s for s in receiver.named("turn")
               if s.attributes["omnicall.turn_id"] == turn_end["turn"]]
    assert turn.parent_id == call.span_id and turn.trace_id == call.trace_id
    assert call.attributes["omnicall.kind"] == "webrtc"
    assert call.attributes["omnicall.engine"] == "cascade"
    assert call.attributes["omnicall.close_reason"] == "hangup"
    assert turn.attributes["omnicall.call_id"] == call.attributes["omnicall.call_id"]
    stages = [name for name, _, _ in turn.events]
    for stage in ("speech_end", "end_of_turn", "asr_done", "llm_first_token",
                  "llm_first_clause", "first_audio_out"):
        assert stage in stages, stages
    times = dict((name, at) for name, at, _ in turn.events)
    assert times["speech_end"] <= times["end_of_turn"] <= times["first_audio_out"]
    children = {s.name: s for s in receiver.spans if s.parent_id == turn.span_id}
    assert {"end_of_speech", "asr", "first_token", "first_sound_out"} <= set(children)
    assert turn.start_ns <= children["first_sound_out"].end_ns <= turn.end_ns
    assert call.start_ns <= turn.start_ns and turn.end_ns <= call.end_ns


async def test_a_realtime_connection_in_serve_engine_is_traced() -> None:
    """serve-engine, a process of its own started with --otel-endpoint: one trace per
    Realtime connection, a turn span per reply, sent before the process exits."""
    async with otlp_receiver() as receiver:
        server = await start_process("serve-engine", "--engine", "cascade",
                                     "--otel-endpoint", receiver.url)
        try:
            speech = piper_speech("What is the capital of France?", rate=24_000, tail_s=0.3)
            async with ClientSession() as http, http.ws_connect(server.ws_url) as ws:
                await ws.send_str(rt.dump(rt.session_update(instructions=None,
                                                            server_vad=False)))
                for start in range(0, len(speech), 4800):
                    await ws.send_str(rt.dump(rt.audio_append(speech[start:start + 4800])))
                await ws.send_str(rt.dump(rt.commit()))
                await ws.send_str(rt.dump(rt.response_create()))
                async with asyncio.timeout(60):
                    async for message in ws:
                        if json.loads(message.data)["type"] == "response.done":
                            break
        finally:
            assert await server.stop() == 0  # its last spans leave as it shuts down
        await receiver.wait_for(lambda spans: any(s.name == "call" for s in spans))
    (call,) = receiver.named("call")
    assert call.attributes["omnicall.kind"] == "realtime"
    assert call.attributes["omnicall.engine"] == "cascade"
    assert call.attributes["omnicall.turns"] >= 1
    (turn,) = [t for t in receiver.named("turn") if t.parent_id == call.span_id]
    assert {"asr_done", "llm_first_token"} <= {name for name, _, _ in turn.events}


async def test_nothing_is_traced_without_an_endpoint() -> None:
    async with running_server(ServerConfig(engine="loopback")) as (_url, app):
        assert app[TRACING_KEY] is None
        assert not [t for t in threading.enumerate() if "OtelBatchSpanProcessor" in t.name]
