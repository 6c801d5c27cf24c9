"""The cascade's Talker: a reply's clauses spoken as they come. Each clause goes through the
voice on the talk worker piece by piece (the voice streams), is resampled to 24 kHz, has its
leading silence trimmed (the reply's first sound only) and its tail shortened, and leaves as
80 ms frames through the reply's gate, while the LLM waits for the cores."""

from __future__ import annotations

import asyncio

import numpy as np

from omnicall.engine.base import AssistantAudio, StageTiming
from omnicall.engine.cascade.reply import Reply
from omnicall.engine.cascade.tts import SilenceTrimmer, Tts
from omnicall.engine.worker import ModelWorker
from omnicall.media.clock import Clock
from omnicall.media.resample import AudioConverter, Int16Array
from omnicall.media.timebase import OUTPUT_FRAME_SAMPLES, OUTPUT_RATE_HZ

CLAUSE_TAIL_MS = 150.0  # silence kept after each synthesized clause


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

    async def speak(self, reply: Reply, voice: Tts | None,
                    clauses: asyncio.Queue[str | None]) -> None:
        """Speak each clause of ``clauses`` (None ends them) with ``voice``, noting in
        ``reply.clause_audio`` where its sound lies; ``voice`` None: text first (the
        captions carry the answer), the clauses are only drained."""
        if voice is None:
            while await clauses.get() is not None:
                pass
            return
        converter = AudioConverter(OUTPUT_RATE_HZ)
        frames = FrameCutter(reply.turn_id)
        while (clause := await clauses.get()) is not None:
            first = not reply.clause_audio
            if first:
                await reply.out(StageTiming(reply.turn_id, "llm_first_clause",
                                            self.clock.now()))
            # the reply's first sound is what the user waits for: no leading silence; and
            # clauses join with a short pause instead of the voice's ~200 ms tail
            trimmer = SilenceTrimmer(OUTPUT_RATE_HZ, lead=first, tail_keep_ms=CLAUSE_TAIL_MS)
            pieces = iter(voice.synthesize(clause))
            start_s = reply.audio_s
            reply.clause_audio.append((clause, start_s, 0.0))  # its length grows as it goes
            reply.llm_may_run.clear()
            try:
                while True:  # the voice's pieces go out as they come (the Talker streams)
                    piece = await self.worker.run(next, pieces, None, session=self.session_id)
                    if piece is None:
                        audio = np.concatenate([trimmer.feed(converter.flush()), trimmer.end()])
                    else:
                        audio = trimmer.feed(converter.convert_array(*piece))
                    for frame in frames.cut(audio, last=piece is None):
                        reply.audio_s += len(frame.samples) / OUTPUT_RATE_HZ
                        await reply.out(frame)
                        if frame.pts == 0:  # the reply's first sound went out
                            await reply.out(StageTiming(reply.turn_id, "tts_first_chunk",
                                                        self.clock.now()))
                    reply.clause_audio[-1] = (clause, start_s, reply.audio_s - start_s)
                    if piece is None:
                        break
            finally:
                reply.llm_may_run.set()
