"""The engine interface every backend implements (echo, CPU cascade, Qwen3-Omni, remote).

A call opens one :class:`EngineSession`. The media plane pushes aligned 80 ms
:class:`~omnicall.media.aligner.MediaUnit` s into it (never blocking: ``push`` returns ``False``
when the session's bounded input queue is full, which is the back-pressure signal to ingest) and
reads
:data:`EngineEvent` s out of ``events()``: user transcript (partial/final), assistant text
deltas, assistant audio frames (24 kHz for Thinker-Talker engines), turn start/end, errors and
per-stage timestamps. ``interrupt()`` is the control path for barge-in/stop: it bypasses the
data queues, cancels the reply and flushes what was queued.

Model work never runs on the event loop: backends use :class:`omnicall.engine.worker.ModelWorker`.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from omnicall.engine.degrade import Level
from omnicall.engine.tasks import TaskOwner
from omnicall.media.aligner import MediaUnit
from omnicall.media.resample import Int16Array

if TYPE_CHECKING:
    from omnicall.engine.tools import ToolRunner
    from omnicall.media.playout import Playout

logger = logging.getLogger(__name__)

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


@dataclass(frozen=True, slots=True)
class EngineError:
    message: str
    recoverable: bool = True


EngineEvent = (UserTranscript | AssistantText | AssistantAudio | TurnEvent | StageTiming
               | ToolCall | CameraSeen | EngineError)


@dataclass(frozen=True, slots=True)
class SessionOptions:
    video_fps: float = 2.0
    video_size: tuple[int, int] = (448, 336)
    input_queue_frames: int = 25  # 2 s of 80 ms units
    event_queue_size: int = 256
    #: the conversation so far ((role, text), oldest first): a call resumed on another
    #: worker or machine goes on from it
    history: tuple[tuple[str, str], ...] = ()
    #: where the assistant's tool calls go (``--tools``); None: no tools
    tools: ToolRunner | None = None
    #: what of each reply (by turn_id) left for the caller, measured by the media plane
    #: (:mod:`omnicall.media.playout`); None: no local playout (serve-engine, tests)
    playout: Playout | None = None


class UnsupportedControl(RuntimeError):
    """This engine cannot do what was asked (the message says what)."""


class EngineSession(abc.ABC):
    """Per-call model state lives in the session object (a dataclass field or similar).

    Besides media in and events out, a session may be driven by its client (the Realtime
    protocol's controls, typed messages): engines that cannot do one of these raise
    :class:`UnsupportedControl`."""

    session_id: str

    def add_message(self, role: Role, text: str) -> None:
        """Put a message into the conversation without answering it (replayed history)."""
        raise UnsupportedControl(f"{type(self).__name__} keeps no conversation")

    def send_text(self, text: str) -> None:
        """The user typed ``text``: answer it like a spoken turn."""
        raise UnsupportedControl(f"{type(self).__name__} does not take typed messages")

    def set_turn_detection(self, automatic: bool) -> None:
        """``False``: the client ends user turns (:meth:`commit_input`) and asks for replies
        (:meth:`respond`); ``True`` (default): the engine's own turn detector does both."""
        if not automatic:
            raise UnsupportedControl(f"{type(self).__name__} has no manual turn mode")

    def commit_input(self) -> None:
        """Manual turns: the audio since the last commit is one user turn."""
        raise UnsupportedControl(f"{type(self).__name__} has no manual turn mode")

    def respond(self) -> None:
        """Manual turns: answer what was committed (and typed) since the last reply."""
        raise UnsupportedControl(f"{type(self).__name__} has no manual turn mode")

    def set_instructions(self, text: str) -> None:
        """The assistant's persona and instructions for this session (a system prompt).
        Engines without a language model of their own (echo) have nothing to instruct."""
        return None

    def set_tools(self, tools: ToolRunner | None) -> None:
        """The tools this session's assistant may call (replaces the session's options)."""
        if tools is not None and tools.specs():
            raise UnsupportedControl(f"{type(self).__name__} cannot call tools")

    def truncate_reply(self, played_ms: int) -> None:
        """The client heard only the first ``played_ms`` of the last reply: remember only
        that part of it. Engines that keep no conversation have nothing to cut."""
        return None

    @abc.abstractmethod
    def push(self, unit: MediaUnit) -> bool:
        """Offer one aligned unit; ``False`` means full (keep it and retry later)."""

    @abc.abstractmethod
    def interrupt(self) -> None:
        """Barge-in / stop: cancel the current reply and flush queued output, at once."""

    @abc.abstractmethod
    def events(self) -> AsyncIterator[EngineEvent]:
        """The session's events, in order, until it is closed."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release everything the session holds; idempotent."""


class Engine(abc.ABC):
    name: str = "engine"
    #: True when output audio is paced by input (echo, full-duplex models); False when
    #: replies are generated ahead of playback (cascade, Thinker-Talker) and buffered.
    realtime_output: bool = False
    level: Level = Level.NORMAL

    @abc.abstractmethod
    async def start(self) -> None:
        """Load and warm up; called once before the first call is accepted."""

    @abc.abstractmethod
    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession: ...

    def set_level(self, level: Level) -> None:
        """Degrade ladder: how new turns are answered (see :mod:`omnicall.engine.degrade`).
        Engines with nothing lighter to offer keep answering as they are."""
        self.level = level

    def admission_problem(self, active_sessions: int) -> str | None:
        """Why one more call would not be served well right now (None: admit it)."""
        return None

    def queue_depths(self) -> dict[str, int]:
        """Model jobs waiting or running, per worker (for metrics)."""
        return {}

    @abc.abstractmethod
    async def close(self) -> None: ...


class _Closed:
    """End-of-events marker."""


_CLOSED = _Closed()


@dataclass
class QueuedSessionState:
    """Bounded queues shared by queue-driven sessions."""

    inputs: asyncio.Queue[MediaUnit]
    events: asyncio.Queue[EngineEvent | _Closed]
    turn_id: int = 0
    closed: bool = False
    dropped_events: int = field(default=0)


class QueuedEngineSession(EngineSession):
    """Base for sessions driven by one processing task.

    Overflow policies: inputs - refused when full (back-pressure to ingest); events - the
    processing task awaits space (back-pressure to the model), except on interrupt, which
    empties both queues at once.
    """

    def __init__(self, session_id: str, options: SessionOptions) -> None:
        self.session_id = session_id
        self.options = options
        self.state = QueuedSessionState(
            inputs=asyncio.Queue(maxsize=options.input_queue_frames),
            events=asyncio.Queue(maxsize=options.event_queue_size))
        self.tasks = TaskOwner(f"engine-session-{session_id}")
        self.tasks.spawn("process", self._process_guarded())

    def push(self, unit: MediaUnit) -> bool:
        if self.state.closed:
            return True  # swallow: the call is going away
        try:
            self.state.inputs.put_nowait(unit)
        except asyncio.QueueFull:
            return False
        return True

    async def emit(self, event: EngineEvent) -> None:
        await self.state.events.put(event)

    def flush_queues(self) -> int:
        """Drop queued inputs and undelivered events; returns how many events were dropped."""
        while not self.state.inputs.empty():
            self.state.inputs.get_nowait()
        return self.flush_events()

    def flush_events(self) -> int:
        """Drop undelivered events (a cancelled reply's audio); returns how many."""
        dropped = 0
        while not self.state.events.empty():
            self.state.events.get_nowait()
            dropped += 1
        self.state.dropped_events += dropped
        return dropped

    async def events(self) -> AsyncIterator[EngineEvent]:
        while True:
            item = await self.state.events.get()
            if isinstance(item, _Closed):
                return
            yield item

    async def _process_guarded(self) -> None:
        try:
            await self.process()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # whatever broke the loop: logged, reported, call ends cleanly
            logger.exception("engine session %s failed", self.session_id)
            await self.emit(EngineError(f"engine failed: {exc}", recoverable=False))

    @abc.abstractmethod
    async def process(self) -> None:
        """Consume ``state.inputs`` and ``emit`` events until cancelled."""

    async def close(self) -> None:
        if self.state.closed:
            return
        self.state.closed = True
        await self.tasks.close()
        self.flush_queues()
        self.state.events.put_nowait(_CLOSED)
