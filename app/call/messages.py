"""Data-channel protocol: engine events -> JSON messages for the page.

Every message is a JSON object with a ``type``: ``transcript`` (user, partial/final),
``assistant_text`` (delta), ``turn`` (role, phase, interrupted; an assistant turn's end may
add ``heard_ms``: what the caller heard of it, which is what the engine kept), ``timing``
(stage, ms since
the turn's first stage), ``camera`` (a frame went to the model: its small thumbnail as a
``data:image/jpeg`` URL, for the page to show for a moment), ``error`` (message,
recoverable), ``state`` (server-side session state), ``stats`` (periodic media counters).
Audio never goes over the data channel. The ``camera`` thumbnail is the only image that does:
it goes to the caller's own page and nowhere else (never logged, never in a transcript or the
store; serve-engine's clients get nothing of it: :mod:`omnicall.app.realtime.replies`).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from omnicall.engine.events import (
    AssistantAudio,
    AssistantText,
    CameraSeen,
    EngineError,
    EngineEvent,
    StageTiming,
    ToolCall,
    TurnEvent,
    UserTranscript,
)

#: a thumbnail larger than this is not sent (the page's is ~96 px, 2-3 KB; the data channel
#: is for small messages): the ``camera`` message then goes without one
MAX_THUMB_BYTES = 12_000
_JPEG_START = b"\xff\xd8\xff"
#: the camera facts a ``camera`` message carries (the cascade's offline eyes: a handful)
MAX_FACTS = 8
MAX_FACT_CHARS = 300


def camera_message(event: CameraSeen) -> dict[str, Any]:
    """A frame went to the model: its thumbnail (``thumb``: a JPEG data URL, or None when it
    is missing, too large or not a JPEG), whether it went at the sharp size, and the facts
    about it the reply was given (``facts``: words; empty when the model saw the frame)."""
    jpeg = event.thumb_jpeg
    ok = 0 < len(jpeg) <= MAX_THUMB_BYTES and jpeg.startswith(_JPEG_START)
    thumb = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii") if ok else None
    return {"type": "camera", "state": "sent", "turn": event.turn_id, "image": event.image_id,
            "sharp": event.sharp, "thumb": thumb,
            "facts": [fact[:MAX_FACT_CHARS] for fact in event.facts[:MAX_FACTS]]}


def event_message(event: EngineEvent, turn_origin_s: float | None = None) -> dict[str, Any] | None:
    """JSON-ready message for an event, or ``None`` for events that are not sent (audio)."""
    if isinstance(event, UserTranscript):
        return {"type": "transcript", "role": "user", "text": event.text, "final": event.final,
                "turn": event.turn_id}
    if isinstance(event, AssistantText):
        return {"type": "assistant_text", "delta": event.delta, "turn": event.turn_id}
    if isinstance(event, TurnEvent):
        message: dict[str, Any] = {"type": "turn", "role": event.role, "phase": event.phase,
                                   "turn": event.turn_id, "interrupted": event.interrupted}
        if event.heard_ms is not None:
            message["heard_ms"] = event.heard_ms
        return message
    if isinstance(event, StageTiming):
        since = 0.0 if turn_origin_s is None else (event.at_s - turn_origin_s) * 1000
        return {"type": "timing", "stage": event.stage, "ms": round(since, 1),
                "turn": event.turn_id}
    if isinstance(event, ToolCall):
        return {"type": "tool", "turn": event.turn_id, "name": event.name,
                "arguments": event.arguments, "ok": not event.error,
                "output": event.output[:500], "error": event.error[:200],
                "ms": round(event.ms, 1)}
    if isinstance(event, CameraSeen):
        return camera_message(event)
    if isinstance(event, EngineError):
        return {"type": "error", "message": event.message, "recoverable": event.recoverable}
    if isinstance(event, AssistantAudio):
        return None
    raise TypeError(f"unknown engine event {type(event).__name__}")


def encode(message: dict[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"))


MAX_CONTROL_BYTES = 16_384  # control messages are small; a typed message is at most 2,000 chars


def decode_control(text: str | bytes) -> dict[str, Any] | None:
    """Parse a control message from the page; ``None`` when it is not a valid one.

    Any client can send anything here: oversized messages are not parsed at all, and deep
    nesting (``RecursionError`` in the JSON decoder) is just another invalid message."""
    if len(text) > MAX_CONTROL_BYTES:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError included
        return None
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        return None
    return data
