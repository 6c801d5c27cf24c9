"""Where one call's final transcripts come from: the local Whisper model on the think worker,
or with ``--asr-url`` the transcription server, the local model standing in for a turn the
server failed (an error or its time-out) or while it is down. The page is told once per
outage (an :class:`~omnicall.engine.events.EngineError` the answerer sends), the log says it
once (:class:`~omnicall.engine.cascade.outage.Outage`), and the call goes on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from omnicall.engine.cascade.asr_server import AsrServer, AsrServerError
from omnicall.engine.cascade.outage import Notice

if TYPE_CHECKING:
    from omnicall.engine.cascade.runtime import CascadeRuntime
    from omnicall.media.resample import Int16Array

logger = logging.getLogger(__name__)

FALLBACK_NOTICE = ("the speech recognition server did not answer; the local model hears "
                   "this call until it does")


@dataclass(frozen=True)
class Heard:
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

    async def final(self, samples: Int16Array) -> Heard:
        """The words of a turn's audio (cleaned 16 kHz mono); raises
        :class:`~omnicall.engine.worker.WorkerBusy` when the local model's queue is full."""
        server, clock = self.server, self.runtime.clock
        if server is not None and server.outage.usable(clock.now()):
            started_at = clock.now()
            try:
                text, language = await server.transcribe(samples)
            except AsrServerError as exc:
                logger.info("session %s: the ASR server failed a turn (%s); the local model "
                            "hears it", self.session_id, exc)
            else:
                self.by_server += 1
                return Heard(text, language or self._setting_language(), started_at,
                             server.name)
        heard = await self._local(samples)
        if server is None:
            return heard
        self.by_fallback += 1
        notice = FALLBACK_NOTICE if self._notice is not None and self._notice.due() else ""
        return Heard(heard.text, heard.language, heard.started_at, heard.model, notice)

    async def _local(self, samples: Int16Array) -> Heard:
        asr, clock = self.runtime.asr, self.runtime.clock

        def transcribe(audio: Int16Array) -> tuple[float, tuple[str, str]]:  # think thread
            return clock.now(), asr.transcribe_turn(audio)

        started_at, (text, language) = await self.runtime.think_worker.run(
            transcribe, samples, session=self.session_id)
        return Heard(text, language, started_at, getattr(asr, "name", "whisper"))

    def _setting_language(self) -> str:
        language = self.runtime.settings.language
        return "" if language == "auto" else language
