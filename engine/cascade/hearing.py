"""Where one call's words come from: the local Whisper model on the think worker, or with
``--asr-url`` the transcription server - the turns' final transcripts, and the words of the
caller's sound over a reply that interruptions by meaning go by (a backchannel is one
whichever model heard it) - the local models standing in for a request the server failed
(an error or its time-out) or while it is down. The page is told once per
outage (an :class:`~omnicall.engine.events.EngineError` the answerer sends), the log says it
once (:class:`~omnicall.engine.cascade.servers.outage.Outage`), and the call goes on.

A turn's final transcript starts at its speech's first silent VAD chunk (the listener's
``on_lull``: :meth:`Hearing.start_early`), not at the pause 64 ms later that starts the
speculative reply: the reply takes it there (:meth:`Hearing.take_early`), its ASR already
under way. The audio it hears ends 32-52 ms into the VAD's silence instead of 96-116, and the
session adds the missing 64 ms as digital silence (``bench/lull_asr.py``: no more word errors
than at the pause, clean and in noise: docs/benchmarks.md).
Speech that goes on past a lull costs that one transcript (the next lull replaces it: one
at a time, a queued one is never run; with ``--asr-url`` a request, cancelled). A dropped
transcript that carried the page's outage notice leaves it to the next one.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from omnicall.engine.cascade.servers.asr_server import AsrServer, AsrServerError
from omnicall.engine.cascade.servers.outage import Notice
from omnicall.engine.conversation.backchannels import Heard
from omnicall.engine.scheduler import Priority
from omnicall.engine.tasks import TaskOwner
from omnicall.engine.worker import WorkerBusy

if TYPE_CHECKING:
    from omnicall.engine.cascade.runtime import CascadeRuntime
    from omnicall.media.resample import Int16Array

logger = logging.getLogger(__name__)

FALLBACK_NOTICE = ("the speech recognition server did not answer; the local model hears "
                   "this call until it does")


@dataclass(frozen=True)
class FinalTranscript:
    """A turn's final transcript: its words, their language ('' unknown), when the model
    started on them (the engine's clock), which model heard them, and the line for the page
    when a server failure was first met in this call ('' none)."""

    text: str
    language: str
    started_at: float
    model: str
    notice: str = ""


@dataclass(frozen=True)
class EarlyTranscript:
    """A turn's final transcript started at a lull of its speech (see the module doc)."""

    turn_id: int
    task: asyncio.Task[FinalTranscript]


class Hearing:
    """The final transcripts of one call (``runtime``: its engine's; ``tasks``: the call's,
    which the transcripts started early run in)."""

    def __init__(self, runtime: CascadeRuntime, session_id: str, tasks: TaskOwner) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.tasks = tasks
        self.server: AsrServer | None = runtime.asr_server
        self._notice = Notice(self.server.outage) if self.server is not None else None
        self.by_server = 0  # turns the server heard
        self.by_fallback = 0  # turns the local model heard for a failed server
        self._early: EarlyTranscript | None = None
        self.early_taken = 0  # pauses whose reply took the transcript started at their lull
        self.early_dropped = 0  # transcripts started at a lull the speech went on past

    def start_early(self, samples: Int16Array, turn_id: int) -> None:
        """The speech of turn ``turn_id`` went silent (a lull): its final transcript, of
        ``samples`` (the turn's audio so far), starts now; one started at an earlier lull is
        dropped (the speech went on past it)."""
        self.drop_early()
        self._early = EarlyTranscript(turn_id, self.tasks.spawn(
            f"early-asr-{turn_id}", self.final(samples)))

    def take_early(self, turn_id: int) -> asyncio.Task[FinalTranscript] | None:
        """At a pause of turn ``turn_id``: the transcript started at its silence's lull, for
        the speculative reply to await (None: none started for this turn)."""
        early = self._early
        if early is None or early.turn_id != turn_id:
            self.drop_early()
            return None
        self._early = None
        self.early_taken += 1
        return early.task

    def drop_early(self) -> None:
        """No pause will take the transcript started at the last lull (the speech went on, or
        the turn ended or restarted): a queued one never runs, a running one is let go."""
        early, self._early = self._early, None
        if early is not None:
            self._drop(early)

    def _drop(self, early: EarlyTranscript) -> None:
        task = early.task
        if not task.done():
            task.cancel()
        elif not task.cancelled() and task.exception() is None and task.result().notice \
                and self._notice is not None:
            self._notice.retract()  # the page was not told: the next transcript tells it
        self.early_dropped += 1

    async def final(self, samples: Int16Array) -> FinalTranscript:
        """The words of a turn's audio (cleaned 16 kHz mono); raises
        :class:`~omnicall.engine.worker.WorkerBusy` when the local model's queue is full."""
        server, clock = self.server, self.runtime.clock
        if server is not None and server.outage.usable(clock.now()):
            started_at = clock.now()
            try:
                text, language = await server.transcribe(samples)
            except AsrServerError as exc:
                logger.info("the ASR server failed a turn (%s); the local model "
                            "hears it", exc)
            else:
                self.by_server += 1
                return FinalTranscript(text, language or self._setting_language(), started_at,
                             server.name)
        heard = await self._local(samples)
        if server is None:
            return heard
        self.by_fallback += 1
        notice = FALLBACK_NOTICE if self._notice is not None and self._notice.due() else ""
        return FinalTranscript(heard.text, heard.language, heard.started_at, heard.model, notice)

    async def _local(self, samples: Int16Array) -> FinalTranscript:
        asr, clock = self.runtime.asr, self.runtime.clock

        def transcribe(audio: Int16Array) -> tuple[float, tuple[str, str]]:  # think thread
            return clock.now(), asr.transcribe_turn(audio)

        started_at, (text, language) = await self.runtime.think_worker.run(
            transcribe, samples, session=self.session_id)
        return FinalTranscript(text, language, started_at, getattr(asr, "name", "whisper"))

    async def words(self, samples: Int16Array) -> Heard | None:
        """The words of the caller's sound over a reply and how sure the ASR is of them
        (interruptions by meaning): from the server, else from the partial transcripts'
        model ahead of optional work; None when that model is busy (the sound interrupts)."""
        server = self.server
        if server is not None and server.outage.usable(self.runtime.clock.now()):
            try:
                text, logprob = await server.hear(samples)
            except AsrServerError as exc:
                logger.info("the ASR server failed to hear an interruption (%s); "
                            "the local model hears it", exc)
            else:
                return Heard(text, logprob)
        partial = self.runtime.partial
        try:
            text, logprob = await partial.worker.run(partial.asr.hear, samples,
                                                     session=self.session_id,
                                                     priority=Priority.LISTEN)
        except WorkerBusy:
            return None
        return Heard(text, logprob)

    def _setting_language(self) -> str:
        language = self.runtime.settings.language
        return "" if language == "auto" else language
