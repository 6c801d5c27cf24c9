"""Traces of every call and turn, in OpenTelemetry, exported over OTLP/HTTP (``--otel-endpoint``).

One trace per call (a WebRTC call, or a Realtime connection): a ``call`` span from the call's
start to its end, and under it one ``turn`` span per assistant reply, from the first stage the
engine reported (the caller's speech starting, usually) to the reply's end, played out or cut.
A turn's span holds:

- an event per stage, at the time the engine booked it (``speech_end``, ``end_of_turn``,
  ``asr_done``, ``llm_first_token``, ``llm_first_clause``, ``tts_first_chunk``,
  ``first_audio_out``, ...), with the milliseconds since the turn's start as an attribute too;
- a child span per stretch between two stages, named for the wait it is (:data:`STRETCHES`:
  ``end_of_speech`` is the end-of-turn hangover, ``asr``, ``look``, ``first_token``,
  ``first_clause``, ``tts``, ``first_sound_out``), where both ends were reported;
- a ``tool <name>`` child span per tool call, with its outcome;
- a ``barge_in`` event and ``omnicall.interrupted`` when the caller cut the reply, and how
  much of it was heard.

Spans carry ``omnicall.call_id`` and ``omnicall.turn_id``; nobody's words are put in a trace
(lengths only). The times are the engine's stage times on the session's monotonic clock,
turned into wall time once, when the call's trace starts.

The spans leave through the SDK's batch processor: its queue is bounded
(:data:`MAX_QUEUED_SPANS`; when it is full, new spans are dropped and the SDK logs it) and a
worker thread of its own exports them, so a slow or dead receiver never holds a call up.
Without ``--otel-endpoint`` nothing here runs: no provider, no spans, no thread.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanProcessor
from opentelemetry.trace import Span, Status, StatusCode, Tracer, set_span_in_context

from omnicall.engine.events import EngineEvent, ToolCall, TurnEvent, UserTranscript
from omnicall.media.clock import Clock

logger = logging.getLogger(__name__)

SERVICE_NAME = "omnicall"
TRACES_PATH = "/v1/traces"  # OTLP/HTTP's path for traces under the receiver's base URL
MAX_QUEUED_SPANS = 4096  # the batch processor's queue: beyond this, new spans are dropped
EXPORT_EVERY_MS = 1000  # how often the batch processor sends what it holds
EXPORT_TIMEOUT_S = 5.0  # one export (POST) to the receiver
MAX_TOOL_CALLS_KEPT = 16  # tool calls of one turn kept until its span is written
MAX_OPEN_TURNS = 16  # turns whose tool calls and words' length are kept until they end

#: child spans of a turn: (name, from stages, to stage); a stretch starts at the first of
#: its "from" stages that was reported in the turn, and is written when its end was reported
#: too and is not before its start (a speculative reply's first token can come before the
#: end of the turn: its ASR's end is where its wait began)
STRETCHES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("end_of_speech", ("speech_end",), "end_of_turn"),  # the end-of-turn hangover
    ("asr", ("asr_start",), "asr_done"),
    ("look", ("look_start",), "look_done"),
    ("first_token", ("asr_done", "end_of_turn"), "llm_first_token"),
    ("first_clause", ("llm_first_token",), "llm_first_clause"),
    ("tts", ("llm_first_clause",), "tts_first_chunk"),
    ("first_sound_out", ("end_of_turn",), "first_audio_out"),
)

AttributeValue = str | bool | int | float


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for ``endpoint``: a receiver's base URL
    (``http://collector:4318``) gets ``/v1/traces``; a URL that already ends with it is
    kept."""
    url = endpoint.rstrip("/")
    return url if url.endswith(TRACES_PATH) else url + TRACES_PATH


def resource(service_name: str = SERVICE_NAME) -> Resource:
    """The resource spans are reported from; ``OTEL_SERVICE_NAME`` and
    ``OTEL_RESOURCE_ATTRIBUTES`` (the SDK's own variables) still apply."""
    if os.environ.get("OTEL_SERVICE_NAME"):
        return Resource.create()
    return Resource.create({"service.name": service_name})


class Tracing:
    """The server's tracer: a provider whose spans go to ``processor`` (default: batched
    to an OTLP/HTTP receiver at ``endpoint``). One per server process; :meth:`call` starts
    a call's trace; :meth:`close` sends what is left and stops the export thread."""

    def __init__(self, endpoint: str, clock: Clock, *,
                 processor: SpanProcessor | None = None,
                 attributes: Mapping[str, AttributeValue] = MappingProxyType({})) -> None:
        self.endpoint = traces_url(endpoint)
        self.clock = clock
        self.attributes = dict(attributes)  # on every call span (engine, worker)
        self.provider = TracerProvider(resource=resource())
        self.provider.add_span_processor(processor or batch_processor(
            OTLPSpanExporter(endpoint=self.endpoint, timeout=EXPORT_TIMEOUT_S)))
        self.tracer: Tracer = self.provider.get_tracer("omnicall")

    def call(self, call_id: str, kind: str,
             attributes: Mapping[str, AttributeValue] = MappingProxyType({})) -> CallTrace:
        """Start the trace of call ``call_id`` (``kind``: 'webrtc' or 'realtime')."""
        return CallTrace(self.tracer, call_id, self.clock,
                         {"omnicall.kind": kind, **self.attributes, **attributes})

    def close(self) -> None:
        """Export the spans still queued (bounded by the exporter's timeout) and stop.
        Blocking: call it from a worker thread (``asyncio.to_thread``)."""
        self.provider.shutdown()


def batch_processor(exporter: SpanExporter) -> BatchSpanProcessor:
    return BatchSpanProcessor(exporter, max_queue_size=MAX_QUEUED_SPANS,
                              schedule_delay_millis=EXPORT_EVERY_MS,
                              export_timeout_millis=int(EXPORT_TIMEOUT_S * 1000))


class CallTrace:
    """One call's trace: its ``call`` span and, as the call's events come, its turns' spans.

    Synchronous and cheap: spans are built in memory; the provider's processor sends them.
    :meth:`observe` is fed every engine event of the call (the event pump does it) and
    :meth:`turn_ended` every finished assistant turn with its stages."""

    def __init__(self, tracer: Tracer, call_id: str, clock: Clock,
                 attributes: Mapping[str, AttributeValue]) -> None:
        self.tracer = tracer
        self.call_id = call_id
        self.clock = clock
        # stage times are on the session clock: wall time = this + the stage's time
        self._wall_origin_ns = time.time_ns() - round(clock.now() * 1e9)
        self.span: Span = tracer.start_span("call", attributes={
            "omnicall.call_id": call_id, **attributes})
        self._context = set_span_in_context(self.span)
        self._tools: dict[int, list[tuple[ToolCall, float]]] = {}  # with when it returned
        self._user_chars: dict[int, int] = {}
        self.turns = 0
        self.barge_ins = 0
        self.ended = False

    def wall_ns(self, at_s: float) -> int:
        """A time on the session clock as OpenTelemetry's wall-clock nanoseconds."""
        return self._wall_origin_ns + round(at_s * 1e9)

    def observe(self, event: EngineEvent) -> None:
        """What a turn's span needs that is not a stage: its tool calls, the length of what
        the caller said (never the words)."""
        if isinstance(event, ToolCall):
            calls = self._tools.setdefault(event.turn_id, [])
            if len(calls) < MAX_TOOL_CALLS_KEPT:
                calls.append((event, self.clock.now()))
            self._prune(self._tools)
        elif isinstance(event, UserTranscript) and event.final:
            self._user_chars[event.turn_id] = len(event.text)
            self._prune(self._user_chars)

    @staticmethod
    def _prune(table: dict[int, Any]) -> None:
        while len(table) > MAX_OPEN_TURNS:  # turns that never ended
            table.pop(next(iter(table)))

    def turn_ended(self, event: TurnEvent, stages: Mapping[str, float]) -> None:
        """An assistant turn ended (played out or cut): write its span."""
        if self.ended:
            return
        end_s = self.clock.now()
        start_s = min([*stages.values(), end_s])
        attributes: dict[str, AttributeValue] = {
            "omnicall.call_id": self.call_id, "omnicall.turn_id": event.turn_id,
            "omnicall.interrupted": event.interrupted}
        if event.heard_ms is not None:
            attributes["omnicall.heard_ms"] = event.heard_ms
        chars = self._user_chars.pop(event.turn_id, None)
        if chars is not None:
            attributes["omnicall.user_chars"] = chars
        for stage, at_s in stages.items():
            attributes[f"omnicall.stage.{stage}_ms"] = round((at_s - start_s) * 1000, 1)
        turn = self.tracer.start_span("turn", context=self._context,
                                      start_time=self.wall_ns(start_s), attributes=attributes)
        for stage, at_s in sorted(stages.items(), key=lambda item: item[1]):
            turn.add_event(stage, timestamp=self.wall_ns(at_s))
        inside = set_span_in_context(turn)
        ids: dict[str, AttributeValue] = {"omnicall.call_id": self.call_id,
                                          "omnicall.turn_id": event.turn_id}
        for name, starts, last in STRETCHES:
            first = next((stage for stage in starts if stage in stages), None)
            if first is not None and last in stages and stages[last] >= stages[first]:
                self.tracer.start_span(name, context=inside, attributes=ids,
                                       start_time=self.wall_ns(stages[first])
                                       ).end(end_time=self.wall_ns(stages[last]))
        for call, done_s in self._tools.pop(event.turn_id, []):
            self._tool_span(call, done_s, inside, ids)
        if event.interrupted:
            self.barge_ins += 1
            turn.add_event("barge_in", attributes={"omnicall.heard_ms": event.heard_ms or 0},
                           timestamp=self.wall_ns(end_s))
        turn.end(end_time=self.wall_ns(end_s))
        self.turns += 1

    def _tool_span(self, call: ToolCall, done_s: float, inside: Context,
                   ids: Mapping[str, AttributeValue]) -> None:
        # the ToolCall event comes when the tool returned: it started ``ms`` before
        span = self.tracer.start_span(
            f"tool {call.name}", context=inside,
            start_time=self.wall_ns(done_s - call.ms / 1000),
            attributes={**ids, "omnicall.tool.name": call.name,
                        "omnicall.tool.call_id": call.call_id,
                        "omnicall.tool.ok": not call.error})
        if call.error:
            span.set_status(Status(StatusCode.ERROR, call.error[:200]))
        span.end(end_time=self.wall_ns(done_s))

    def end(self, reason: str) -> None:
        """The call ended (``reason``: hangup, timeout, shutdown, ...): its span closes."""
        if self.ended:
            return
        self.ended = True
        self.span.set_attributes({"omnicall.close_reason": reason, "omnicall.turns": self.turns,
                                  "omnicall.barge_ins": self.barge_ins})
        self.span.end(end_time=self.wall_ns(self.clock.now()))
        self._tools.clear()
        self._user_chars.clear()
