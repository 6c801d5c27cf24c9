"""End of turn, offline: the same VAD, turn detector and end-of-turn model a call uses.

Utterances (the bundled Piper voice and two espeak-ng voices) with a pause spliced in
mid-sentence count as cut off when the turn ends inside the pause; complete utterances give
the delay from their last sound to the end of turn (Smart Turn v3.2 in float32 and in its
shipped int8 graph, against the fixed 400 ms hangover):
``RESULT cutoffs=<n> cutoffs_int8=<n> cutoffs_fixed=<n> paused=<n> eot_ms=<median> ...``

    .venv/bin/python bench/turn_cutoffs.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.utils import piper_speech  # noqa: E402

PAUSED_SENTENCES = [
    "I would like to know what the weather will be like tomorrow in Paris.",
    "Can you tell me how many people live in the city of London?",
    "What is the best way to get from the station to the museum?",
    "Please remind me to call my sister when I get home tonight.",
    "How long does it take to boil an egg for breakfast?",
    "Tell me a short story about a dog and a cat.",
    "Which restaurants near here are open late on a Sunday?",
    "What do I need to bring with me for the tour tomorrow?",
]
PAUSES_S = (0.3, 0.6, 0.9)  # 0.3 s: the fixed 400 ms hangover does not cut these


def turn_ends(audio: np.ndarray, vad: Any, smart: Any, config: Any) -> list[float]:
    """Where turns end (seconds into ``audio``), as a cascade call decides: VAD chunks into
    the turn detector; at each pause the end-of-turn model (if any) judges the utterance so
    far (with the session's 320 ms pre-roll)."""
    from omnicall.engine.conversation.turns import TurnDetector
    from omnicall.engine.vad import VadState

    detector, state = TurnDetector(config), VadState()
    ends: list[float] = []
    start, position = 0, 0
    for i in range(0, len(audio) - 1279, 1280):
        for prob in vad.probabilities(state, audio[i:i + 1280]):
            position += 512
            signal = detector.feed(prob)
            if signal == "speech_start":
                start = max(0, position - config.min_speech_ms * 16 - 5120)
            elif signal == "pause" and smart is not None:
                detector.judge(smart.probability(audio[start:position]))
            elif signal == "end_of_turn":
                ends.append(position / 16_000)
    return ends


def main() -> None:
    from omnicall.engine.conversation.turn_judge import turn_config
    from omnicall.engine.smart_turn import SmartTurn
    from omnicall.engine.vad import SileroVad
    from tests.utils import espeak_speech, splice_pause

    vad = SileroVad()
    models = {"smart": SmartTurn(), "smart_int8": SmartTurn(precision="int8"), "fixed": None}
    voices = {"piper": lambda t: piper_speech(t, lead_s=0.5, tail_s=2.0),
              "espeak-us": lambda t: espeak_speech(t, "en-us", lead_s=0.5, tail_s=2.0),
              "espeak-gb": lambda t: espeak_speech(t, "en-gb+f3", lead_s=0.5, tail_s=2.0)}
    fixed, config = turn_config(400, "fixed"), turn_config(400, "smart")  # as the engines
    cut = dict.fromkeys(models, 0)
    eot: dict[str, list[float]] = {name: [] for name in models}
    paused = 0
    judge_ms: dict[str, list[float]] = {"smart": [], "smart_int8": []}
    for sentence in PAUSED_SENTENCES:
        for voice, speak in voices.items():
            whole = speak(sentence)
            last_sound = int(np.flatnonzero(np.abs(whole.astype(np.int32)) > 500)[-1]) / 16_000
            for name, model in models.items():
                started = time.monotonic()
                ends = turn_ends(whole, vad, model, config if model else fixed)
                if model is not None:
                    judge_ms[name].append((time.monotonic() - started) * 1000)
                if ends:
                    eot[name].append((ends[0] - last_sound) * 1000)
            for pause_s in PAUSES_S:
                audio, at = splice_pause(whole, pause_s)
                paused += 1
                marks = []
                for name, model in models.items():
                    ends = turn_ends(audio, vad, model, config if model else fixed)
                    early = any(at / 16_000 < e < at / 16_000 + pause_s + 0.1 for e in ends)
                    cut[name] += early
                    marks.append(f"{name}={'CUT' if early else 'ok'}")
                print(f"{voice:>9} pause {pause_s:.1f} s: {' '.join(marks)}  {sentence}",
                      flush=True)
    medians = {name: statistics.median(v) for name, v in eot.items()}
    print("complete utterances: last sound -> end of turn, median: "
          + ", ".join(f"{name} {ms:.0f} ms" for name, ms in medians.items())
          + f" (n={len(eot['smart'])})")
    print("whole utterance through VAD + turns + model, median: "
          + ", ".join(f"{name} {statistics.median(v):.0f} ms" for name, v in judge_ms.items()))
    print("goal: cutoffs <= cutoffs_fixed (smart: the default float32 graph; smart_int8: the "
          "shipped int8 graph, whose verdicts follow the CPU)")
    print(f"RESULT cutoffs={cut['smart']} cutoffs_int8={cut['smart_int8']} "
          f"cutoffs_fixed={cut['fixed']} paused={paused} eot_ms={medians['smart']:.0f} "
          f"eot_int8_ms={medians['smart_int8']:.0f} eot_fixed_ms={medians['fixed']:.0f}")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    main()
