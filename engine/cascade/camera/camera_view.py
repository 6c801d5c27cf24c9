"""What one cascade call's answers are told of the camera.

With ``--llm-vision`` the turn's frames go into the user's message (:class:`~omnicall.engine.
cascade.eyes.Eyes`, the shared frame policy); without a model that sees, each turn's frame
gets the offline look, done while the caller speaks (:mod:`~omnicall.engine.cascade.
look_ahead`), whose facts go to the model as a short note (:attr:`CameraView.facts`), and a
question about the camera is answered from those facts alone
(:mod:`~omnicall.engine.cascade.camera.sight_answer`), so the small model never guesses what it
cannot see. The page is shown a thumbnail of the frame (and the facts said).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from omnicall.engine.cascade.camera.eyes import Eyes, described_event
from omnicall.engine.cascade.camera.look_ahead import LookAhead
from omnicall.engine.cascade.camera.pictures import Picture
from omnicall.engine.cascade.camera.scene_change import compared
from omnicall.engine.cascade.camera.sight import Fact, Sight, note
from omnicall.engine.cascade.camera.sight_answer import READ_KINDS, question_kind
from omnicall.engine.cascade.camera.sight_answer import answer as sight_answer
from omnicall.engine.cascade.reply import CascadeReply
from omnicall.engine.cascade.runtime import CascadeRuntime
from omnicall.engine.conversation.camera import seen_event
from omnicall.engine.conversation.frame_policy import asks_to_look
from omnicall.engine.degrade import Level
from omnicall.engine.events import StageTiming
from omnicall.engine.tasks import TaskOwner
from omnicall.media.video_ring import RgbImage

if TYPE_CHECKING:
    from omnicall.engine.cascade.history import Conversation


class CameraView:
    """One call's camera as its answers see it (see the module docstring)."""

    def __init__(self, runtime: CascadeRuntime, session_id: str, tasks: TaskOwner,
                 on_facts: Callable[[], None] = lambda: None) -> None:
        """``on_facts``: the facts for the prompt changed while the caller speaks (the
        session prefills the prompt again)."""
        self.runtime = runtime
        self.session_id = session_id
        self.facts = ""  # what the camera shows, for the prompt
        self.facts_image: RgbImage | None = None  # the frame ``facts`` describe
        settings = runtime.settings
        llm = runtime.llm
        self.eyes = Eyes(settings.camera, llm,  # --llm-vision's camera
                         media_wanted=(settings.llm_vision or settings.llm_audio_in
                                       or llm.sees or llm.hears))
        self.on_facts = on_facts
        #: the offline look, done while the caller speaks (None: no looker)
        self.ahead = None if runtime.vision is None else LookAhead(
            runtime.vision, session_id, tasks, self._seen_ahead)

    def now(self) -> float:
        return self.runtime.clock.now()

    def prompt_facts(self) -> str:
        """The note for the prompt ('' when the model sees the frames itself)."""
        return "" if self.eyes.active else self.facts

    async def look(self, reply: CascadeReply, user_text: str,
                   conversation: Conversation) -> Sight | None:
        """The turn's camera frames for its prompt (``--llm-vision``), or (a model that does
        not see) the offline look at the turn's frame, whose facts the prompt gets; the page
        shows a thumbnail of it (and the facts said)."""
        language = self._look_language(reply.work.language)  # typed: the setting's
        if not self.eyes.active:
            return await self._look_offline(reply, user_text, language)
        pictures, last = self.eyes.end_turn(user_text, language)
        retired = self.eyes.retire()  # past the bound: a note, in the memory and this turn
        if retired:
            conversation.retire(retired)
            pictures = tuple(Picture(p.image_id, "") if p.image_id in retired else p
                             for p in pictures)
        reply.work.pictures = pictures
        if last is not None:
            await reply.out(seen_event(reply.turn_id, last))
        return None

    def look_ahead(self, image: RgbImage, at_s: float, speaking: bool, heard: str) -> None:
        """A camera frame outside a pause (``speaking``: in the caller's turn; ``heard``: its
        words so far): the offline look at it, when due
        (:mod:`~omnicall.engine.cascade.camera.look_ahead`)."""
        if self.ahead is None or self.eyes.active or self.runtime.level() == Level.FALLBACK:
            return
        language = self._look_language("")
        read = asks_to_look(heard, language) or question_kind(heard, language) in READ_KINDS
        self.ahead.offer(image, at_s, self.eyes.glance, speaking, read)

    def _seen_ahead(self, sight: Sight) -> None:
        """A look ahead: its facts go into the prompt the session prefills now."""
        facts = note(self._said(sight), sight.unread)
        if facts != self.facts:
            self.facts = facts
            self.on_facts()

    def turn_started(self) -> None:
        """The caller started a turn: the note its prompt starts from is the kept look's,
        compared with the reference the last confirmed turn left (the session prefills it
        next)."""
        kept = None if self.ahead is None else self.ahead.done
        if kept is not None and not self.eyes.active:
            sight = compared(kept.sight, self.eyes.glance)
            self.facts = note(self._said(sight), sight.unread)

    def _said(self, sight: Sight) -> tuple[Fact, ...]:
        """The facts of ``sight`` sure enough to be said (``--camera-fact-confidence``)."""
        return sight.said(self.runtime.settings.camera_fact_confidence)

    def _look_language(self, language: str) -> str:
        language = language or self.runtime.settings.language
        return "en" if language == "auto" else language

    async def _look_offline(self, reply: CascadeReply, user_text: str,
                            language: str) -> Sight | None:
        """The frame policy's pick for the turn, and the look that stands for it: done
        while the caller spoke when the scene is the same (its text read now if the words
        ask for it and it was not), else looked at now, on the eyes worker; the facts said
        become :attr:`facts`. None: no look (no camera, the lighter level, or the worker
        full or late)."""
        looker, ahead = self.runtime.vision, self.ahead
        if looker is None or ahead is None or reply.work.level == Level.FALLBACK:
            if self.facts_image is not None:  # a face sentence set from outside
                await reply.out(described_event(reply.turn_id, self.facts_image))
            return None
        sighting = self.eyes.pick(user_text, language)
        self.eyes.retire()  # the ids of looked-at frames: only the bound's bookkeeping
        if sighting is None:
            self.facts = ""
            return None
        selection = sighting.selection
        read = selection.sharp or question_kind(user_text, language) in READ_KINDS
        started_at = self.now()
        sight, waited = await ahead.for_turn(selection.image, self.eyes.media_s,
                                             self.eyes.glance, read)
        if waited:  # the turn waited for its look (the view changed, or text to read)
            await reply.out(StageTiming(reply.turn_id, "look_start", started_at))
            await reply.out(StageTiming(reply.turn_id, "look_done", self.now()))
        if sight is None:
            self.facts = ""
            return None
        reply.work.sight = sight
        self.keep_look(reply)
        said = self._said(sight)
        self.facts = note(said, sight.unread)
        await reply.out(seen_event(reply.turn_id, sighting, tuple(f.text for f in said)))
        return sight

    def keep_look(self, reply: CascadeReply) -> None:
        """The turn of ``reply`` is confirmed: its look is the one the next turn's 'what
        changed' is measured from (a speculation's look waits for this, and is dropped with
        it); the next turn's note follows at its start (:meth:`turn_started`)."""
        sight = reply.work.sight
        if sight is None or not reply.gate.committed:
            return
        self.eyes.glance = sight.glance
        reply.work.sight = None

    def sight_reply(self, user_text: str, language: str, sight: Sight | None) -> str | None:
        """A question about the camera that the model cannot see: the reply from the offline
        look's facts (None: the model answers)."""
        if self.eyes.active or self.runtime.vision is None:
            return None
        language = self._look_language(language)
        if self.eyes.camera.latest is None:
            if question_kind(user_text, language) is None:
                return None
            return "I can't see anything: your camera is off or not shared with me."
        return sight_answer(user_text, sight, self.runtime.settings.camera_fact_confidence,
                            language)

