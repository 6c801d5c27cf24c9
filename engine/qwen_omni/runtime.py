"""What every call on the native Qwen3-Omni engine shares, handed to each session.

The engine (:mod:`omnicall.engine.qwen_omni.engine`) loads and owns all of it and builds one
:class:`OmniRuntime` once its model is loaded; a session
(:mod:`omnicall.engine.qwen_omni.session`) gets that and nothing of the engine itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from omnicall.engine.cascade.asr import WhisperAsr
from omnicall.engine.conversation.listener import ListenRuntime
from omnicall.engine.degrade import Level
from omnicall.engine.qwen_omni.batcher import DecodeBatcher
from omnicall.engine.qwen_omni.codec import StreamingCode2Wav
from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.settings import OmniSettings
from omnicall.engine.qwen_omni.talker import Talker
from omnicall.engine.worker import ModelWorker
from omnicall.media.clock import Clock


@dataclass(frozen=True)
class OmniRuntime:
    settings: OmniSettings
    clock: Clock
    model: OmniModel
    worker: ModelWorker  # every model operation of every call, in order per call
    batcher: DecodeBatcher  # decode steps of the calls replying at once, batched
    listening: ListenRuntime  # the VAD, its worker and the end-of-turn model
    talker: Talker | None  # None: a text-only checkpoint
    codec: StreamingCode2Wav | None
    captions: WhisperAsr | None  # user captions (None: off)
    captions_worker: ModelWorker
    level: Callable[[], Level]  # the degrade ladder's level now (how a new turn is answered)

    def drop_session(self, session_id: str) -> None:
        """Forget a closed call's waiting jobs on the workers it used."""
        self.worker.drop_session(session_id)
        self.listening.drop_session(session_id)
