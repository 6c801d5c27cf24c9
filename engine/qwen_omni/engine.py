"""The native Qwen3-Omni engine: one shared model, one model worker, per-call state.

``start()`` loads the checkpoint (``from_pretrained``), measures the codec geometry and runs
one short streamed reply as warm-up before the first call is accepted.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from omnicall.engine.base import Engine, EngineSession, SessionOptions
from omnicall.engine.cascade.asr import WhisperAsr
from omnicall.engine.conversation.listener import ListenRuntime
from omnicall.engine.errors import EngineLoadError
from omnicall.engine.qwen_omni import prompt
from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.batcher import DecodeBatcher
from omnicall.engine.qwen_omni.codec import StreamingCode2Wav
from omnicall.engine.qwen_omni.model import LoadOptions, OmniModel, load_omni
from omnicall.engine.qwen_omni.reply import ReplyOptions, ReplyStream
from omnicall.engine.qwen_omni.runtime import OmniRuntime
from omnicall.engine.qwen_omni.session import QwenOmniSession
from omnicall.engine.qwen_omni.settings import OmniSettings
from omnicall.engine.qwen_omni.talker import Talker
from omnicall.engine.worker import ModelWorker
from omnicall.media.clock import Clock, MonotonicClock

logger = logging.getLogger(__name__)


class QwenOmniEngine(Engine):
    name = "qwen-omni"
    realtime_output = False

    def __init__(self, settings: OmniSettings, clock: Clock | None = None) -> None:
        if not settings.model:
            raise EngineLoadError("the qwen-omni engine needs --model PATH (a local Qwen3-Omni "
                                  "checkpoint directory)")
        self.settings = settings
        self.clock = clock or MonotonicClock()
        #: the VAD, its worker and the end-of-turn model every call's listener shares
        self.listening = ListenRuntime(settings.turns, self.clock)
        self.worker = ModelWorker("omni", max_pending=256)
        self.captions_worker = ModelWorker("captions", max_pending=16)
        self.batcher = DecodeBatcher(self.worker)
        self.model: OmniModel
        self.talker: Talker | None = None
        self.codec: StreamingCode2Wav | None = None
        self.captions: WhisperAsr | None = None
        self._runtime: OmniRuntime | None = None
        self.warmup_s = 0.0

    @property
    def runtime(self) -> OmniRuntime:
        """What each session gets (built once the model is loaded)."""
        if self._runtime is None:
            raise RuntimeError("the qwen-omni engine was not started")
        return self._runtime

    def _load(self) -> None:
        s = self.settings
        self.model = load_omni(Path(s.model), LoadOptions(
            device=s.device, dtype=s.dtype, attention=s.attention,
            load_in_4bit=s.load_in_4bit, text_only=s.text_only))
        if self.model.has_talker:
            self.talker = Talker(self.model)
            assert self.model.code2wav is not None
            self.codec = StreamingCode2Wav(self.model.code2wav)
        self.listening.load()
        if s.captions:
            try:
                self.captions = WhisperAsr(threads=1)
            except (ImportError, OSError, RuntimeError) as exc:
                logger.warning("user captions off: %s", exc)
        self._runtime = OmniRuntime(
            settings=s, clock=self.clock, model=self.model, worker=self.worker,
            batcher=self.batcher, listening=self.listening, talker=self.talker,
            codec=self.codec, captions=self.captions, captions_worker=self.captions_worker,
            level=lambda: self.level)
        started = time.monotonic()
        self._warm_up()
        self.warmup_s = time.monotonic() - started

    def _warm_up(self) -> None:
        """One short streamed reply (a camera frame and audio in, text + audio out) before
        any call."""
        m = self.model
        state = th.ThinkerState()
        noise = (np.random.default_rng(0).standard_normal(16_000) * 300).astype(np.int16)
        frame = np.full((336, 448, 3), 128, np.uint8)
        prompt.append_ids(m, state, prompt.user_open_ids(m))
        prompt.append_frame(m, state, frame, self.settings.camera.size,
                            self.settings.video_max_pixels, image_id=0)
        prompt.append_audio(m, state, noise)
        prompt.close_user_turn(m, state)
        stream = ReplyStream(m, state, ReplyOptions(max_new_tokens=4, max_frames=4),
                             self.talker, self.codec)
        while not stream.done:
            stream.step()

    async def start(self) -> None:
        logger.info("loading Qwen3-Omni from %s", self.settings.model)
        await self.worker.run(self._load)
        logger.info("qwen-omni engine ready on %s (%s); warm-up %.2f s", self.model.device,
                    self.model.dtype, self.warmup_s)

    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        return QwenOmniSession(session_id, options, self.runtime)

    def admission_problem(self, active_sessions: int) -> str | None:
        if active_sessions >= self.settings.max_calls:
            return f"this model server answers {self.settings.max_calls} calls at a time"
        return None

    def queue_depths(self) -> dict[str, int]:
        return {w.name: w.pending for w in (self.worker, self.listening.worker,
                                            self.captions_worker)}

    async def close(self) -> None:
        await self.batcher.close()
        for worker in (self.worker, self.captions_worker):
            worker.close()
        self.listening.close()
