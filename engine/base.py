"""The engine interface every backend implements (echo, CPU cascade, Qwen3-Omni, remote).

A call opens one :class:`EngineSession`. The media plane pushes aligned 80 ms
:class:`~omnicall.media.aligner.MediaUnit` s into it (never blocking: ``push`` returns ``False``
when the session's bounded input queue is full, which is the back-pressure signal to ingest) and
reads :data:`~omnicall.engine.events.EngineEvent` s out of ``events()``
(:mod:`omnicall.engine.events`). ``interrupt()`` is the control path for barge-in/stop: it
bypasses the data queues, cancels the reply and flushes what was queued. Sessions driven by one
processing task over bounded queues build on :mod:`omnicall.engine.queued_session`.

Model work never runs on the event loop: backends use :class:`omnicall.engine.worker.ModelWorker`.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from omnicall.engine.degrade import Level
from omnicall.engine.events import EngineEvent, Role
from omnicall.media.aligner import MediaUnit
from omnicall.media.resample import Int16Array

if TYPE_CHECKING:
    from omnicall.engine.tools import ToolRunner
    from omnicall.media.playout import Playout


#: what cuts the assistant's reply: any speech over it, or words that are not a backchannel
#: (the conversation layer's listener; a cough, a door or "mm-hmm" leave the reply going)
InterruptBy = Literal["sound", "words"]
#: what cuts a reply, fixed or asked at each decision (a client that did not say its mode:
#: words while its microphone may hear the assistant, sound once it is found not to)
InterruptRule = InterruptBy | Callable[[], InterruptBy]


@dataclass(frozen=True, slots=True)
class SessionOptions:
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
    interrupt_by: InterruptRule = "sound"
    #: who the call's assistant talks to (:mod:`~omnicall.engine.conversation.addressee`):
    #: 'auto' (a wake phrase when the engine has one, else any voice), 'any', 'camera' (the
    #: person facing the camera whose mouth moves), 'wake'
    addressee: str = "auto"


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

    def listen_ahead(self, index: int, offset: int, samples: Int16Array) -> None:
        """The audio of unit ``index`` as it comes, before the unit (which carries it too):
        ``samples`` from ``offset`` in it. A session whose listener can use it sooner (the
        turn's pause and end are decided on 32 ms VAD chunks, not 80 ms units) takes it;
        others ignore it, as may anyone who is behind."""
        return None

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
