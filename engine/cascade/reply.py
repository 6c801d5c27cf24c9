"""One assistant reply of a cascade call while it is made and heard: its gate (held while
speculative), the flags that stop its LLM and Talker, its text and where each clause's
sound lies in it, so the words the caller heard can be told from the seconds heard."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from omnicall.engine.cascade.pictures import Picture
from omnicall.engine.conversation.reply_gate import ReplyGate
from omnicall.engine.degrade import Level
from omnicall.engine.events import EngineEvent


@dataclass
class Reply:
    """A reply in the making (a turn's answer, or the greeting)."""

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
    #: the camera frames this turn's prompt carried (``--llm-vision``); a reply cancelled
    #: as speculative gives them back to the turn, which goes on
    pictures: tuple[Picture, ...] = ()
    clause_audio: list[tuple[str, float, float]] = field(default_factory=list)  # text, start, dur
    audio_s: float = 0.0  # made so far (released or held)
    done: bool = False

    def __post_init__(self) -> None:
        self.llm_may_run.set()

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

    async def out(self, event: EngineEvent) -> None:
        """Send ``event`` through the gate; a cancelled reply ends here (CancelledError)."""
        if self.cancel.is_set():
            raise asyncio.CancelledError
        await self.gate.out(event)

    def stop(self, void: bool = True) -> None:
        """Stop making the reply: its LLM and Talker end at their next step. ``void``:
        nothing more of it goes out either (False: a failed reply's error still does)."""
        self.cancel.set()
        if void:
            self.gate.cancel()
        self.llm_may_run.set()
        self.done = True
