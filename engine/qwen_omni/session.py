"""One call on the native Qwen3-Omni engine.

Listening is the conversation layer's (:mod:`omnicall.engine.conversation.listener`). While the
user speaks, every second of speech is appended to the call's Thinker cache (audio encoder +
prefill), and each camera frame the shared frame policy picks goes in as a video segment
between the runs of speech (:mod:`omnicall.engine.qwen_omni.frames` says when); at the end of
the turn only the last partial second, the turn's end frame, the closing tokens and
``<|im_start|>assistant`` are left. The reply then streams from :class:`ReplyStream`: caption
deltas as tokens arrive, audio from the first codec frame on. All model operations of a
session (:mod:`omnicall.engine.qwen_omni.prompt`'s) run in order through one session task that
feeds the shared model worker (so an append can never overtake the reply it belongs to).
A reply stays the current turn until its sound has played out; a barge-in (or ``interrupt()``)
before then sets a flag the reply loop checks between steps, the Thinker cache is cut back to
what the caller heard and the assistant message is closed; the reply's end carries those
milliseconds (``TurnEvent.heard_ms``).

What the calls share (the model, its workers, the settings, the clock) comes in one
:class:`~omnicall.engine.qwen_omni.runtime.OmniRuntime`.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from omnicall.engine.base import SessionOptions
from omnicall.engine.conversation.backchannels import Heard
from omnicall.engine.conversation.camera import Sighting, seen_event
from omnicall.engine.conversation.listener import Listener
from omnicall.engine.conversation.replies import Replies, Reply
from omnicall.engine.degrade import Level
from omnicall.engine.events import (
    AssistantAudio,
    AssistantText,
    EngineError,
    StageTiming,
    TurnEvent,
    UserTranscript,
)
from omnicall.engine.queued_session import QueuedEngineSession
from omnicall.engine.qwen_omni import prompt
from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.frames import ThinkerFrames
from omnicall.engine.qwen_omni.reply import ReplyOptions, ReplyStream
from omnicall.engine.qwen_omni.runtime import OmniRuntime
from omnicall.engine.qwen_omni.settings import DEFAULT_INSTRUCTIONS
from omnicall.engine.scheduler import Priority
from omnicall.engine.worker import WorkerBusy
from omnicall.media.aligner import MediaUnit
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ, OUTPUT_FRAME_SAMPLES, OUTPUT_RATE_HZ

logger = logging.getLogger(__name__)

CHUNK_SAMPLES = INPUT_RATE_HZ  # 1 s of speech per Thinker append (13 audio tokens)
OP_QUEUE = 64
MAX_HELD_EVENTS = 400  # a speculative reply prepares at most ~8 s of audio before commit


@dataclass
class Turn:
    turn_id: int
    pending: list[Int16Array] = field(default_factory=list)  # < 1 s not yet appended
    start_index: int = 0  # Thinker length when the turn opened (never evicted)


@dataclass
class ReplyWork:
    """What a reply needs while the Thinker and Talker make it (its life is the conversation
    layer's :class:`~omnicall.engine.conversation.replies.Reply`; a cut one's ``heard_ms``
    is what the Thinker keeps of it)."""

    #: per chunk of sound: samples out after it (24 kHz), reply tokens the Talker had fed
    frames_at: list[tuple[int, int]] = field(default_factory=list)
    mark: int = 0  # Thinker length before the closing tokens (where a speculation rolls back)


OmniReply = Reply[ReplyWork]


Op = Callable[[], Awaitable[None]]


class QwenOmniSession(QueuedEngineSession):
    def __init__(self, session_id: str, options: SessionOptions, runtime: OmniRuntime) -> None:
        self.runtime = runtime
        self.thinker = th.ThinkerState()
        self.turn: Turn | None = None
        self.replies: Replies[ReplyWork] = Replies(self, self, runtime.clock, options.playout)
        self.listener = Listener(runtime.listening, self, session_id, self.replies,
                                 options.interrupt_by)
        self.camera = ThinkerFrames(runtime.settings.camera)
        self.ops: asyncio.Queue[Op] = asyncio.Queue(maxsize=OP_QUEUE)
        super().__init__(session_id, options)
        self.tasks.spawn("model-ops", self._run_ops())
        self.ops.put_nowait(self._op_system)  # the queue is empty

    def now(self) -> float:
        return self.runtime.clock.now()

    def _new_reply(self, turn_id: int, committed: bool = True) -> OmniReply:
        return self.replies.new(turn_id, ReplyWork(), committed)

    # -- a reply's life: the conversation layer's (engine.conversation.replies) -------------
    def stop_reply(self, reply: OmniReply) -> None:
        """Nothing to do here: the reply loop sees ``reply.cancel`` between steps, and its
        operation then cuts the Thinker back (:meth:`_close_reply`)."""

    def remember_reply(self, reply: OmniReply) -> None:
        """The Thinker's cache is the memory: the reply's own operation keeps what was heard
        (:meth:`_close_reply`), in order with the other operations."""

    async def _run_ops(self) -> None:
        while True:
            op = await self.ops.get()
            try:
                await op()
            except WorkerBusy:
                logger.warning("model worker full, operation dropped")
                await self.emit(EngineError("the assistant is overloaded; please repeat"))
            except (RuntimeError, ValueError, IndexError, TypeError) as exc:
                logger.exception("model operation failed")
                await self.emit(EngineError(f"the assistant failed: {exc}"))
                await self._recover()

    async def _enqueue(self, op: Op) -> None:
        """Queue a model operation, in order. Full queue (the model is behind real time):
        wait, which stops this session taking input - back-pressure to ingest, whose bounded
        ring then drops the oldest audio - rather than dropping an operation, which would
        break the prompt's structure."""
        await self.ops.put(op)

    async def _model(self, fn: Callable[..., Any], *args: Any,
                     priority: Priority = Priority.LISTEN) -> Any:
        return await self.runtime.worker.run(fn, *args, session=self.session_id,
                                             priority=priority)

    # -- model operations (run in order by _run_ops; the work is engine.qwen_omni.prompt's)
    async def _prefill(self, ids: list[int]) -> None:
        """Prefill a run of text/special tokens on the model worker."""
        await self._model(prompt.append_ids, self.runtime.model, self.thinker, ids)

    async def _op_system(self) -> None:
        persona = self.runtime.settings.instructions or DEFAULT_INSTRUCTIONS
        await self._prefill(prompt.system_ids(self.runtime.model, persona))

    async def _recover(self) -> None:
        """After a failed operation: rebuild the Thinker state from scratch (text history is
        lost, the call goes on)."""
        self.thinker = th.ThinkerState()
        self.turn = None
        reply = self.replies.live()
        if reply is not None:
            await self.emit(self.replies.cut(reply))
        await self._op_system()

    def _append_audio(self, samples: Int16Array) -> Op:
        async def op() -> None:
            await self._model(prompt.append_audio, self.runtime.model, self.thinker, samples)
        return op

    def _append_frame(self, turn_id: int, sighting: Sighting,
                      priority: Priority = Priority.BACKGROUND) -> Op:
        """A camera frame into the Thinker, then its thumbnail to the page."""
        async def op() -> None:
            selection = sighting.selection
            await self._model(prompt.append_frame, self.runtime.model, self.thinker,
                              selection.image, selection.long_side_px,
                              self.runtime.settings.video_max_pixels, sighting.image_id,
                              priority=priority)
            await self.emit(seen_event(turn_id, sighting))
        return op

    def _video_on(self) -> bool:
        return self.runtime.level() == Level.NORMAL

    def _speculating(self, turn: Turn) -> bool:
        """A speculative reply to ``turn`` is under way (its closing is in the cache)."""
        return self.replies.speculating(turn.turn_id) is not None

    async def _end_frame(self, turn: Turn) -> None:
        """The turn's end frame before its reply (on the reply's path: listen priority)."""
        sighting = self.camera.end_frame() if self._video_on() else None
        if sighting is not None:
            await self._enqueue(self._append_frame(turn.turn_id, sighting, Priority.LISTEN))

    # -- listening -----------------------------------------------------------------------
    async def process(self) -> None:
        while True:
            unit = await self.next_unit()
            await self._on_unit(unit)

    async def _on_unit(self, unit: MediaUnit) -> None:
        self.camera.clock(unit.index)
        # first: the unit that starts speech opens the turn
        await self.listener.feed(unit.audio, unit.filled, unit.index)
        turn = self.turn
        if unit.video is not None and self._video_on():
            sighting = self.camera.see(unit.video, speaking=turn is not None,
                                       waiting=turn is not None and self._speculating(turn))
            if sighting is not None and turn is not None:
                await self._enqueue(self._append_frame(turn.turn_id, sighting))

    # -- the listener's hooks (engine.conversation.listener) ------------------------------
    async def on_audio(self, audio: Int16Array) -> None:
        turn = self.turn
        if turn is not None:
            turn.pending.append(audio)
            # not behind a speculative reply: its op would put the audio after the reply
            if sum(len(a) for a in turn.pending) >= CHUNK_SAMPLES \
                    and not self._speculating(turn):
                await self._flush_pending(turn)

    async def on_lull(self) -> None:
        """Nothing: the Thinker has the turn's audio as it comes; the pause speculates."""

    async def on_pause(self) -> None:
        await self._speculate()

    def addressed(self, since_s: float) -> bool:
        """Every voice (the camera's addressee is the cascade's)."""
        return True

    async def on_resume(self) -> None:
        self.replies.cancel_speculation()  # its operation rolls the cache back
        turn = self.turn
        if turn is not None:
            for sighting in self.camera.resumed():  # after the rollback: the ops are in order
                await self._enqueue(self._append_frame(turn.turn_id, sighting))

    async def _flush_pending(self, turn: Turn) -> None:
        samples = np.concatenate(turn.pending) if turn.pending else np.zeros(0, np.int16)
        turn.pending = []
        if len(samples):
            await self._enqueue(self._append_audio(samples))

    async def on_speech_start(self) -> None:
        self.state.turn_id += 1
        turn = Turn(self.state.turn_id, pending=list(self.listener.utterance))  # the preroll
        self.turn = turn
        await self.emit(TurnEvent("user", "start", turn.turn_id))
        await self.emit(StageTiming(turn.turn_id, "speech_start", self.now()))
        await self._enqueue(self._open_turn(turn))
        held = self.camera.open_turn()  # the audio bracket opens with the first audio
        if held is not None and self._video_on():
            await self._enqueue(self._append_frame(turn.turn_id, held))

    def _open_turn(self, turn: Turn) -> Op:
        async def op() -> None:
            turn.start_index = self.thinker.length
            await self._prefill(prompt.user_open_ids(self.runtime.model))
        return op

    async def on_end_of_turn(self, speech_end_s: float) -> None:
        turn = self.turn
        if turn is None:
            return
        await self.emit(StageTiming(turn.turn_id, "speech_end", speech_end_s))
        await self.emit(StageTiming(turn.turn_id, "end_of_turn", self.now()))
        await self.emit(TurnEvent("user", "end", turn.turn_id))
        self.turn = None
        reply = self.replies.speculating(turn.turn_id)
        if reply is not None:
            turn.pending = []  # the hangover's silence: the speculation answered without it
            self.camera.turn_ended()
            await self.replies.commit(reply)
        else:
            await self._flush_pending(turn)
            await self._end_frame(turn)
            reply = self._new_reply(turn.turn_id)
            await self._enqueue(self._answer_op(reply, turn))
        if self.runtime.captions is not None:
            self.tasks.spawn(f"captions-{turn.turn_id}",
                             self._captions(turn, self.listener.samples()))

    async def hear_words(self, samples: Int16Array) -> Heard | None:
        """The words of the caller's sound over a reply (interruptions by words), from the
        captions' ASR; None without one (the sound interrupts) or when it is busy."""
        asr = self.runtime.captions
        if asr is None:
            return None
        try:
            text, logprob = await self.runtime.captions_worker.run(
                asr.hear, samples, session=self.session_id)
        except WorkerBusy:
            return None
        return Heard(text, logprob)

    async def _captions(self, turn: Turn, samples: Int16Array) -> None:
        asr = self.runtime.captions
        assert asr is not None
        try:
            text = await self.runtime.captions_worker.run(asr.transcribe, samples,
                                                          session=self.session_id)
        except WorkerBusy:
            return
        await self.emit(UserTranscript(text, final=True, turn_id=turn.turn_id))

    # -- replying ------------------------------------------------------------------------
    async def _speculate(self) -> None:
        """Speech paused: answer now, holding the output back until the end of turn is
        confirmed (the VAD hangover is spent decoding instead of waiting)."""
        turn = self.turn
        if turn is None or self.replies.live() is not None:
            return
        await self._flush_pending(turn)
        await self._end_frame(turn)  # stays if speech resumes: seen while the user spoke
        reply = self._new_reply(turn.turn_id, committed=False)
        await self._enqueue(self._answer_op(reply, turn))

    def _answer_op(self, reply: OmniReply, turn: Turn) -> Op:
        """Close the user turn (``<|audio_end|>`` if open, ``<|im_end|>`` + assistant prefix)
        and stream the reply; a cancelled speculation rolls the cache back to before the
        closing."""
        async def op() -> None:
            if reply.cancel.is_set():
                return
            reply.work.mark = self.thinker.length
            await self._model(prompt.close_user_turn, self.runtime.model, self.thinker)
            await self._stream_reply(reply)
        return op

    async def _stream_reply(self, reply: OmniReply) -> None:
        rt, m = self.runtime, self.runtime.model
        turn_id = reply.turn_id
        await reply.gate.out(StageTiming(turn_id, "asr_done", self.now()))  # tail prefilled
        if reply.cancel.is_set():
            await self._close_reply(reply, None)
            return
        options = ReplyOptions(max_new_tokens=rt.settings.max_new_tokens,
                               max_frames=rt.settings.max_frames, speaker=rt.settings.speaker,
                               with_audio=rt.level() == Level.NORMAL and m.has_talker)
        stream = ReplyStream(m, self.thinker, options, rt.talker, rt.codec)
        await reply.gate.out(TurnEvent("assistant", "start", turn_id))
        text = ""
        pts = 0
        first_token = first_frame = first_chunk = False

        while not stream.done and not reply.cancel.is_set():
            if reply.gate.speculative and len(reply.gate.held) > MAX_HELD_EVENTS:
                await reply.gate.decided.wait()  # enough prepared: wait for the end of turn
                continue
            outs = await rt.batcher.step(stream)  # batched with other calls' steps
            for out in outs:
                if out.tokens and not first_token:
                    first_token = True
                    await reply.gate.out(StageTiming(turn_id, "llm_first_token", self.now()))
                if out.frames and not first_frame:
                    first_frame = True
                    await reply.gate.out(StageTiming(turn_id, "talker_first_frame", self.now()))
                if out.tokens:
                    new_text = m.decode(stream.tokens)
                    if len(new_text) > len(text) and new_text.startswith(text):
                        await reply.gate.out(AssistantText(new_text[len(text):], turn_id))
                        text = reply.text = new_text
                if out.audio is not None and out.audio.numel() and not reply.cancel.is_set():
                    if not first_chunk:
                        first_chunk = True
                        await reply.gate.out(StageTiming(turn_id, "code2wav_first_chunk",
                                                           self.now()))
                    pcm = (out.audio.clamp(-1, 1) * 32767).round().to(torch.int16).numpy()
                    for start in range(0, len(pcm), OUTPUT_FRAME_SAMPLES):
                        frame = pcm[start:start + OUTPUT_FRAME_SAMPLES]
                        await reply.gate.out(AssistantAudio(frame, OUTPUT_RATE_HZ, pts, turn_id))
                        pts += len(frame)
                    reply.audio_s = pts / OUTPUT_RATE_HZ
                    reply.work.frames_at.append((pts, stream.talker_state.frames + 1
                                                 if stream.talker_state else 0))
        if reply.gate.speculative and not reply.cancel.is_set():
            await reply.gate.decided.wait()  # finished inside the hangover: the verdict
        await self.replies.play_out(reply)
        await self._close_reply(reply, stream)
        await self.replies.end(reply)

    async def _close_reply(self, reply: OmniReply, stream: ReplyStream | None) -> None:
        """Cut the Thinker back to what was heard and close the assistant message (a
        cancelled speculation: back to before the user turn was closed)."""
        if not reply.gate.committed:
            await self._model(prompt.rollback, self.thinker, reply.work.mark)
            return
        tokens = [] if stream is None else stream.tokens
        keep = len(tokens)
        if reply.heard_ms is not None:  # cut: the tokens voiced by what the caller heard
            keep = prompt.heard_tokens(reply.work.frames_at, reply.heard_ms, len(tokens))
        start = self.thinker.length if stream is None else stream.prompt_length
        protect = self.turn.start_index if self.turn is not None else None
        await self._model(prompt.close_reply, self.runtime.model, self.thinker, start, tokens,
                          keep, self.runtime.settings.window_s, protect, self.camera.max_images)

    def interrupt(self) -> None:
        self.replies.interrupt(committed_only=False)

    async def close(self) -> None:
        await super().close()
        self.runtime.drop_session(self.session_id)
