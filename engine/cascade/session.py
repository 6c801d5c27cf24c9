"""One call on the CPU cascade: listening (the conversation layer's
:class:`~omnicall.engine.conversation.listener.Listener`), partial transcripts and prompt
prefill while the user speaks, the camera's frames, turns the client drives, and the replies'
lifecycle: started, held while speculative, released, stopped at a barge-in. How a turn is
answered (ASR, LLM, tools, TTS) is the :class:`~omnicall.engine.cascade.answer.Answerer`'s;
what the calls of one engine share (workers, models, clock) comes in a
:class:`~omnicall.engine.cascade.runtime.CascadeRuntime`.

Latency plan (docs/engines/cascade.md): partial ASR runs while the user speaks; the moment
speech *pauses*, the whole reply (final ASR, LLM, first clause to TTS) starts speculatively
and runs during the VAD hangover with its output held back; when the hangover confirms the
end of turn the held events are released at once, and if the user resumes speaking the
speculation is cancelled and nothing of it is seen or remembered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import numpy as np

from omnicall.engine.base import SessionOptions
from omnicall.engine.cascade.answer import Answerer
from omnicall.engine.cascade.clauses import ClauseSplitter
from omnicall.engine.cascade.hearing import FinalTranscript
from omnicall.engine.cascade.reply import ReplyWork
from omnicall.engine.cascade.runtime import CascadeRuntime
from omnicall.engine.conversation.addressee import Glimpse, MouthWatch
from omnicall.engine.conversation.backchannels import Heard
from omnicall.engine.conversation.listener import PREROLL_S, Listener
from omnicall.engine.conversation.settings import MAX_INSTRUCTIONS_CHARS
from omnicall.engine.degrade import Level
from omnicall.engine.events import MAX_TYPED_CHARS, StageTiming, TurnEvent, UserTranscript
from omnicall.engine.queued_session import AudioAhead, QueuedEngineSession
from omnicall.engine.scheduler import Priority
from omnicall.engine.tools import ToolRunner
from omnicall.engine.worker import WorkerBusy
from omnicall.media.aligner import MediaUnit
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ
from omnicall.media.video_ring import RgbImage

if TYPE_CHECKING:
    from omnicall.engine.cascade.history import Conversation

logger = logging.getLogger(__name__)

MANUAL_MAX_FRAMES = 750  # manual turns: at most 60 s of uncommitted audio is kept
MANUAL_MAX_COMMITS = 8
PARTIAL_EVERY_S = 1.0


class CascadeSession(QueuedEngineSession):
    """One call's turn-taking on the cascade, from the caller's media to its replies."""

    def __init__(self, session_id: str, options: SessionOptions,
                 runtime: CascadeRuntime) -> None:
        super().__init__(session_id, options)  # the queues; processing starts at the next await
        self.runtime = runtime
        self.answer = Answerer(runtime, session_id, self.tasks, self, options.tools,
                               self.new_splitter, options.playout, on_facts=self._facts_changed,
                               addressee=options.addressee)
        self.replies = self.answer.replies  # the reply's life; the answerer makes them
        # the engaged person's words are told from others' once they are heard: by words
        interrupt_by = "words" if self.answer.addressee.camera else options.interrupt_by
        self.listener = Listener(runtime.listening, self, session_id, self.replies,
                                 interrupt_by, runtime.settings.language)
        #: --addressee camera: the frames watched for who is talking, one at a time
        self.mouth_watch = MouthWatch()
        self.watching = False
        for role, text in options.history:  # a call resumed on another worker or machine
            self.conversation.add(role, text)
        self.last_partial_samples = 0
        self.partial_busy = False
        self.manual_audio: list[Int16Array] = []  # manual turns: since the last commit
        self.auto_turns = True
        self.committed_audio: list[Int16Array] = []  # manual turns: committed, not answered
        self.typed: list[str] = []  # typed messages not answered yet
        self.prefills = 0  # prompt prefills run while the user spoke
        self.heard_so_far = ""  # the current turn's latest partial transcript
        self.warm_task: asyncio.Task[Any] | None = None  # at most one early prefill request

    @property
    def conversation(self) -> Conversation:
        """The call's memory (the answerer's)."""
        return self.answer.conversation

    def now(self) -> float:
        return self.runtime.clock.now()

    def set_tools(self, tools: ToolRunner | None) -> None:
        self.answer.set_tools(tools)

    def new_splitter(self) -> ClauseSplitter:
        """How reply text is cut for the Talker: first clause as soon as it exists."""
        return ClauseSplitter()

    # -- listening -----------------------------------------------------------------------
    async def process(self) -> None:
        greeting = self.runtime.settings.greeting.strip()
        if greeting and not self.options.history:  # a resumed call is not greeted again
            # greeted once media flows (the call is up): said before, it would go unheard
            unit = await self.next_unit()
            self._greet(greeting)
            await self._on_unit(unit)
        while True:
            unit = await self.next_unit()
            await self._on_unit(unit)

    @property
    def hears_ahead(self) -> bool:
        return self.auto_turns and self.runtime.listening.listen_ahead

    async def hear_ahead(self, ahead: AudioAhead) -> None:
        await self.listener.hear_ahead(ahead.index, ahead.offset, ahead.samples)

    async def _on_unit(self, unit: MediaUnit) -> None:
        if not self.auto_turns:  # the client ends turns: keep the audio until it commits
            self._keep_manual(unit)
            return
        await self.listener.feed(unit.audio, unit.filled, unit.index)
        # from the lull on, the turn's final transcript is under way (and at the pause its
        # reply): no optional work starts then to take the cores from them
        speaking = self.listener.in_turn and not self.listener.quiet
        if speaking:
            self._maybe_partial()
        # frames to a model that sees go as the policy picks them; otherwise the latest is
        # kept for the turn's end, and frames outside the silence ending a turn are looked
        # at ahead of it (camera_view.CameraView, look_ahead.LookAhead)
        if self.answer.camera.eyes.see(unit, self.listener.in_turn) is not None \
                and self.listener.in_turn:
            self._warm()  # a new frame while the user speaks: into the server's cache now
        if unit.video is not None and not self.listener.quiet:
            self._look_ahead(unit.video.image, speaking)
        if unit.video is not None and self.answer.addressee.camera:
            self._watch(unit.video.image)

    def _watch(self, image: RgbImage) -> None:
        """--addressee camera: who is talking in this frame, on the watch worker (a frame
        that comes while the last is still watched is skipped: the next one compares with
        the last watched)."""
        looker = self.runtime.vision
        if looker is None or self.watching:
            return
        self.watching = True
        self.tasks.spawn("watch", self._watched(looker.watch(image, self.mouth_watch,
                                                             self.now(), self.session_id)))

    async def _watched(self, glimpse: Awaitable[Glimpse | None]) -> None:
        try:
            seen = await glimpse
        finally:
            self.watching = False
        if seen is not None:
            self.answer.addressee.add(seen)

    def addressed(self, since_s: float) -> bool:
        return self.answer.addressee.addressed(since_s, self.now())

    def _look_ahead(self, image: RgbImage, speaking: bool) -> None:
        """A camera frame outside the silence that may end a turn: the offline look, done
        now when due (from the lull on, the turn's transcript and reply have the cores)."""
        camera = self.answer.camera
        camera.look_ahead(image, camera.eyes.media_s, speaking, self.heard_so_far)

    def _keep_manual(self, unit: MediaUnit) -> None:
        """Manual turns: keep the unit's audio until the client commits (synchronous, so a
        commit can take the units still queued, in order: :meth:`commit_input`)."""
        self.manual_audio.append(unit.audio)
        del self.manual_audio[:-MANUAL_MAX_FRAMES]
        self.answer.camera.eyes.see(unit, False)
        if unit.video is not None:  # a client's frame (~1 fps as it speaks): look when due
            self._look_ahead(unit.video.image, speaking=True)

    # -- the listener's hooks (engine.conversation.listener) ------------------------------
    async def on_speech_start(self) -> None:
        self.last_partial_samples = 0
        self.heard_so_far = ""
        self.state.turn_id += 1
        self.answer.hearing.drop_early()
        await self.emit(TurnEvent("user", "start", self.state.turn_id))
        await self.emit(StageTiming(self.state.turn_id, "speech_start", self.now()))
        self.answer.addressee.turn_started_s = self.now() - PREROLL_S
        self.answer.camera.turn_started()
        self._prefill("")
        if self.answer.camera.eyes.active and self.answer.camera.eyes.camera.turn:
            self._warm()  # the frames since the last turn (quiet ones) open this turn

    async def hear_words(self, samples: Int16Array) -> Heard | None:
        """The words of the caller's sound over a reply (interruptions by words): from the
        ``--asr-url`` server, else the partial transcripts' model ahead of optional work;
        None when it is busy."""
        return await self.answer.hearing.words(samples)

    async def on_audio(self, audio: Int16Array) -> None:
        """Nothing: the turn's audio is the listener's utterance, read at the pause."""

    async def on_lull(self) -> None:
        """The speech went silent for a VAD chunk: the turn's final transcript starts now
        (the pause 64 ms later takes it, if it comes: :meth:`Hearing.start_early`), on the
        audio so far and the silence the pause would add to it (Whisper tiny hears a word
        at the very end differently with 40 ms less silence after it: "France" as
        "friends")."""
        if self.runtime.settings.asr_early:
            config = self.listener.runtime.turn_config
            silence = np.zeros((config.pause_ms - config.chunk_ms) * INPUT_RATE_HZ // 1000,
                               np.int16)
            self.answer.hearing.start_early(np.concatenate([self.listener.samples(), silence]),
                                            self.state.turn_id)

    async def on_pause(self) -> None:
        """Speech stopped: start the whole reply now, held back until the turn ends."""
        self._start_reply(committed=False,
                          early=self.answer.hearing.take_early(self.state.turn_id))

    async def on_resume(self) -> None:
        self.replies.cancel_speculation()

    async def on_end_of_turn(self, speech_end_s: float) -> None:
        turn_id = self.state.turn_id
        self.answer.hearing.drop_early()  # no pause took it (a turn cut at its longest)
        await self.emit(StageTiming(turn_id, "speech_end", speech_end_s))
        await self.emit(StageTiming(turn_id, "end_of_turn", self.now()))
        await self.emit(TurnEvent("user", "end", turn_id))
        reply = self.replies.speculating(turn_id)
        if reply is None:
            self._start_reply(committed=True)  # no pause seen (e.g. a very long turn was cut)
        else:
            await self.replies.commit(reply)  # what the speculation made so far goes out now
            self.answer.camera.keep_look(reply)

    # -- replies (their life is the conversation layer's: engine.conversation.replies) ------
    def _start_reply(self, committed: bool, samples: Int16Array | None = None,
                     typed: str = "", early: asyncio.Task[FinalTranscript] | None = None
                     ) -> None:
        """A reply to the listener's turn, or (``samples`` given) to one the client ended;
        ``early``: its final transcript, already under way."""
        audio = self.listener.samples() if samples is None else samples
        work = ReplyWork(self.runtime.level(), audio, typed, client_turn=samples is not None,
                         early=early)
        self.answer.start(self.replies.new(self.state.turn_id, work, committed))

    def _greet(self, text: str) -> None:
        """--greeting: the assistant speaks first, as a kiosk does."""
        self.state.turn_id += 1
        self.answer.start(self.replies.new(
            self.state.turn_id, ReplyWork(self.runtime.level(), script=text), text=text))

    # -- client-driven turns (Realtime protocol controls, typed messages) -------------------
    def set_turn_detection(self, automatic: bool) -> None:
        self.auto_turns = automatic
        self.listener.reset()
        self.manual_audio = []

    def commit_input(self) -> None:
        """The audio sent before the commit is the turn: the units still queued (sent, not
        yet taken by the processing task) are kept first, in order."""
        while (unit := self.next_unit_now()) is not None:
            self._keep_manual(unit)
        if self.manual_audio:
            self.committed_audio.append(np.concatenate(self.manual_audio))
            del self.committed_audio[:-MANUAL_MAX_COMMITS]
        self.manual_audio = []

    def respond(self) -> None:
        audio = (np.concatenate(self.committed_audio) if self.committed_audio
                 else np.zeros(0, np.int16))
        typed = " ".join(self.typed)
        self.committed_audio, self.typed = [], []
        if not len(audio) and not typed:
            return
        self.replies.interrupt(committed_only=False)  # a new answer replaces one still going
        self.state.turn_id += 1
        self._start_reply(committed=True, samples=audio, typed=typed)

    def send_text(self, text: str) -> None:
        if text.strip():
            self.typed.append(text.strip()[:MAX_TYPED_CHARS])
            self.respond()

    def add_message(self, role: str, text: str) -> None:
        self.conversation.add(role, text[:MAX_TYPED_CHARS])

    def set_instructions(self, text: str) -> None:
        self.answer.set_instructions(text[:MAX_INSTRUCTIONS_CHARS])

    def truncate_reply(self, played_ms: int) -> None:
        self.replies.truncate(played_ms)

    # -- while the user speaks: partial transcripts, prompt prefill --------------------------
    def _maybe_partial(self) -> None:
        if self.runtime.level() == Level.FALLBACK or not self.runtime.settings.asr_partials:
            return  # the lighter configuration skips optional work (or it is off)
        have = self.listener.length()
        if self.partial_busy or have - self.last_partial_samples < PARTIAL_EVERY_S * INPUT_RATE_HZ:
            return
        if self.runtime.think_worker.pending or self.runtime.partial.worker.pending:
            return  # partials are optional: never queue behind real work, nor each other
        self.partial_busy = True
        self.last_partial_samples = have
        self.tasks.spawn("partial-asr", self._partial(self.listener.samples(),
                                                      self.state.turn_id))

    async def _partial(self, samples: Int16Array, turn_id: int) -> None:
        partial = self.runtime.partial
        try:
            text = await partial.worker.run(partial.asr.transcribe, samples,
                                            session=self.session_id, priority=Priority.LISTEN)
        except WorkerBusy:
            return
        finally:
            self.partial_busy = False
        if text and self.listener.in_turn and turn_id == self.state.turn_id:
            await self.emit(UserTranscript(text, final=False, turn_id=turn_id))
            self.heard_so_far = text.rstrip(" .,!?")
            self._prefill(self.heard_so_far)

    def _facts_changed(self) -> None:
        """A look while the user speaks changed the camera facts: the prompt so far, with
        them, into the LLM's cache again (the answer's prompt will carry the same facts)."""
        if self.listener.in_turn:
            self._prefill(self.heard_so_far)

    def _prefill(self, heard: str) -> None:
        """While the user speaks, put the answer's prompt up to the words heard so far in
        the LLM's cache (optional work: skipped when any model job waits, and for a model
        without a cache of its own)."""
        runtime = self.runtime
        if not runtime.llm.can_prefill or runtime.think_worker.pending \
                or runtime.level() == Level.FALLBACK:
            return
        messages = self.answer.prompt(heard, "")
        self.tasks.spawn("llm-prefill", self._run_prefill(messages))

    async def _run_prefill(self, messages: list[dict[str, Any]]) -> None:
        try:
            await self.runtime.think_worker.run(self.runtime.llm.prefill, messages,
                                                session=self.session_id,
                                                priority=Priority.LISTEN)
            self.prefills += 1
        except WorkerBusy:
            logger.debug("prefill skipped (worker busy)")

    def _warm(self) -> None:
        """``--llm-vision`` on a server that caches prompts: send the turn's prompt so far
        (its frames, then the words heard) with a one-token answer, so the turn's own request
        finds the images prefilled. One request in flight per call; optional work."""
        runtime = self.runtime
        if not runtime.llm.can_warm or not runtime.settings.llm_vision_early \
                or runtime.level() == Level.FALLBACK:
            return
        if self.warm_task is not None and not self.warm_task.done():
            return
        messages = self.answer.prompt(self.heard_so_far, "", self.answer.camera.eyes.so_far())
        self.warm_task = self.tasks.spawn("llm-warm", self._run_warm(messages))

    async def _run_warm(self, messages: list[dict[str, Any]]) -> None:
        if await self.runtime.llm.warm(messages):
            self.prefills += 1

    def interrupt(self) -> None:
        self.replies.interrupt()

    async def close(self) -> None:
        await super().close()
        self.runtime.drop_session(self.session_id)
