"""A base for engine sessions driven by one processing task over bounded queues
(:class:`QueuedEngineSession`): media units in, :data:`~omnicall.engine.events.EngineEvent` s
out, both flushed at once on interrupt."""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from omnicall.engine.base import EngineSession, SessionOptions
from omnicall.engine.events import EngineError, EngineEvent
from omnicall.engine.tasks import TaskOwner
from omnicall.media.aligner import MediaUnit
from omnicall.media.log_context import for_call
from omnicall.media.resample import Int16Array

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AudioAhead:
    """The audio of unit ``index`` from ``offset`` in it, queued before the unit
    (:meth:`EngineSession.listen_ahead`)."""

    index: int
    offset: int
    samples: Int16Array


class _Closed:
    """End-of-events marker."""


_CLOSED = _Closed()


@dataclass
class QueuedSessionState:
    """Bounded queues shared by queue-driven sessions."""

    inputs: asyncio.Queue[MediaUnit | AudioAhead]
    events: asyncio.Queue[EngineEvent | _Closed]
    turn_id: int = 0
    closed: bool = False


class QueuedEngineSession(EngineSession):
    """Base for sessions driven by one processing task.

    Overflow policies: inputs - refused when full (back-pressure to ingest), and the audio
    of a unit still being formed taken only into an empty queue (else dropped: the unit
    carries it, and a session that is behind gains nothing from it); events - the
    processing task awaits space (back-pressure to the model), except on interrupt, which
    empties both queues at once.
    """

    def __init__(self, session_id: str, options: SessionOptions) -> None:
        for_call(session_id)  # its tasks and model jobs log under its id (media/log_context)
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

    @property
    def hears_ahead(self) -> bool:
        """Whether :meth:`hear_ahead` uses the audio of units still being formed."""
        return False

    def listen_ahead(self, index: int, offset: int, samples: Int16Array) -> None:
        if self.hears_ahead and not self.state.closed and self.state.inputs.empty():
            self.state.inputs.put_nowait(AudioAhead(index, offset, samples))

    async def next_unit(self) -> MediaUnit:
        """The next unit in; the audio of one still being formed that comes before it goes
        to :meth:`hear_ahead` on the way, while the session :attr:`hears_ahead` (it may
        have stopped since it was queued: a client took over its turns)."""
        while True:
            item = await self.state.inputs.get()
            if isinstance(item, MediaUnit):
                return item
            if self.hears_ahead:
                await self.hear_ahead(item)

    def next_unit_now(self) -> MediaUnit | None:
        """The next unit already queued (None: none); queued audio ahead of it is dropped."""
        while not self.state.inputs.empty():
            item = self.state.inputs.get_nowait()
            if isinstance(item, MediaUnit):
                return item
        return None

    async def hear_ahead(self, ahead: AudioAhead) -> None:
        """The audio of a unit still being formed (only given while :attr:`hears_ahead`)."""
        return None

    async def emit(self, event: EngineEvent) -> None:
        await self.state.events.put(event)

    def flush_queues(self) -> int:
        """Drop queued inputs and undelivered events; returns how many events were dropped."""
        while not self.state.inputs.empty():
            self.state.inputs.get_nowait()
        return self.flush_events()

    def put_now(self, event: EngineEvent) -> None:
        """Queue ``event`` at once, without waiting for space (the control path: a cut
        reply's end, right after its undelivered events were flushed); a full queue drops
        its oldest event to make room."""
        if self.state.events.full():
            self.state.events.get_nowait()
        self.state.events.put_nowait(event)

    def flush_events(self) -> int:
        """Drop undelivered events (a cancelled reply's audio); returns how many."""
        dropped = 0
        while not self.state.events.empty():
            self.state.events.get_nowait()
            dropped += 1
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
            logger.exception("engine session failed")
            await self.emit(EngineError(f"engine failed: {exc}", recoverable=False))

    @abc.abstractmethod
    async def process(self) -> None:
        """Consume the inputs (:meth:`next_unit`) and ``emit`` events until cancelled."""

    async def close(self) -> None:
        if self.state.closed:
            return
        self.state.closed = True
        await self.tasks.close()
        self.flush_queues()
        self.state.events.put_nowait(_CLOSED)
