"""The answer path of one cascade call: a turn's audio (and typed words) -> the final
transcript (ASR, think worker) -> the reply text (LLM, think worker), with at most one tool
call on the way -> speech (the :class:`~omnicall.engine.cascade.talker.Talker`, talk worker).

It runs as the reply's task; everything it sends goes through the reply's gate, so a reply
started speculatively (at the pause) is held back until the turn is confirmed, and nothing of
it is seen when it is cancelled. The :class:`Answerer` also holds what the prompt is made of
(the conversation memory, the camera facts, the tools) and the echo guard.

What the answer is told of the camera is the :class:`~omnicall.engine.cascade.camera.camera_view.
CameraView`'s (a question about the camera may be answered there, from the offline look's
facts alone); with ``--wake-phrase`` a turn not said to the assistant is not answered
(:mod:`~omnicall.engine.conversation.wake`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from omnicall.engine.cascade.camera.camera_view import CameraView
from omnicall.engine.cascade.camera.pictures import Picture
from omnicall.engine.cascade.clauses import ClauseSplitter
from omnicall.engine.cascade.hearing import FinalTranscript, Hearing
from omnicall.engine.cascade.language_model import MediaRefused, SpokenAudio, ToolRequest
from omnicall.engine.cascade.reply import CascadeReply, ReplyWork
from omnicall.engine.cascade.runtime import CascadeRuntime
from omnicall.engine.cascade.talker import Clauses, Talker
from omnicall.engine.cascade.voice_pick import VoicePick
from omnicall.engine.conversation.addressee import Addressee
from omnicall.engine.conversation.echo_guard import repeats_assistant
from omnicall.engine.conversation.replies import EventSink, Replies
from omnicall.engine.conversation.wake import WakeGate
from omnicall.engine.degrade import Level
from omnicall.engine.events import (
    AssistantText,
    EngineError,
    EngineEvent,
    StageTiming,
    ToolCall,
    TurnEvent,
    UserTranscript,
)
from omnicall.engine.languages import reply_language_note
from omnicall.engine.tasks import TaskOwner
from omnicall.engine.tools import APOLOGY, ToolOutcome, ToolRunner, ToolSpec, new_call_id
from omnicall.engine.worker import WorkerBusy
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ

if TYPE_CHECKING:
    from omnicall.engine.cascade.history import Conversation
    from omnicall.engine.cascade.tts import Tts
    from omnicall.media.playout import Playout

logger = logging.getLogger(__name__)

FALLBACK_REPLY_TOKENS = 24
CLAUSE_QUEUE = 16  # clauses the LLM may be ahead of the Talker
PLAYOUT_END_LEAD_S = 0.1  # end the turn this much before playout ends (egress marks the tail)
FILLER_AFTER_S = 0.7  # a tool still running after this: the assistant says a filler line
ECHO_GUARD_S = 3.0  # after a reply played out, a repeat of it is treated as echo
NOT_CAUGHT = "Sorry, I did not catch that."


class Answerer:
    """How one call answers its turns, and what it remembers of them: the cascade's part of
    a reply's life (:class:`~omnicall.engine.conversation.replies.ReplyMaker`), whose
    :attr:`replies` the session drives."""

    def __init__(self, runtime: CascadeRuntime, session_id: str, tasks: TaskOwner,
                 sink: EventSink, tools: ToolRunner | None,
                 new_splitter: Callable[[], ClauseSplitter],
                 playout: Playout | None = None,
                 on_facts: Callable[[], None] = lambda: None, addressee: str = "auto") -> None:
        """``on_facts``: the camera facts for the prompt changed while the caller speaks
        (the session prefills the prompt again); ``addressee``: who the call's assistant
        talks to (:class:`~omnicall.engine.base.SessionOptions`)."""
        self.runtime = runtime
        self.session_id = session_id
        self.tasks = tasks  # the session's: the Talker's and tools' tasks end with it
        self._emit = sink.emit  # straight out, past any gate (a failed reply's last events)
        self.replies: Replies[ReplyWork] = Replies(self, sink, runtime.clock, playout)
        self.tools = tools
        self.new_splitter = new_splitter  # how reply text is cut into clauses
        self.conversation: Conversation = runtime.new_conversation(self.tool_specs())
        #: what the turns' answers are told of the camera (the offline look's facts, or the
        #: frames for a model that sees)
        self.camera = CameraView(runtime, session_id, tasks, on_facts)
        self.last_reply: tuple[str, float] = ("", float("-inf"))  # text, playout end (clock)
        self.echoes_ignored = 0
        self.talker = Talker(runtime.talk_worker, runtime.clock, session_id)
        self.hearing = Hearing(runtime, session_id, tasks)  # final transcripts: local or --asr-url
        #: who is talking to the assistant: the camera's engaged person (its frames, watched
        #: by the session), or --wake-phrase's turns
        self.addressee = Addressee(addressee)
        self.wake = WakeGate(runtime.settings.wake_phrase if addressee in ("auto", "wake")
                             else "", runtime.settings.wake_open_s)
        self.not_addressed = 0  # turns not said to the assistant (no wake phrase, closed)

    def now(self) -> float:
        return self.runtime.clock.now()

    # -- what the prompt is made of ------------------------------------------------------
    def tool_specs(self) -> list[ToolSpec]:
        return self.tools.specs() if self.tools is not None else []

    def set_tools(self, tools: ToolRunner | None) -> None:
        self.tools = tools
        fresh = self.runtime.new_conversation(self.tool_specs())
        self.conversation.tools, self.conversation.shots = fresh.tools, fresh.shots

    def set_instructions(self, text: str) -> None:
        """The system prompt ('' = the engine's)."""
        self.conversation.system_prompt = text or \
            self.runtime.new_conversation(None).system_prompt

    def prompt(self, user_text: str, language: str, pictures: tuple[Picture, ...] = (),
               audio: Int16Array | None = None) -> list[dict[str, Any]]:
        """The messages that answer ``user_text`` (heard in ``language``) now, with the
        turn's camera ``pictures`` (then the model sees for itself: no face sentence) and,
        for a model that hears, the turn's ``audio``."""
        self.conversation.trim(self.runtime.llm.count_tokens)
        note = reply_language_note(language) if (
            self.runtime.settings.language == "auto" and language not in ("", "en")) else ""
        return self.conversation.messages(self.camera.prompt_facts(), user_text, note,
                                          pictures, audio)

    # -- a reply's life (the conversation layer's ReplyMaker) ------------------------------
    def start(self, reply: CascadeReply) -> None:
        """Make ``reply`` (new from :attr:`replies`), beside the listening."""
        work = reply.work
        if work.script:
            work.task = self.tasks.spawn("greeting", self.say(reply))
        else:
            work.task = self.tasks.spawn(f"reply-{reply.turn_id}", self.answer(reply))

    def stop_reply(self, reply: CascadeReply) -> None:
        """Its LLM and Talker end at their next step; a speculation's frames go back to the
        turn, which goes on."""
        work = reply.work
        if work.pictures and not reply.gate.committed and not reply.cut:
            self.camera.eyes.reopen()
        work.llm_may_run.set()
        if work.early is not None and not work.early.done():
            work.early.cancel()  # its reply never awaited it
        if work.task is not None and not work.task.done() \
                and work.task is not asyncio.current_task():
            work.task.cancel()

    def remember_reply(self, reply: CascadeReply) -> None:
        """The turn and the reply into the memory: whole, or the words of the part the
        caller heard (a late truncation rewrites the reply kept whole)."""
        if reply.heard_ms is None:
            played_out_at = reply.gate.played_out_at()
            self.last_reply = (reply.text, played_out_at if played_out_at is not None
                               else self.now())
            if reply.work.user_text:
                self._remember_user(reply)
            self.conversation.add("assistant", reply.text)
            return
        heard = reply.heard_text(reply.heard_ms / 1000)
        if reply.remembered:
            self.conversation.replace_last("assistant", heard + " ..." if heard else "")
            return
        self.last_reply = (heard, self.now())
        if reply.work.user_text:
            self._remember_user(reply)
            if heard:
                self.conversation.add("assistant", heard + " ...")

    # -- a turn's answer -------------------------------------------------------------------
    async def answer(self, reply: CascadeReply) -> None:
        """Answer the turn of ``reply.work`` (its audio and typed words); a model failure is
        reported and ends the reply, and the call goes on."""
        try:
            await self._answer(reply, reply.work.samples, reply.work.typed)
        except Exception as exc:  # any model failure: report (logged below), end the turn
            # A model failed mid-turn (third-party libraries raise all kinds): say so, end the
            # turn cleanly so the page is never stuck "speaking", keep the session.
            logger.exception("reply %d failed", reply.turn_id)
            self.replies.fail(reply)
            await self._out_anyway(reply, EngineError(f"the assistant failed to answer: {exc}"))
            await self._out_anyway(reply, TurnEvent("assistant", "end", reply.turn_id,
                                                    interrupted=True))

    async def _out_anyway(self, reply: CascadeReply, event: EngineEvent) -> None:
        """Deliver an event of a failed reply once the turn is confirmed."""
        await reply.gate.released.wait()
        await self._emit(event)

    async def _answer(self, reply: CascadeReply, samples: Int16Array, typed: str) -> None:
        heard = await self._transcribe(reply, samples) if len(samples) else ""
        if heard is None:
            reply.done = True
            return
        text = " ".join(t for t in (heard, typed) if t)
        reply.work.user_text = text
        await reply.out(UserTranscript(text, final=True, turn_id=reply.turn_id))
        if not text:
            reply.done = True
            return
        await reply.out(TurnEvent("assistant", "start", reply.turn_id))
        clauses: Clauses = asyncio.Queue(maxsize=CLAUSE_QUEUE)
        talker = self.tasks.spawn(f"talk-{reply.turn_id}",
                                  self.talker.speak(reply, self._voice(reply), clauses))
        try:
            await self._think(reply, text, clauses, samples)
            await talker
        finally:
            if not talker.done():
                talker.cancel()
        await reply.gate.released.wait()  # a reply that finished inside the hangover
        await self.replies.play_out(reply, PLAYOUT_END_LEAD_S)
        await self.replies.end(reply)

    def _voice(self, reply: CascadeReply) -> Tts | None:
        """The voice for ``reply`` (None: text first, the Talker is paused)."""
        return self.runtime.voice() if reply.work.level != Level.TEXT_FIRST else None

    async def say(self, reply: CascadeReply) -> None:
        """Speak ``reply.text`` as the assistant's turn (no ASR, no LLM): the greeting."""
        await reply.out(TurnEvent("assistant", "start", reply.turn_id))
        await reply.out(AssistantText(reply.text, reply.turn_id))
        splitter = self.new_splitter()
        parts = [c for c in [*splitter.feed(reply.text), splitter.flush()] if c]
        clauses: Clauses = asyncio.Queue(maxsize=len(parts) + 1)
        for clause in parts:
            clauses.put_nowait(clause)
        clauses.put_nowait(None)
        await self.talker.speak(reply, self._voice(reply), clauses)
        await self.replies.play_out(reply, PLAYOUT_END_LEAD_S)
        await self.replies.end(reply)

    # -- hearing ---------------------------------------------------------------------------
    async def _transcribe(self, reply: CascadeReply, samples: Int16Array) -> str | None:
        """The final transcript of a turn (None: not to be answered)."""
        asked_at = self.now()
        try:
            heard = await self._heard(reply, samples)
        except WorkerBusy:
            await reply.out(EngineError("busy: could not transcribe that turn"))
            return None
        text, started_at, reply.work.language = heard.text, heard.started_at, heard.language
        # what people said stays out of the default log (privacy): DEBUG only
        # waited < 0: it started at the lull, before the reply asked for it
        logger.info("turn %d: ASR (%s) of %.1f s took %.0f ms (waited %.0f ms)",
                    reply.turn_id, heard.model, len(samples) / INPUT_RATE_HZ,
                    (self.now() - started_at) * 1000, (started_at - asked_at) * 1000)
        logger.debug("turn %d: heard %r", reply.turn_id, text)
        if heard.notice:  # straight out: true of the server whether this reply goes or not
            await self._emit(EngineError(heard.notice))
        if text and self._is_echo(text):
            logger.info("turn %d: the transcript repeats the assistant; ignored "
                        "as echo", reply.turn_id)
            self.echoes_ignored += 1
            return None
        client = reply.work.client_turn  # the client said it was for the assistant
        if text and not client and \
                not self.addressee.addressed(self.addressee.turn_started_s, started_at):
            logger.info("turn %d: no one facing the camera was talking; not "
                        "answered", reply.turn_id)
            self.not_addressed += 1
            return None
        addressed = self.wake.heard(text, self.now(), self.last_reply[1]) \
            if text and not client else text
        if addressed is None:
            logger.info("turn %d: not said to the assistant (no wake phrase); "
                        "not answered", reply.turn_id)
            self.not_addressed += 1
            return None
        text = addressed
        await reply.out(StageTiming(reply.turn_id, "asr_start", started_at))
        await reply.out(StageTiming(reply.turn_id, "asr_done", self.now()))
        return text

    async def _heard(self, reply: CascadeReply, samples: Int16Array) -> FinalTranscript:
        """The turn's final transcript: the one started at the lull of the pause that
        started ``reply`` (:meth:`Hearing.start_early`), else of ``samples`` now."""
        early = reply.work.early
        if early is not None and not early.cancelled():
            try:
                return await early
            except WorkerBusy:
                logger.debug("turn %d: the transcript started early found the ASR busy",
                             reply.turn_id)
        return await self.hearing.final(samples)

    def _is_echo(self, text: str) -> bool:
        """The user's words repeat the assistant's last reply, heard moments ago."""
        said, ended_s = self.last_reply
        recent = self.now() - ended_s < ECHO_GUARD_S
        return recent and repeats_assistant(text, said)

    def _remember_user(self, reply: CascadeReply) -> None:
        """The user's turn into the memory, with its pictures."""
        self.conversation.add("user", reply.work.user_text, reply.work.pictures)

    # -- thinking --------------------------------------------------------------------------
    async def _tell_refusal(self, reply: CascadeReply) -> None:
        if self.camera.eyes.tell_refusal():
            await reply.out(EngineError(
                "the language model does not take camera images or audio; it is told what "
                "the camera shows and what was said in words instead"))

    async def _think(self, reply: CascadeReply, user_text: str, clauses: Clauses,
                     samples: Int16Array | None = None) -> None:
        """Generate the reply (a tool call first, when the model picks one) into captions
        and the Talker's clause queue; with ``--llm-audio-in`` the model hears ``samples``
        (the turn's speech) instead of reading the transcript."""
        llm = self.runtime.llm
        await self._tell_refusal(reply)  # an earlier call found the server refuses media
        sight = await self.camera.look(reply, user_text, self.conversation)
        direct = self.camera.sight_reply(user_text, reply.work.language, sight)
        if direct is not None:  # a camera question: the facts answer it, the model is not asked
            await self._say_more(reply, direct, clauses)
            await clauses.put(None)
            return
        audio = samples if llm.hears and samples is not None and len(samples) else None
        messages = self.prompt(user_text, reply.work.language, reply.work.pictures, audio)
        splitter = self.new_splitter()
        pick = VoicePick(llm.speaks and self._voice(reply) is not None)
        try:
            request = await self._generate(reply, messages, self.tool_specs(), splitter,
                                           clauses, pick)
        except MediaRefused as exc:  # a server without vision (or ears): words instead
            self.camera.eyes.refused(str(exc))
            await self._tell_refusal(reply)
            reply.work.pictures = ()
            messages = self.prompt(user_text, reply.work.language)
            request = await self._generate(reply, messages, self.tool_specs(), splitter,
                                           clauses, pick)
        if request is not None:
            outcome = await self._call_tool(reply, request, clauses)
            if outcome.ok:
                messages += llm.tool_result_messages(request, outcome.output)
                await self._generate(reply, messages, [], splitter, clauses, pick,
                                     greedy=True)
            else:  # an error or time-out: a spoken apology, never a dead call
                await self._say_more(reply, APOLOGY, clauses)
        rest = splitter.flush()
        for clause in [*pick.clauses([rest] if rest else [], self.now()), *pick.end()]:
            await clauses.put(clause)
        if not reply.text.strip():
            await self._say_more(reply, NOT_CAUGHT, clauses)
        await clauses.put(None)

    async def _say_more(self, reply: CascadeReply, text: str,
                        clauses: Clauses) -> None:
        """Fixed words (a filler, an apology) spoken as part of the reply."""
        sep = " " if reply.text and not reply.text.endswith(" ") else ""
        reply.text += sep + text
        await reply.out(AssistantText(sep + text, reply.turn_id))
        await clauses.put(text)

    async def _generate(self, reply: CascadeReply, messages: list[dict[str, Any]],
                        specs: list[ToolSpec], splitter: ClauseSplitter,
                        clauses: Clauses, pick: VoicePick, greedy: bool = False
                        ) -> ToolRequest | None:
        """One LLM pass on the think worker; text goes out as it comes, a tool request is
        returned (the pass ends there)."""
        loop = asyncio.get_running_loop()
        # unbounded by size, bounded by the reply's token cap (the worker thread cannot wait)
        items: asyncio.Queue[str | ToolRequest | SpokenAudio | None] = asyncio.Queue()
        llm = self.runtime.llm
        max_tokens = FALLBACK_REPLY_TOKENS if reply.work.level == Level.FALLBACK else None

        options: dict[str, Any] = {"tools": specs} if specs else {}
        if greedy:
            options["greedy"] = True

        def generate() -> None:  # on the think worker thread
            try:
                for item in llm.stream(messages, reply.cancel, max_tokens, **options):
                    loop.call_soon_threadsafe(items.put_nowait, item)
                    reply.work.llm_may_run.wait(timeout=2.0)
                    if reply.spans:
                        llm.cruise()  # the first clause is out: a core back to the others
            finally:
                loop.call_soon_threadsafe(items.put_nowait, None)

        job = asyncio.ensure_future(self.runtime.think_worker.run(generate,
                                                                  session=self.session_id))
        request: ToolRequest | None = None
        try:
            while (item := await items.get()) is not None:
                if isinstance(item, ToolRequest):
                    request = item
                    continue
                if isinstance(item, SpokenAudio):  # the server's own voice
                    if pick.audio():
                        await clauses.put(item)
                    continue
                if not reply.text:
                    await reply.out(StageTiming(reply.turn_id, "llm_first_token", self.now()))
                reply.text += item
                await reply.out(AssistantText(item, reply.turn_id))
                for clause in pick.clauses(splitter.feed(item), self.now()):
                    await clauses.put(clause)
            await job
        finally:
            if not job.done():  # cancelled mid-reply: stop generating at the next token
                reply.cancel.set()
        return request

    # -- tools -----------------------------------------------------------------------------
    async def _call_tool(self, reply: CascadeReply, request: ToolRequest,
                         clauses: Clauses) -> ToolOutcome:
        """Run a tool (through the session's runner); after FILLER_AFTER_S a short filler
        line is spoken; past the runner's time limit the call counts as failed."""
        tools = self.tools
        assert tools is not None
        if not tools.speculative(request.name):  # a tool that may act waits for the turn's end
            await reply.gate.released.wait()
        await reply.out(StageTiming(reply.turn_id, "tool_start", self.now()))
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
        await reply.out(StageTiming(reply.turn_id, "tool_done", self.now()))
        await reply.out(ToolCall(reply.turn_id, call_id, request.name, request.arguments,
                                 outcome.output, outcome.error, outcome.ms))
        return outcome
