"""What a cascade reply needs while it is made, beside its life (which is the conversation
layer's :class:`~omnicall.engine.conversation.replies.Reply`): the turn it answers (audio,
typed words, or fixed words to say; its final transcript when already under way), the degrade
level it is answered at, what Whisper heard and in which language, the camera frames its
prompt carried, and the flag that pauses the LLM while the Talker speaks."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from omnicall.engine.cascade.camera.pictures import Picture
from omnicall.engine.cascade.camera.sight import Sight
from omnicall.engine.cascade.hearing import FinalTranscript
from omnicall.engine.conversation.replies import Reply
from omnicall.engine.degrade import Level
from omnicall.media.resample import Int16Array


@dataclass
class ReplyWork:
    level: Level = Level.NORMAL  # the degrade level this reply is answered at
    samples: Int16Array = field(default_factory=lambda: np.zeros(0, np.int16))  # the turn
    typed: str = ""  # typed words answered with (or instead of) the audio
    script: str = ""  # fixed words said as they are, no ASR or LLM (the greeting)
    #: the client ended this turn (push-to-talk, a Realtime client's commit): said to the
    #: assistant, whatever the camera or the wake phrase would say
    client_turn: bool = False
    #: cleared while the Talker synthesizes: the LLM (far ahead of speech anyway) pauses so
    #: TTS gets the cores and the next clause is heard sooner
    llm_may_run: threading.Event = field(default_factory=threading.Event)
    user_text: str = ""  # what the reply answers (heard and typed)
    language: str = ""  # what Whisper heard the user speak (--language auto)
    #: the camera frames this turn's prompt carried (``--llm-vision``); a reply cancelled
    #: as speculative gives them back to the turn, which goes on
    pictures: tuple[Picture, ...] = ()
    #: the offline look that stands for this turn's frame, until the turn is confirmed
    #: (then the next turn's 'what changed' is measured from it)
    sight: Sight | None = None
    task: asyncio.Task[Any] | None = None  # what makes it
    #: its turn's final transcript, started at the lull of the pause it started at
    early: asyncio.Task[FinalTranscript] | None = None

    def __post_init__(self) -> None:
        self.llm_may_run.set()


CascadeReply = Reply[ReplyWork]
