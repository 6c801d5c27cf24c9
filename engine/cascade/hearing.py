"""Where one call's words come from: the local Whisper model on the think worker, or with
``--asr-url`` the transcription server - the turns' final transcripts, and the words of the
caller's sound over a reply that interruptions by meaning go by (a backchannel is one
whichever model heard it) - the local models standing in for a request the server failed
(an error or its time-out) or while it is down. The page is told once per
outage (an :class:`~omnicall.engine.events.EngineError` the answerer sends), the log says it
once (:class:`~omnicall.engine.cascade.servers.outage.Outage`), and the call goes on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from omnicall.engine.cascade.servers.asr_server import AsrServer, AsrServerError
from omnicall.engine.cascade.servers.outage import Notice
from omnicall.engine.conversation.backchannels import Heard
from omnicall.engine.scheduler import Priority
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


class Hearing:
    """The final transcripts of one call (``runtime``: its engine's)."""

    def __init__(self, runtime: CascadeRuntime, session_id: str) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.server: AsrServer | None = runtime.asr_server
        self._notice = Notice(self.server.outage) if self.server is not None else None
        self.by_server = 0  # turns the server heard
        self.by_fallback = 0  # turns the local model heard for a failed server

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
