"""The end-of-turn model as every engine uses it (cascade, qwen-omni, the remote engine's
local turn mode): with ``--turn-model smart`` each pause the turn detector reports is judged
by Smart Turn v3.2 on its own worker thread, and the verdict sets that pause's hangover
(:meth:`~omnicall.engine.conversation.turns.TurnDetector.judge`); with ``fixed`` (or when the
model is busy) the fixed hangover applies.

The model module (onnxruntime, transformers' feature extractor) is imported only when the
model is loaded, so engines that do not use it pay nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from omnicall.engine.bundled_models import ModelMissing
from omnicall.engine.conversation.settings import TURN_MODELS
from omnicall.engine.conversation.turns import TurnConfig, TurnDetector
from omnicall.engine.dequantize import NotQdq
from omnicall.engine.errors import EngineLoadError
from omnicall.engine.worker import ModelWorker, WorkerBusy
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ

if TYPE_CHECKING:
    from omnicall.engine.smart_turn import SmartTurn

logger = logging.getLogger(__name__)

MAX_VERDICTS = 16


def turn_config(hangover_ms: int, turn_model: str) -> TurnConfig:
    """The turn detector's settings: with the model, ``hangover_ms`` is the fallback and a
    "finished" verdict never waits longer than it."""
    config = TurnConfig(hangover_ms=hangover_ms)
    if turn_model == "smart":
        config.finished_ms = min(config.finished_ms, hangover_ms)
    return config


class TurnJudge:
    def __init__(self, turn_model: str) -> None:
        if turn_model not in TURN_MODELS:
            raise ValueError(f"turn model {turn_model!r}: use one of {', '.join(TURN_MODELS)}")
        self.enabled = turn_model == "smart"
        self.worker = ModelWorker("turn", max_pending=64)
        self.model: SmartTurn | None = None
        self.window_samples = 0  # the audio the model reads (its last seconds)
        self.skipped = 0  # pauses left to the fixed hangover (the worker was full)

    def load(self) -> None:
        """Load and warm the model (blocking: call it where the engine loads its models).
        Raises :class:`EngineLoadError` naming the fix when it cannot."""
        if not self.enabled or self.model is not None:
            return
        try:
            from omnicall.engine.smart_turn import WINDOW_SAMPLES, SmartTurn

            model = SmartTurn()
        except (ModelMissing, ImportError, OSError, NotQdq) as exc:
            raise EngineLoadError(f"--turn-model smart: the end-of-turn model did not load: "
                                  f"{exc}") from exc
        noise = (np.random.default_rng(0).standard_normal(INPUT_RATE_HZ) * 300).astype(np.int16)
        model.probability(noise)  # the first call pays onnxruntime's set-up
        self.model, self.window_samples = model, WINDOW_SAMPLES

    async def judge(self, turns: TurnDetector, chunks: Sequence[Int16Array], session: str,
                    verdicts: list[float] | None = None) -> float | None:
        """Judge the current pause of ``turns`` from the utterance so far (16 kHz mono, in
        the chunks it arrived in; only the model's window of it is joined); the verdict
        (P(finished)) is also appended to ``verdicts``, which keeps the latest few. None: no
        model, or it was busy (the fixed hangover stays)."""
        if self.model is None:
            return None
        samples = self._window(chunks)
        try:
            finished: float = await self.worker.run(self.model.probability, samples,
                                                    session=session)
        except WorkerBusy:
            self.skipped += 1
            logger.debug("end-of-turn model busy; fixed hangover")
            return None
        turns.judge(finished)
        if verdicts is not None:
            verdicts.append(finished)
            del verdicts[:-MAX_VERDICTS]
        return finished

    def _window(self, chunks: Sequence[Int16Array]) -> Int16Array:
        tail: list[Int16Array] = []
        have = 0
        for chunk in reversed(chunks):
            if have >= self.window_samples:
                break
            tail.append(chunk)
            have += len(chunk)
        return np.concatenate(tail[::-1]) if tail else np.zeros(0, np.int16)

    def drop_session(self, session: str) -> None:
        self.worker.drop_session(session)

    def close(self) -> None:
        self.worker.close()
