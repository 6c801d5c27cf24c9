"""The end-of-turn model as the engines share it: settings, verdicts setting a pause's
hangover on real speech, and the fixed hangover whenever the model is off or busy."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from omnicall.engine.conversation.turn_judge import TurnJudge, turn_config
from omnicall.engine.conversation.turns import TurnDetector
from omnicall.engine.worker import ModelWorker
from tests.utils import PAUSED_QUESTION, piper_speech, splice_pause

SENTENCE = PAUSED_QUESTION


@pytest.fixture(scope="module")
def judge() -> Iterator[TurnJudge]:
    judge = TurnJudge("smart")
    judge.load()
    yield judge
    judge.close()


def paused_detector(hangover_ms: int = 400, turn_model: str = "smart") -> TurnDetector:
    """A detector inside a pause (the state in which a verdict applies)."""
    turns = TurnDetector(turn_config(hangover_ms, turn_model))
    signals = [turns.feed(p) for p in [0.9] * 10 + [0.0] * 4]
    assert signals.count("speech_start") == 1 and "pause" in signals and turns.paused
    return turns


def chunked(audio: np.ndarray, samples: int = 1280) -> list[np.ndarray]:
    """As a call's utterance arrives: 80 ms units."""
    return [audio[i:i + samples] for i in range(0, len(audio), samples)]


def test_turn_config_keeps_the_fixed_hangover_as_the_ceiling_of_finished() -> None:
    assert turn_config(400, "smart").finished_ms == 300
    assert turn_config(250, "smart").finished_ms == 250  # never longer than the fallback
    assert turn_config(250, "fixed").hangover_ms == 250
    with pytest.raises(ValueError, match="turn model"):
        TurnJudge("psychic")


async def test_verdicts_set_the_pause_hangover(judge: TurnJudge) -> None:
    whole = piper_speech(SENTENCE, lead_s=0.3, tail_s=0.2)
    spliced, at = splice_pause(whole, 0.3)
    cut = spliced[:at + 3200]  # 200 ms into the mid-sentence pause

    turns, verdicts = paused_detector(), []
    assert await judge.judge(turns, [cut], "s", verdicts) is not None
    assert turns.hangover_ms == turns.config.unfinished_ms  # waits through the pause

    turns = paused_detector()
    await judge.judge(turns, chunked(whole), "s", verdicts)
    assert turns.hangover_ms == turns.config.finished_ms == 300  # answers sooner
    assert verdicts[0] < 0.5 < verdicts[1], verdicts


async def test_only_the_models_window_of_a_long_utterance_is_joined(judge: TurnJudge) -> None:
    """Units from the end up to the model's 8 s: the verdict is the model's on the whole."""
    assert judge.model is not None
    speech = piper_speech(SENTENCE)
    long = np.concatenate([np.zeros(16_000 * 12, np.int16), speech])
    window = judge._window(chunked(long))
    assert judge.window_samples <= len(window) < judge.window_samples + 1280
    assert np.array_equal(window, long[-len(window):])
    assert judge.model.probability(window) == judge.model.probability(long)
    assert len(judge._window([])) == 0


async def test_off_or_busy_leaves_the_fixed_hangover(judge: TurnJudge) -> None:
    speech = piper_speech(SENTENCE)
    off = TurnJudge("fixed")
    off.load()  # nothing to load
    turns = paused_detector(turn_model="fixed")
    assert off.model is None and await off.judge(turns, [speech], "s") is None
    assert turns.hangover_ms == 400
    off.close()

    busy = TurnJudge("smart")
    busy.model, busy.window_samples = judge.model, judge.window_samples
    busy.worker.close()
    busy.worker = ModelWorker("turn", max_pending=0)  # every job refused: a full queue
    turns = paused_detector()
    assert await busy.judge(turns, [speech], "s") is None
    assert turns.hangover_ms == 400 and busy.skipped == 1
    busy.close()



def test_a_missing_model_is_a_clear_startup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import omnicall.engine.smart_turn
    from omnicall.engine.bundled_models import ModelMissing
    from omnicall.engine.errors import EngineLoadError

    def missing() -> None:
        raise ModelMissing("package 'pipecat-ai' is not installed")

    monkeypatch.setattr(omnicall.engine.smart_turn, "smart_turn_onnx", missing)
    judge = TurnJudge("smart")
    with pytest.raises(EngineLoadError, match=r"turn-model smart.*pipecat-ai"):
        judge.load()
    assert judge.model is None
    judge.close()
