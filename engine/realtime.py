"""The OpenAI Realtime protocol (GA event names) as omnicall speaks it, on both sides.

Every event is a model from the ``openai`` package: client events are validated with its
``RealtimeClientEvent`` adapter and server events with ``RealtimeServerEvent`` (no
hand-written schema). Audio on the wire is base64 PCM16, mono, 24 kHz - the only format
vllm-omni accepts - converted here from and to omnicall's media rates.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import secrets
from typing import Any

import numpy as np
from openai.types.realtime import (
    ConversationItemCreateEvent,
    ConversationItemTruncateEvent,
    InputAudioBufferAppendEvent,
    InputAudioBufferCommitEvent,
    RealtimeClientEvent,
    RealtimeServerEvent,
    ResponseCancelEvent,
    ResponseCreateEvent,
    SessionUpdateEvent,
)
from pydantic import BaseModel, TypeAdapter, ValidationError

from omnicall.media.resample import Int16Array

#: the Realtime protocol's PCM16 rate, both ways (the call's own 48 kHz is media's)
REALTIME_RATE_HZ = 24_000
MAX_EVENT_BYTES = 16 * 1024 * 1024  # one WebSocket message: 15 MiB of audio, like vllm-omni

CLIENT_EVENTS: TypeAdapter[RealtimeClientEvent] = TypeAdapter(RealtimeClientEvent)
SERVER_EVENTS: TypeAdapter[RealtimeServerEvent] = TypeAdapter(RealtimeServerEvent)

__all__ = ["CLIENT_EVENTS", "SERVER_EVENTS", "ProtocolError", "ValidationError"]

_ids = itertools.count()


class ProtocolError(ValueError):
    """An event that is not valid Realtime protocol (the message says what)."""


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(6)}{next(_ids):x}"


def dump(event: BaseModel) -> str:
    """JSON text of an event: the fields that were set (an explicit null stays: it turns
    server VAD off), as the SDK sends them."""
    return event.model_dump_json(exclude_unset=True)


def parse_server_event(text: str | bytes) -> RealtimeServerEvent:
    try:
        return SERVER_EVENTS.validate_json(text)
    except ValidationError as exc:
        raise ProtocolError(f"not a Realtime server event: {_first_error(exc)}") from exc


def parse_client_event(text: str | bytes) -> RealtimeClientEvent:
    try:
        return CLIENT_EVENTS.validate_json(text)
    except ValidationError as exc:
        raise ProtocolError(f"not a Realtime client event: {_first_error(exc)}") from exc


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "invalid"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()))[:80]
    return f"{first.get('msg', 'invalid')[:120]} at {where or 'top level'}"


def event_type(text: str | bytes) -> str | None:
    """The ``type`` of a JSON event, if it has one (for error messages)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    value = data.get("type") if isinstance(data, dict) else None
    return value[:64] if isinstance(value, str) else None


# -- audio ------------------------------------------------------------------------------
def encode_pcm16(samples: Int16Array) -> str:
    return base64.b64encode(np.asarray(samples, dtype="<i2").tobytes()).decode("ascii")


def decode_pcm16(data: str) -> Int16Array:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError("audio is not valid base64") from exc
    if len(raw) % 2:
        raise ProtocolError("PCM16 audio must have an even number of bytes")
    return np.frombuffer(raw, dtype="<i2").astype(np.int16)


# -- client events omnicall sends ------------------------------------------------------
def session_update(*, instructions: str | None, server_vad: bool,
                   silence_duration_ms: int | None = None,
                   tools: list[dict[str, Any]] | None = None) -> SessionUpdateEvent:
    audio: dict[str, Any] = {
        "input": {"format": {"type": "audio/pcm", "rate": REALTIME_RATE_HZ},
                  "turn_detection": ({"type": "server_vad", "interrupt_response": True,
                                      "create_response": True,
                                      **({"silence_duration_ms": silence_duration_ms}
                                         if silence_duration_ms else {})}
                                     if server_vad else None)},
        "output": {"format": {"type": "audio/pcm", "rate": REALTIME_RATE_HZ}},
    }
    session: dict[str, Any] = {"type": "realtime", "audio": audio}
    if instructions:
        session["instructions"] = instructions
    if tools:
        session["tools"] = tools
        session["tool_choice"] = "auto"
    return SessionUpdateEvent.model_validate({"type": "session.update", "session": session})


def audio_append(samples: Int16Array) -> InputAudioBufferAppendEvent:
    return InputAudioBufferAppendEvent(type="input_audio_buffer.append",
                                       audio=encode_pcm16(samples))


def commit() -> InputAudioBufferCommitEvent:
    return InputAudioBufferCommitEvent(type="input_audio_buffer.commit")


def response_create() -> ResponseCreateEvent:
    return ResponseCreateEvent(type="response.create")


def response_cancel() -> ResponseCancelEvent:
    return ResponseCancelEvent(type="response.cancel")


def truncate(item_id: str, audio_end_ms: int) -> ConversationItemTruncateEvent:
    return ConversationItemTruncateEvent(type="conversation.item.truncate", item_id=item_id,
                                         content_index=0, audio_end_ms=max(0, audio_end_ms))


def message_item(role: str, text: str) -> ConversationItemCreateEvent:
    """A text message for the conversation (replayed history, typed input)."""
    kind = "output_text" if role == "assistant" else "input_text"
    return ConversationItemCreateEvent.model_validate({
        "type": "conversation.item.create",
        "item": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}})


def function_output_item(call_id: str, output: str) -> ConversationItemCreateEvent:
    """A tool's result, for the model to answer from (then ``response.create``)."""
    return ConversationItemCreateEvent.model_validate({
        "type": "conversation.item.create",
        "item": {"type": "function_call_output", "call_id": call_id, "output": output}})


def image_item(jpeg: bytes) -> ConversationItemCreateEvent:
    url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
    return ConversationItemCreateEvent.model_validate({
        "type": "conversation.item.create",
        "item": {"type": "message", "role": "user",
                 "content": [{"type": "input_image", "image_url": url}]}})
