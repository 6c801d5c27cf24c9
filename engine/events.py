"""What an engine session says: the :data:`EngineEvent` s that come out of
:meth:`~omnicall.engine.base.EngineSession.events` - user transcript (partial/final), assistant
text deltas, assistant audio frames (24 kHz for Thinker-Talker engines), turn start/end, tool
calls, camera frames shown to the model, errors and per-stage timestamps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from omnicall.media.resample import Int16Array

Role = Literal["user", "assistant"]


#: one typed message (the page's text box, a Realtime text item); the rest of a longer one
#: is cut, by the app before it reaches an engine and by engines that keep conversations
MAX_TYPED_CHARS = 2000


@dataclass(frozen=True, slots=True)
class UserTranscript:
    text: str
    final: bool
    turn_id: int


@dataclass(frozen=True, slots=True)
class AssistantText:
    delta: str
    turn_id: int


@dataclass(frozen=True, slots=True)
class AssistantAudio:
    samples: Int16Array  # mono int16
    rate_hz: int
    pts: int  # in 1/rate_hz, from the start of the reply
    turn_id: int


@dataclass(frozen=True, slots=True)
class TurnEvent:
    role: Role
    phase: Literal["start", "end"]
    turn_id: int
    interrupted: bool = False
    #: an assistant turn's end: milliseconds of the reply's sound the caller heard, which is
    #: what the engine kept of it (its memory, the server's truncation); None where unknown
    heard_ms: int | None = None


@dataclass(frozen=True, slots=True)
class StageTiming:
    """``stage`` happened at ``at_s`` on the session's monotonic clock."""

    turn_id: int
    stage: str
    at_s: float


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The assistant called a tool during reply ``turn_id`` (emitted when it returned)."""

    turn_id: int
    call_id: str
    name: str
    arguments: dict[str, Any]
    output: str
    error: str  # '' when it succeeded; else what went wrong (the user heard an apology)
    ms: float


@dataclass(frozen=True, slots=True)
class CameraSeen:
    """A camera frame went to the model in turn ``turn_id``: the page shows ``thumb_jpeg``
    (a small JPEG of what the model was shown) for a moment. Never logged, never stored."""

    turn_id: int
    image_id: int
    thumb_jpeg: bytes
    sharp: bool = False  # sent at the sharp size (the words asked to look)
    #: without a model that sees: the facts about this frame the reply was given (colours,
    #: people, text read, what changed), as said; never logged, never stored
    facts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EngineError:
    message: str
    recoverable: bool = True


EngineEvent = (UserTranscript | AssistantText | AssistantAudio | TurnEvent | StageTiming
               | ToolCall | CameraSeen | EngineError)
