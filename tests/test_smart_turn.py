"""Smart Turn v3.2 (pipecat-ai's bundled model): features, verdicts on real speech, and the
cascade ending turns with it."""

from __future__ import annotations

import numpy as np
import pytest

from omnicall.engine.conversation.settings import TurnSettings
from omnicall.engine.smart_turn import WINDOW_SAMPLES, SmartTurn
from tests.utils import PAUSED_QUESTION, PAUSED_QUESTION_WORDS, piper_speech, splice_pause


@pytest.fixture(scope="module")
def smart() -> SmartTurn:
    return SmartTurn()


def test_features_match_the_reference_extractor_the_model_was_built_with(
        smart: SmartTurn) -> None:
    from pipecat.audio.turn.smart_turn._whisper_features import (
        compute_whisper_log_mel_features,
    )

    speech = piper_speech("What is the capital of France?", lead_s=0.3, tail_s=0.1)
    ours = smart.features(speech)
    audio = speech.astype(np.float32) / 32768.0
    reference = compute_whisper_log_mel_features(
        np.pad(audio, (WINDOW_SAMPLES - len(audio), 0)), do_normalize=True)
    assert ours.shape == (1, 80, 800)
    assert np.abs(ours[0] - reference).max() < 1e-4
    long = np.concatenate([np.full(16_000, 1000, np.int16),  # older than 8 s: not seen
                           np.zeros(WINDOW_SAMPLES - len(speech), np.int16), speech])
    assert np.array_equal(smart.features(long), ours)  # only the last 8 s count


#: requests as the bundled voice says them: each whole, and cut 200 ms into a pause spliced
#: where the words so far cannot be a whole request
REQUESTS = ("I would like to know what the weather will be like tomorrow.",
            "What is the best way to get from the station to the museum?",
            "Can you tell me how long it takes to boil an egg?",
            "Please remind me to call my sister when I get home tonight.",
            "How many people live in the largest city of Canada?",
            "I am looking for a good book about the history of science.",
            "What time does the library open on Saturday morning?",
            "Could you explain how a rainbow forms after the rain?")


def verdicts(model: SmartTurn) -> tuple[list[float], list[float]]:
    finished, cut = [], []
    for sentence in REQUESTS:
        whole = piper_speech(sentence, lead_s=0.3, tail_s=0.2)
        finished.append(model.probability(whole))
        spliced, at = splice_pause(whole, 0.2)
        cut.append(model.probability(spliced[:at + 3200]))
    return finished, cut


def test_most_finished_requests_score_high_and_most_cut_ones_low(smart: SmartTurn) -> None:
    """The model's judgement over a set, with a margin (float32 here: 7 of 8 each way, the
    medians 0.98 and 0.10); a model that is broken, constant or random fails it. Single
    utterances near 0.5 are the model's business, not a test's (see bench/turn_cutoffs.py
    for what that costs in calls)."""
    finished, cut = verdicts(smart)
    assert sum(p > 0.5 for p in finished) >= 6, finished
    assert sum(p < 0.5 for p in cut) >= 6, cut
    assert float(np.median(finished)) - float(np.median(cut)) > 0.5, (finished, cut)


def test_the_float_graph_is_the_shipped_one_computed_in_float(smart: SmartTurn) -> None:
    """The default runs the shipped int8 graph's weights in float32 (the same on every CPU);
    ``int8`` runs the shipped graph, whose verdicts follow the CPU's int8 kernels."""
    int8 = SmartTurn(precision="int8")
    assert smart.precision == "float32" and int8.precision == "int8"
    speech = piper_speech(REQUESTS[6], lead_s=0.3, tail_s=0.2)
    both = [smart.probability(speech), int8.probability(speech)]
    assert all(p > 0.5 for p in both), both  # one model, two ways of computing it
    with pytest.raises(ValueError, match="precision"):
        SmartTurn(precision="fp4")


async def test_the_cascade_ends_finished_turns_sooner_and_waits_through_pauses() -> None:
    from omnicall.engine.cascade.engine import CascadeEngine
    from omnicall.engine.cascade.settings import CascadeSettings
    from omnicall.engine.events import StageTiming, TurnEvent, UserTranscript
    from tests.cascade_fixtures import open_session
    from tests.utils import feed_units

    engine = CascadeEngine(CascadeSettings(turns=TurnSettings(turn_model="smart")), progress=None)
    engine._load()
    try:
        session, recorder = open_session(engine)
        whole = piper_speech(PAUSED_QUESTION, lead_s=0.5, tail_s=0.0)
        spliced, _ = splice_pause(whole, 0.8)  # the fixed 400 ms hangover would cut here
        await feed_units(session, np.concatenate([spliced, np.zeros(16_000 * 3, np.int16)]),
                         realtime=True)
        await recorder.wait(lambda r: any(e.role == "assistant" and e.phase == "end"
                                          for e in r.of(TurnEvent)), timeout_s=30)
        await recorder.close()
    finally:
        await engine.close()
    user_turns = [e for e in recorder.of(TurnEvent) if e.role == "user" and e.phase == "end"]
    assert len(user_turns) == 1  # one turn, not cut at the pause
    heard = next(e.text for e in recorder.of(UserTranscript) if e.final).lower()
    assert all(word in heard for word in PAUSED_QUESTION_WORDS), heard
    at = {e.stage: e.at_s for e in recorder.of(StageTiming)}
    assert at["end_of_turn"] - at["speech_end"] < 0.39  # finished: ~300 ms, not 400
    verdicts = session.listener.verdicts  # type: ignore[attr-defined]
    assert verdicts[0] < 0.5 < verdicts[-1], verdicts
