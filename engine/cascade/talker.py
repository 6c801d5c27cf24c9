"""The cascade's Talker: a reply's clauses spoken as they come. Each clause goes through the
voice on the talk worker piece by piece (the voice streams), is resampled to 24 kHz, has its
leading silence trimmed (the reply's first sound only) and its tail shortened, and leaves as
80 ms frames through the reply's gate, while the LLM waits for the cores."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing

import numpy as np

from omnicall.engine.cascade.language_model import SpokenAudio
from omnicall.engine.cascade.reply import CascadeReply
from omnicall.engine.cascade.servers.outage import Notice
from omnicall.engine.cascade.servers.tts_server import ServerVoice, TtsServerError
from omnicall.engine.cascade.tts import SilenceTrimmer, Tts
from omnicall.engine.events import AssistantAudio, EngineError, StageTiming
from omnicall.engine.worker import ModelWorker
from omnicall.media.clock import Clock
from omnicall.media.resample import AudioConverter, Int16Array
from omnicall.media.timebase import OUTPUT_FRAME_SAMPLES, OUTPUT_RATE_HZ

logger = logging.getLogger(__name__)

CLAUSE_TAIL_MS = 150.0  # silence kept after each synthesized clause
#: what the Talker is given: clauses to say, the server's own audio, None at the end
Clauses = asyncio.Queue[str | SpokenAudio | None]
FALLBACK_NOTICE = ("the speech server did not answer; the local voice speaks in this call "
                   "until it does")


class FrameCutter:
    """A reply's audio as 80 ms frames with running pts: the full frames of each piece as it
    arrives, the short remainder at the end of a clause. Pure."""

    def __init__(self, turn_id: int) -> None:
        self.turn_id = turn_id
        self.pts = 0
        self._rest = np.zeros(0, np.int16)

    def cut(self, audio: Int16Array, last: bool) -> list[AssistantAudio]:
        audio = np.concatenate([self._rest, audio]) if len(self._rest) else audio
        whole = len(audio) if last else len(audio) - len(audio) % OUTPUT_FRAME_SAMPLES
        self._rest = audio[whole:]
        frames = []
        for start in range(0, whole, OUTPUT_FRAME_SAMPLES):
            frame = audio[start:min(whole, start + OUTPUT_FRAME_SAMPLES)]
            frames.append(AssistantAudio(frame, OUTPUT_RATE_HZ, self.pts, self.turn_id))
            self.pts += len(frame)
        return frames


class Talker:
    """Speaks the replies of one call on the engine's talk worker."""

    def __init__(self, worker: ModelWorker, clock: Clock, session_id: str) -> None:
        self.worker = worker
        self.clock = clock
        self.session_id = session_id
        self._notices: dict[int, Notice] = {}  # per speech server voice: the page told

    async def speak(self, reply: CascadeReply, voice: Tts | None, clauses: Clauses) -> None:
        """Speak each clause of ``clauses`` (None ends them) with ``voice``, noting in
        ``reply.spans`` where its sound lies, and play the server's own audio pieces
        (``--llm-audio-out``) as they come; ``voice`` None: text first (the captions carry
        the answer), the clauses are only drained."""
        if voice is None:
            while await clauses.get() is not None:
                pass
            return
        converter = AudioConverter(OUTPUT_RATE_HZ)
        frames = FrameCutter(reply.turn_id)
        server = ServerAudio(reply, frames, self.clock)
        while (clause := await clauses.get()) is not None:
            if isinstance(clause, SpokenAudio):
                await server.play(clause)
                continue
            first = not reply.spans
            if first:
                await reply.out(StageTiming(reply.turn_id, "llm_first_clause",
                                            self.clock.now()))
            # the reply's first sound is what the user waits for: no leading silence; and
            # clauses join with a short pause instead of the voice's ~200 ms tail
            trimmer = SilenceTrimmer(OUTPUT_RATE_HZ, lead=first, tail_keep_ms=CLAUSE_TAIL_MS)
            start_s = reply.audio_s
            reply.spans.append((clause, start_s, 0.0))  # its length grows as it goes
            reply.work.llm_may_run.clear()
            # the voice's pieces go out as they come (the Talker streams); a barge-in (this
            # task cancelled) closes them at once: a speech server's response with them
            try:
                async with aclosing(self._pieces(reply, voice, clause)) as pieces:
                    async for piece in pieces:
                        audio = trimmer.feed(converter.convert_array(*piece))
                        await self._out(reply, frames, audio, start_s, last=False)
                await self._out(reply, frames, np.concatenate(
                    [trimmer.feed(converter.flush()), trimmer.end()]), start_s, last=True)
            finally:
                reply.work.llm_may_run.set()
        await server.end()

    async def _out(self, reply: CascadeReply, frames: FrameCutter, audio: Int16Array,
                   start_s: float, last: bool) -> None:
        """A clause's ``audio`` out as frames (``last``: the clause's rest too)."""
        clause = reply.spans[-1][0]
        for frame in frames.cut(audio, last=last):
            reply.audio_s += len(frame.samples) / OUTPUT_RATE_HZ
            await reply.out(frame)
            if frame.pts == 0:  # the reply's first sound went out
                await reply.out(StageTiming(reply.turn_id, "tts_first_chunk", self.clock.now()))
        reply.spans[-1] = (clause, start_s, reply.audio_s - start_s)

    async def _pieces(self, reply: CascadeReply, voice: Tts,
                      clause: str) -> AsyncGenerator[tuple[Int16Array, int]]:
        """The sound of ``clause`` in pieces: from the speech server (``--tts-url``), or the
        local voice on the talk worker - for a server that failed before any of the
        clause's sound came, or while it is down (the page told once per outage)."""
        if isinstance(voice, ServerVoice):
            if voice.outage.usable(self.clock.now()):
                sounded = False
                try:
                    async for piece in voice.stream(clause):
                        sounded = True
                        yield piece
                    return
                except TtsServerError as exc:
                    logger.info("the speech server failed a clause (%s)%s",
                                exc, "" if sounded else "; the local voice "
                                "says it")
                    if sounded:
                        return  # the rest of this clause is lost; the next one is local
            if self._notices.setdefault(id(voice), Notice(voice.outage)).due():
                await reply.out(EngineError(FALLBACK_NOTICE))
            voice = voice.local
        pieces = iter(voice.synthesize(clause))
        while (piece := await self.worker.run(next, pieces, None,
                                              session=self.session_id)) is not None:
            yield piece


class ServerAudio:
    """The server's audio for one reply (``--llm-audio-out``): resampled to 24 kHz and cut
    into the same 80 ms frames; the whole reply's text is laid over the sound made so far
    (what a barge-in keeps is estimated from it, as with the local voice's clauses)."""

    def __init__(self, reply: CascadeReply, frames: FrameCutter, clock: Clock) -> None:
        self.reply = reply
        self.frames = frames
        self.clock = clock
        self.converter: AudioConverter | None = None
        self.rate_hz = 0

    async def play(self, piece: SpokenAudio) -> None:
        reply = self.reply
        if self.converter is None or piece.rate_hz != self.rate_hz:
            self.converter, self.rate_hz = AudioConverter(OUTPUT_RATE_HZ), piece.rate_hz
            if not reply.spans:
                await reply.out(StageTiming(reply.turn_id, "llm_first_clause", self.clock.now()))
        await self._out(self.converter.convert_array(piece.samples, piece.rate_hz), last=False)

    async def end(self) -> None:
        if self.converter is not None:
            await self._out(self.converter.flush(), last=True)

    async def _out(self, audio: Int16Array, last: bool) -> None:
        reply = self.reply
        for frame in self.frames.cut(audio, last):
            reply.audio_s += len(frame.samples) / OUTPUT_RATE_HZ
            await reply.out(frame)
            if frame.pts == 0:
                await reply.out(StageTiming(reply.turn_id, "tts_first_chunk", self.clock.now()))
        reply.spans[:] = [(reply.text, 0.0, reply.audio_s)]
