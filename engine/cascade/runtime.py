"""What every call on one cascade engine shares, handed to each session explicitly: the
clock and settings, the worker threads, the loaded models and the factories a session needs,
and the engine's degrade level (read when a reply starts: it changes at run time).

The engine builds one :class:`CascadeRuntime` once its models are loaded; sessions use it
and never the engine itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omnicall.engine.cascade.asr import WhisperAsr
    from omnicall.engine.cascade.camera.looker import Looker
    from omnicall.engine.cascade.history import Conversation
    from omnicall.engine.cascade.language_model import LanguageModel
    from omnicall.engine.cascade.servers.asr_server import AsrServer
    from omnicall.engine.cascade.settings import CascadeSettings
    from omnicall.engine.cascade.tts import Tts
    from omnicall.engine.conversation.listener import ListenRuntime
    from omnicall.engine.degrade import Level
    from omnicall.engine.tools import ToolSpec
    from omnicall.engine.worker import ModelWorker
    from omnicall.media.clock import Clock


@dataclass(frozen=True)
class PartialTranscriber:
    """Where partial transcripts run: their own model copy and worker, or (without the copy)
    the final transcript's model on the think worker."""

    worker: ModelWorker
    asr: WhisperAsr


@dataclass(frozen=True)
class CascadeRuntime:
    """The shared parts of one cascade engine that its sessions use."""

    settings: CascadeSettings
    clock: Clock
    #: the VAD, its worker and the end-of-turn model every call's listener shares
    listening: ListenRuntime
    think_worker: ModelWorker  # the final ASR, the LLM, vision
    talk_worker: ModelWorker  # the voice
    asr: WhisperAsr  # the turn's final transcript
    partial: PartialTranscriber
    llm: LanguageModel
    #: the camera's look for a model that does not see (its own worker; None: the camera
    #: is not described)
    vision: Looker | None
    #: the voice for a new turn at the current level (None: text only)
    voice: Callable[[], Tts | None]
    #: a fresh conversation memory (the system prompt, the tools' prompt and examples)
    new_conversation: Callable[[list[ToolSpec] | None], Conversation]
    #: the engine's degrade level now
    level: Callable[[], Level]
    #: --asr-url: the server the turns' final transcripts come from (``asr`` stands in for
    #: it when it fails); None: ``asr`` hears them
    asr_server: AsrServer | None = None

    def drop_session(self, session_id: str) -> None:
        """Forget a closed session's waiting jobs, once on every worker it used."""
        eyes = () if self.vision is None else (self.vision.worker, self.vision.watch_worker)
        workers = {id(w): w for w in (self.think_worker, self.talk_worker,
                                      self.partial.worker, *eyes)}
        for worker in workers.values():
            worker.drop_session(session_id)
        self.listening.drop_session(session_id)
