"""One call on the CPU cascade: listening (VAD + turns), thinking (ASR, vision facts, LLM)
and talking (TTS), with barge-in. Per-session model state lives in :class:`ListenState`,
:class:`Reply` and the :class:`Conversation`; shared models are reached through workers.

Latency plan (docs/engines/cascade.md): partial ASR runs while the user speaks; the moment
speech *pauses*, the whole reply (final ASR, LLM, first clause to TTS) starts speculatively
and runs during the VAD hangover with its output held back; when the hangover confirms the
end of turn the held events are released at once, and if the user resumes speaking the
speculation is cancelled and nothing of it is seen or remembered.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from omnicall.engine.base import (
    AssistantAudio,
    AssistantText,
    EngineError,
    EngineEvent,
    QueuedEngineSession,
    SessionOptions,
    StageTiming,
    ToolCall,
    TurnEvent,
    UserTranscript,
)
from omnicall.engine.cascade.clauses import ClauseSplitter
from omnicall.engine.cascade.llm import LlamaLlm, ToolRequest
from omnicall.engine.cascade.tts import SilenceTrimmer
from omnicall.engine.conversation.echo_guard import repeats_assistant
from omnicall.engine.conversation.listener import Listener, ListenerHooks
from omnicall.engine.conversation.reply_gate import ReplyGate
from omnicall.engine.degrade import Level
from omnicall.engine.languages import reply_language_note
from omnicall.engine.scheduler import Priority
from omnicall.engine.tools import APOLOGY, ToolOutcome, ToolRunner, ToolSpec, new_call_id
from omnicall.engine.worker import WorkerBusy
from omnicall.media.aligner import MediaUnit
from omnicall.media.resample import AudioConverter, Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ, OUTPUT_FRAME_SAMPLES, OUTPUT_RATE_HZ

if TYPE_CHECKING:
    from omnicall.engine.cascade.engine import CascadeEngine

FALLBACK_REPLY_TOKENS = 24

logger = logging.getLogger(__name__)

MANUAL_MAX_FRAMES = 750  # manual turns: at most 60 s of uncommitted audio is kept
MANUAL_MAX_COMMITS = 8
MAX_TYPED_CHARS = 2000
MAX_INSTRUCTIONS_CHARS = 8000
PARTIAL_EVERY_S = 1.0
VISION_EVERY_S = 2.0
PLAYOUT_END_LEAD_S = 0.1  # end the turn this much before playout ends (egress marks the tail)
CLAUSE_TAIL_MS = 150.0  # silence kept after each synthesized clause
FILLER_AFTER_S = 0.7  # a tool still running after this: the assistant says a filler line
ECHO_GUARD_S = 3.0  # after a reply played out, a repeat of it is treated as echo


@dataclass
class Reply:
    turn_id: int
    gate: ReplyGate  # held while speculative; what the caller heard
    cancel: threading.Event = field(default_factory=threading.Event)
    level: Level = Level.NORMAL  # the degrade level this reply is answered at
    #: cleared while the Talker synthesizes: the LLM (far ahead of speech anyway) pauses so
    #: TTS gets the cores and the next clause is heard sooner
    llm_may_run: threading.Event = field(default_factory=threading.Event)
    user_text: str = ""
    language: str = ""  # what Whisper heard the user speak (--language auto)
    text: str = ""
    clause_audio: list[tuple[str, float, float]] = field(default_factory=list)  # text, start, dur
    audio_s: float = 0.0  # made so far (released or held)
    done: bool = False

    def played_text(self, heard_s: float) -> str:
        """The words of the reply in its first ``heard_s`` of sound."""
        words: list[str] = []
        for text, start, dur in self.clause_audio:
            if dur <= 0:  # a clause whose first sound is still being made
                continue
            if start + dur <= heard_s:
                words += text.split()
            elif start < heard_s:
                clause_words = text.split()
                words += clause_words[:int(len(clause_words) * (heard_s - start) / dur)]
        return " ".join(words)


class _FrameCutter:
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


class CascadeSession(QueuedEngineSession, ListenerHooks):
    def __init__(self, session_id: str, options: SessionOptions, engine: CascadeEngine) -> None:
        self.engine = engine
        self.listener = Listener(engine.listening, self, session_id)
        self.last_partial_samples = 0
        self.partial_busy = False
        self.manual_audio: list[Int16Array] = []  # manual turns: since the last commit
        self.tools = options.tools
        self.conversation = engine.new_conversation(self.tool_specs())
        for role, text in options.history:  # a call resumed on another worker or machine
            self.conversation.add(role, text)
        self.facts = ""
        self.reply: Reply | None = None
        self.reply_task: asyncio.Task[Any] | None = None
        self._last_vision_s = float("-inf")
        self._vision_busy = False
        self.barge_ins = 0
        self.speculations_cancelled = 0
        self.echoes_ignored = 0
        self.last_reply: tuple[str, float] = ("", float("-inf"))  # text, playout end (clock)
        self.auto_turns = True
        self.committed_audio: list[Int16Array] = []  # manual turns: committed, not answered
        self.typed: list[str] = []  # typed messages not answered yet
        self.prefills = 0  # prompt prefills run while the user spoke
        super().__init__(session_id, options)

    def now(self) -> float:
        return self.engine.clock.now()

    def tool_specs(self) -> list[ToolSpec]:
        return self.tools.specs() if self.tools is not None else []

    def set_tools(self, tools: ToolRunner | None) -> None:
        self.tools = tools
        fresh = self.engine.new_conversation(self.tool_specs())
        self.conversation.tools, self.conversation.shots = fresh.tools, fresh.shots

    def new_splitter(self) -> ClauseSplitter:
        """How reply text is cut for the Talker: first clause as soon as it exists."""
        return ClauseSplitter()

    # -- listening -----------------------------------------------------------------------
    async def process(self) -> None:
        greeting = self.engine.settings.greeting.strip()
        if greeting and not self.options.history:  # a resumed call is not greeted again
            # greeted once media flows (the call is up): said before, it would go unheard
            unit = await self.state.inputs.get()
            self._greet(greeting)
            await self._on_unit(unit)
        while True:
            unit = await self.state.inputs.get()
            await self._on_unit(unit)

    async def _on_unit(self, unit: MediaUnit) -> None:
        if not self.auto_turns:  # the client ends turns: keep the audio until it commits
            self.manual_audio.append(unit.audio)
            del self.manual_audio[:-MANUAL_MAX_FRAMES]
        else:
            await self.listener.feed(unit.audio)
            if self.listener.in_turn and not self.listener.paused:
                self._maybe_partial()
        if unit.video is not None:
            self._maybe_vision(unit)

    # -- the listener's hooks (engine.conversation.listener) ------------------------------
    def reply_sound_started_at(self) -> float | None:
        reply = self.reply
        return reply.gate.first_audio_at if reply is not None and not reply.done else None

    async def on_speech_start(self) -> None:
        self.last_partial_samples = 0
        reply = self.reply
        if reply is not None and not reply.done:
            await self._barge_in(reply)
        self.state.turn_id += 1
        await self.emit(TurnEvent("user", "start", self.state.turn_id))
        await self.emit(StageTiming(self.state.turn_id, "speech_start", self.now()))
        self._prefill("")

    async def on_pause(self) -> None:
        """Speech stopped: start the whole reply now, held back until the turn ends."""
        self._start_reply(committed=False)

    async def on_resume(self) -> None:
        self._cancel_speculation()

    def _new_reply(self, committed: bool, text: str = "") -> Reply:
        gate = ReplyGate(self.state.turn_id, self.emit, self.engine.clock, committed,
                         self.options.playout)
        reply = Reply(self.state.turn_id, gate, level=self.engine.level, text=text)
        reply.llm_may_run.set()
        self.reply = reply
        return reply

    def _start_reply(self, committed: bool, samples: Int16Array | None = None,
                     typed: str = "") -> None:
        reply = self._new_reply(committed)
        audio = self.listener.samples() if samples is None else samples
        self.reply_task = self.tasks.spawn(f"reply-{reply.turn_id}",
                                           self._reply(reply, audio, typed))

    # -- client-driven turns (Realtime protocol controls, typed messages) -------------------
    def set_turn_detection(self, automatic: bool) -> None:
        self.auto_turns = automatic
        self.listener.reset()
        self.manual_audio = []

    def commit_input(self) -> None:
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
        reply = self.reply
        if reply is not None and not reply.done:
            self._stop_reply(reply)  # a new answer replaces one still speaking
            self.state.events.put_nowait(
                TurnEvent("assistant", "end", reply.turn_id, interrupted=True))
        self.state.turn_id += 1
        self._start_reply(committed=True, samples=audio, typed=typed)

    def send_text(self, text: str) -> None:
        if text.strip():
            self.typed.append(text.strip()[:MAX_TYPED_CHARS])
            self.respond()

    def add_message(self, role: str, text: str) -> None:
        self.conversation.add(role, text[:MAX_TYPED_CHARS])

    def set_instructions(self, text: str) -> None:
        self.conversation.system_prompt = text[:MAX_INSTRUCTIONS_CHARS] or \
            self.engine.new_conversation().system_prompt

    def truncate_reply(self, played_ms: int) -> None:
        reply = self.reply
        if reply is None or reply.gate.first_audio_at is None:
            return
        heard = reply.played_text(played_ms / 1000)
        self.conversation.replace_last("assistant", heard + " ..." if heard else "")

    def _cancel_speculation(self) -> None:
        reply = self.reply
        if reply is not None and reply.gate.speculative:
            reply.gate.cancel()
            reply.cancel.set()
            reply.llm_may_run.set()
            reply.done = True
            if self.reply_task is not None:
                self.reply_task.cancel()
            self.reply = None
            self.speculations_cancelled += 1

    def _maybe_partial(self) -> None:
        if self.engine.level == Level.FALLBACK:
            return  # the lighter configuration skips optional work
        have = self.listener.length()
        if self.partial_busy or have - self.last_partial_samples < PARTIAL_EVERY_S * 16_000:
            return
        if self.engine.think_worker.pending or self.engine.partial_worker.pending:
            return  # partials are optional: never queue behind real work, nor each other
        self.partial_busy = True
        self.last_partial_samples = have
        self.tasks.spawn("partial-asr", self._partial(self.listener.samples(),
                                                      self.state.turn_id))

    async def _partial(self, samples: Int16Array, turn_id: int) -> None:
        worker, asr = self.engine.partial_transcriber()
        try:
            text = await worker.run(asr.transcribe, samples, session=self.session_id,
                                    priority=Priority.LISTEN)
        except WorkerBusy:
            return
        finally:
            self.partial_busy = False
        if text and self.listener.in_turn and turn_id == self.state.turn_id:
            await self.emit(UserTranscript(text, final=False, turn_id=turn_id))
            self._prefill(text.rstrip(" .,!?"))

    def _prefill(self, heard: str) -> None:
        """While the user speaks, put the answer's prompt up to the words heard so far in
        the LLM's cache (optional work: skipped when any model job waits)."""
        llm = self.engine.llm
        if not isinstance(llm, LlamaLlm) or self.engine.think_worker.pending \
                or self.engine.level == Level.FALLBACK:
            return
        messages = self._prompt(heard, "")
        self.tasks.spawn("llm-prefill", self._run_prefill(llm, messages))

    async def _run_prefill(self, llm: LlamaLlm, messages: list[dict[str, Any]]) -> None:
        try:
            await self.engine.think_worker.run(llm.prefill, messages, session=self.session_id,
                                               priority=Priority.LISTEN)
            self.prefills += 1
        except WorkerBusy:
            logger.debug("session %s: prefill skipped (worker busy)", self.session_id)

    async def on_end_of_turn(self, speech_end_s: float) -> None:
        turn_id = self.state.turn_id
        await self.emit(StageTiming(turn_id, "speech_end", speech_end_s))
        await self.emit(StageTiming(turn_id, "end_of_turn", self.now()))
        await self.emit(TurnEvent("user", "end", turn_id))
        reply = self.reply
        if reply is None or not reply.gate.speculative or reply.turn_id != turn_id:
            self._start_reply(committed=True)  # no pause seen (e.g. a very long turn was cut)
        else:
            await reply.gate.commit()  # what the speculation made so far goes out at once

    async def _out(self, reply: Reply, event: EngineEvent) -> None:
        if reply.cancel.is_set():
            raise asyncio.CancelledError
        await reply.gate.out(event)

    # -- vision --------------------------------------------------------------------------
    def _maybe_vision(self, unit: MediaUnit) -> None:
        if self.engine.level == Level.FALLBACK:
            return
        now = self.now()
        if self._vision_busy or now - self._last_vision_s < VISION_EVERY_S:
            return
        if self.engine.think_worker.pending or (self.reply is not None and not self.reply.done):
            return  # background work: only when nothing urgent is running
        assert unit.video is not None
        self._vision_busy = True
        self._last_vision_s = now
        self.tasks.spawn("vision", self._vision(unit.video.image))

    async def _vision(self, image: Any) -> None:
        try:
            self.facts = await self.engine.think_worker.run(
                self.engine.vision.describe, image, session=self.session_id,
                priority=Priority.BACKGROUND)
        except WorkerBusy:
            logger.debug("vision skipped: worker busy")
        finally:
            self._vision_busy = False

    # -- thinking and talking ------------------------------------------------------------
    async def _reply(self, reply: Reply, samples: Int16Array, typed: str = "") -> None:
        try:
            await self._reply_steps(reply, samples, typed)
        except Exception as exc:  # any model failure: report (logged below), end the turn
            # A model failed mid-turn (third-party libraries raise all kinds): say so, end the
            # turn cleanly so the page is never stuck "speaking", keep the session.
            logger.exception("session %s: reply %d failed", self.session_id, reply.turn_id)
            reply.cancel.set()
            reply.llm_may_run.set()
            reply.done = True
            await self._out_anyway(reply, EngineError(f"the assistant failed to answer: {exc}"))
            await self._out_anyway(reply, TurnEvent("assistant", "end", reply.turn_id,
                                                    interrupted=True))

    async def _out_anyway(self, reply: Reply, event: EngineEvent) -> None:
        """Deliver an event of a failed reply once the turn is confirmed."""
        await reply.gate.released.wait()
        await self.emit(event)

    async def _transcribe(self, reply: Reply, samples: Int16Array) -> str | None:
        """The final transcript of a turn (None: not to be answered)."""
        engine = self.engine
        asked_at = self.now()

        def transcribe(audio: Int16Array) -> tuple[float, tuple[str, str]]:  # think thread
            return self.now(), engine.asr.transcribe_turn(audio)

        try:
            started_at, (text, reply.language) = await engine.think_worker.run(
                transcribe, samples, session=self.session_id)
            # what people said stays out of the default log (privacy): DEBUG only
            logger.info("session %s turn %d: ASR of %.1f s took %.0f ms (waited %.0f ms)",
                        self.session_id, reply.turn_id, len(samples) / INPUT_RATE_HZ,
                        (self.now() - started_at) * 1000, (started_at - asked_at) * 1000)
            logger.debug("session %s turn %d: heard %r", self.session_id, reply.turn_id, text)
        except WorkerBusy:
            await self._out(reply, EngineError("busy: could not transcribe that turn"))
            return None
        if text and self._is_echo(text):
            logger.info("session %s turn %d: the transcript repeats the assistant; ignored "
                        "as echo", self.session_id, reply.turn_id)
            self.echoes_ignored += 1
            return None
        await self._out(reply, StageTiming(reply.turn_id, "asr_start", started_at))
        await self._out(reply, StageTiming(reply.turn_id, "asr_done", self.now()))
        return text

    async def _reply_steps(self, reply: Reply, samples: Int16Array, typed: str = "") -> None:
        heard = await self._transcribe(reply, samples) if len(samples) else ""
        if heard is None:
            reply.done = True
            return
        text = " ".join(t for t in (heard, typed) if t)
        reply.user_text = text
        await self._out(reply, UserTranscript(text, final=True, turn_id=reply.turn_id))
        if not text:
            reply.done = True
            return
        await self._out(reply, TurnEvent("assistant", "start", reply.turn_id))
        clauses: asyncio.Queue[str | None] = asyncio.Queue(maxsize=16)
        talker = self.tasks.spawn(f"talk-{reply.turn_id}", self._talk(reply, clauses))
        try:
            await self._think(reply, text, clauses)
            await talker
        finally:
            if not talker.done():
                talker.cancel()
        await reply.gate.released.wait()  # a reply that finished inside the hangover
        await self._played_out(reply)
        self.conversation.add("user", text)
        self.conversation.add("assistant", reply.text)
        await self._out(reply, TurnEvent("assistant", "end", reply.turn_id))

    async def _played_out(self, reply: Reply) -> None:
        """The reply is generated faster than it is spoken: it stays the current turn (and
        can be barged in on) until its audio has played out at the user's end."""
        played_out_at = reply.gate.played_out_at()
        if played_out_at is not None:
            left_s = played_out_at - PLAYOUT_END_LEAD_S - self.now()
            if left_s > 0:
                await self.engine.clock.sleep(left_s)
        reply.done = True
        self.last_reply = (reply.text, played_out_at if played_out_at is not None
                           else self.now())

    # -- the greeting (--greeting: the assistant speaks first, as a kiosk does) -------------
    def _greet(self, text: str) -> None:
        self.state.turn_id += 1
        reply = self._new_reply(committed=True, text=text)
        self.reply_task = self.tasks.spawn("greeting", self._say(reply))

    async def _say(self, reply: Reply) -> None:
        """Speak ``reply.text`` as the assistant's turn (no ASR, no LLM)."""
        await self._out(reply, TurnEvent("assistant", "start", reply.turn_id))
        await self._out(reply, AssistantText(reply.text, reply.turn_id))
        clauses: asyncio.Queue[str | None] = asyncio.Queue()
        splitter = self.new_splitter()
        for clause in [*splitter.feed(reply.text), splitter.flush()]:
            if clause:
                clauses.put_nowait(clause)
        clauses.put_nowait(None)
        await self._talk(reply, clauses)
        await self._played_out(reply)
        self.conversation.add("assistant", reply.text)
        await self._out(reply, TurnEvent("assistant", "end", reply.turn_id))

    async def _think(self, reply: Reply, user_text: str,
                     clauses: asyncio.Queue[str | None]) -> None:
        """Generate the reply (a tool call first, when the model picks one) into captions
        and the Talker's clause queue."""
        messages = self._prompt(user_text, reply.language)
        splitter = self.new_splitter()
        specs = self.tool_specs()
        request = await self._generate(reply, messages, specs, splitter, clauses)
        if request is not None:
            outcome = await self._call_tool(reply, request, clauses)
            if outcome.ok:
                messages += self.engine.llm.tool_result_messages(request, outcome.output)
                await self._generate(reply, messages, [], splitter, clauses, greedy=True)
            else:  # an error or time-out: a spoken apology, never a dead call
                await self._say_more(reply, APOLOGY, clauses)
        rest = splitter.flush()
        if rest:
            await clauses.put(rest)
        if not reply.text.strip():
            await self._say_more(reply, "Sorry, I did not catch that.", clauses)
        await clauses.put(None)

    def _prompt(self, user_text: str, language: str) -> list[dict[str, Any]]:
        self.conversation.trim(self.engine.llm.count_tokens)
        note = reply_language_note(language) if (
            self.engine.settings.language == "auto" and language not in ("", "en")) else ""
        return self.conversation.messages(self.facts, user_text, note)

    async def _say_more(self, reply: Reply, text: str,
                        clauses: asyncio.Queue[str | None]) -> None:
        """Fixed words (a filler, an apology) spoken as part of the reply."""
        sep = " " if reply.text and not reply.text.endswith(" ") else ""
        reply.text += sep + text
        await self._out(reply, AssistantText(sep + text, reply.turn_id))
        await clauses.put(text)

    async def _generate(self, reply: Reply, messages: list[dict[str, Any]],
                        specs: list[ToolSpec], splitter: ClauseSplitter,
                        clauses: asyncio.Queue[str | None], greedy: bool = False
                        ) -> ToolRequest | None:
        """One LLM pass on the think worker; text goes out as it comes, a tool request is
        returned (the pass ends there)."""
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[str | ToolRequest | None] = asyncio.Queue()
        llm = self.engine.llm
        max_tokens = FALLBACK_REPLY_TOKENS if reply.level == Level.FALLBACK else None

        options: dict[str, Any] = {"tools": specs} if specs else {}
        if greedy:
            options["greedy"] = True

        def generate() -> None:  # on the think worker thread
            try:
                for item in llm.stream(messages, reply.cancel, max_tokens, **options):
                    loop.call_soon_threadsafe(items.put_nowait, item)
                    reply.llm_may_run.wait(timeout=2.0)
                    if reply.clause_audio and isinstance(llm, LlamaLlm):
                        llm.cruise()  # the first clause is out: a core back to the others
            finally:
                loop.call_soon_threadsafe(items.put_nowait, None)

        job = asyncio.ensure_future(self.engine.think_worker.run(generate,
                                                                 session=self.session_id))
        request: ToolRequest | None = None
        try:
            while (item := await items.get()) is not None:
                if isinstance(item, ToolRequest):
                    request = item
                    continue
                if not reply.text:
                    await self._out(reply, StageTiming(reply.turn_id, "llm_first_token",
                                                       self.now()))
                reply.text += item
                await self._out(reply, AssistantText(item, reply.turn_id))
                for clause in splitter.feed(item):
                    await clauses.put(clause)
            await job
        finally:
            if not job.done():  # cancelled mid-reply: stop generating at the next token
                reply.cancel.set()
        return request

    async def _call_tool(self, reply: Reply, request: ToolRequest,
                         clauses: asyncio.Queue[str | None]) -> ToolOutcome:
        """Run a tool (through the session's runner); after FILLER_AFTER_S a short filler
        line is spoken; past the runner's time limit the call counts as failed."""
        tools = self.tools
        assert tools is not None
        if not tools.speculative(request.name):  # a tool that may act waits for the turn's end
            await reply.gate.released.wait()
        await self._out(reply, StageTiming(reply.turn_id, "tool_start", self.now()))
        call_id = request.call_id or new_call_id()
        call = self.tasks.spawn(f"tool-{reply.turn_id}",
                                tools.call(call_id, request.name, request.arguments))
        try:
            done, _ = await asyncio.wait({call}, timeout=FILLER_AFTER_S)
            if not done:
                await self._say_more(reply, tools.filler(request.name), clauses)
            outcome: ToolOutcome = await asyncio.wait_for(asyncio.shield(call),
                                                          tools.timeout_s + 1.0)
        except TimeoutError:
            outcome = ToolOutcome(call_id, request.name, request.arguments,
                                  error=f"no result within {tools.timeout_s:g} s")
        finally:
            if not call.done():
                call.cancel()
        await self._out(reply, StageTiming(reply.turn_id, "tool_done", self.now()))
        await self._out(reply, ToolCall(reply.turn_id, call_id, request.name,
                                        request.arguments, outcome.output, outcome.error,
                                        outcome.ms))
        return outcome

    async def _talk(self, reply: Reply, clauses: asyncio.Queue[str | None]) -> None:
        engine = self.engine
        tts = engine.talker() if reply.level != Level.TEXT_FIRST else None
        if tts is None:  # text first: the Talker is paused, captions carry the answer
            while await clauses.get() is not None:
                pass
            return
        converter = AudioConverter(OUTPUT_RATE_HZ)
        frames = _FrameCutter(reply.turn_id)
        while (clause := await clauses.get()) is not None:
            first = not reply.clause_audio
            if first:
                await self._out(reply, StageTiming(reply.turn_id, "llm_first_clause",
                                                   self.now()))
            # the reply's first sound is what the user waits for: no leading silence; and
            # clauses join with a short pause instead of the voice's ~200 ms tail
            trimmer = SilenceTrimmer(OUTPUT_RATE_HZ, lead=first, tail_keep_ms=CLAUSE_TAIL_MS)
            pieces = iter(tts.synthesize(clause))
            start_s = reply.audio_s
            reply.clause_audio.append((clause, start_s, 0.0))  # its length grows as it goes
            reply.llm_may_run.clear()
            try:
                while True:  # the voice's pieces go out as they come (the Talker streams)
                    piece = await engine.talk_worker.run(next, pieces, None,
                                                         session=self.session_id)
                    if piece is None:
                        audio = np.concatenate([trimmer.feed(converter.flush()), trimmer.end()])
                    else:
                        audio = trimmer.feed(converter.convert_array(*piece))
                    for frame in frames.cut(audio, last=piece is None):
                        reply.audio_s += len(frame.samples) / OUTPUT_RATE_HZ
                        await self._out(reply, frame)
                        if frame.pts == 0:  # the reply's first sound went out
                            await self._out(reply, StageTiming(reply.turn_id,
                                                               "tts_first_chunk", self.now()))
                    reply.clause_audio[-1] = (clause, start_s, reply.audio_s - start_s)
                    if piece is None:
                        break
            finally:
                reply.llm_may_run.set()

    def _is_echo(self, text: str) -> bool:
        """The user's words repeat the assistant's last reply, heard moments ago."""
        said, ended_s = self.last_reply
        recent = self.now() - ended_s < ECHO_GUARD_S
        return recent and repeats_assistant(text, said)

    # -- interruption --------------------------------------------------------------------
    def _stop_reply(self, reply: Reply) -> str:
        """Cancel a reply now; returns the part the user heard (kept in the memory)."""
        heard = reply.played_text(reply.gate.heard_s())  # before the flush: what left
        reply.cancel.set()
        reply.gate.cancel()
        reply.llm_may_run.set()
        if self.reply_task is not None and not self.reply_task.done():
            self.reply_task.cancel()
        self.flush_events()
        reply.done = True
        self.last_reply = (heard, self.now())
        if reply.user_text:
            self.conversation.add("user", reply.user_text)
            if heard:
                self.conversation.add("assistant", heard + " ...")
        return heard

    async def _barge_in(self, reply: Reply) -> None:
        """User speech during a reply: stop it within this frame, keep what was heard."""
        self.barge_ins += 1
        self._stop_reply(reply)
        await self.emit(TurnEvent("assistant", "end", reply.turn_id, interrupted=True))

    async def close(self) -> None:
        await super().close()
        for worker in self.engine.workers():
            worker.drop_session(self.session_id)
        self.engine.listening.drop_session(self.session_id)

    def interrupt(self) -> None:
        reply = self.reply
        if reply is not None and not reply.done and reply.gate.committed:
            self._stop_reply(reply)
            self.state.events.put_nowait(
                TurnEvent("assistant", "end", reply.turn_id, interrupted=True))
