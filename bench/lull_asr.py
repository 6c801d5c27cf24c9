"""The final transcript from the lull: does Whisper hear a turn alike when its audio ends at
the speech's first silent VAD chunk (the lull, where the cascade starts the final ASR) as
when it ends at the pause, 64 ms later?

The requests of ``bench/asr_wer.py``, this latency bench's questions and
``bench/turn_cutoffs.py``'s sentences (34, whole), each in three voices (the bundled Piper
voice, espeak-ng en-us and en-gb+f3), clean and with pink noise at 10 dB SNR: 204
utterances, each with a second of silence after it. The real VAD and turn detector find the
turn's last silence; its audio is cut where a call hears it (to the 20 ms packet holding the
chunk that decided) at the lull, 32 ms into the silence (then 64 ms of digital silence, as
the cascade pads it), and at the pause, 96 ms into it, and the bundled Whisper tiny.en hears
both. Also counted: lulls that speech went on past
(each costs a call one transcript) and those that came within 250 ms before the turn's own
(its transcript may still run when the turn's starts).

Last line: ``RESULT wer_lull=X wer_pause=X differ=N utterances=N false_lulls=N
near_lulls=N``.

    .venv/bin/python bench/lull_asr.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.asr_wer import REQUESTS, with_noise  # noqa: E402
from bench.turn_cutoffs import PAUSED_SENTENCES  # noqa: E402
from bench.voice_to_voice import QUESTIONS  # noqa: E402
from omnicall.engine.cascade.asr import WhisperAsr  # noqa: E402
from omnicall.engine.conversation.turns import TurnConfig, TurnDetector  # noqa: E402
from omnicall.engine.vad import SileroVad, VadState  # noqa: E402
from tests.cascade_fixtures import edit_distance, words  # noqa: E402
from tests.utils import espeak_speech, piper_speech  # noqa: E402

PACKET_SAMPLES = 320  # 20 ms: a call hears the audio to the packet holding the chunk
UNIT_SAMPLES = 1280
NEAR_S = 0.25
VOICES = {
    "piper": lambda t: piper_speech(t, lead_s=0.3, tail_s=1.0),
    "espeak-us": lambda t: espeak_speech(t, "en-us", lead_s=0.3, tail_s=1.0),
    "espeak-gb-f3": lambda t: espeak_speech(t, "en-gb+f3", lead_s=0.3, tail_s=1.0),
}


def last_silence(audio: np.ndarray, vad: SileroVad) -> tuple[int, int, list[int]] | None:
    """Where the VAD's chunks decided the turn's last lull and its pause (samples heard),
    and the lulls before it; None: no turn ended."""
    detector, state = TurnDetector(TurnConfig()), VadState()
    heard, lulls = 0, []
    lull = pause = -1
    for start in range(0, len(audio) - UNIT_SAMPLES + 1, UNIT_SAMPLES):
        for prob in vad.probabilities(state, audio[start:start + UNIT_SAMPLES]):
            heard += 512
            signal = detector.feed(prob)
            if signal == "lull":
                lull = heard
                lulls.append(heard)
            elif signal == "pause":
                pause = heard
            elif signal == "end_of_turn":
                return lull, pause, lulls[:-1]
    return None


def main() -> None:
    asr, vad = WhisperAsr(""), SileroVad()
    texts = list(dict.fromkeys([*REQUESTS, *QUESTIONS, *PAUSED_SENTENCES]))
    errors = {"lull": 0, "pause": 0}
    total = differ = utterances = false_lulls = near = 0
    for i, text in enumerate(texts):
        for voice, speak in VOICES.items():
            clean = speak(text)
            for condition, audio in (("clean", clean), ("noise", with_noise(clean, 10.0, i))):
                found = last_silence(audio, vad)
                if found is None:
                    print(f"no turn: {voice} {condition} {text!r}")
                    continue
                lull, pause, before = found
                utterances += 1
                false_lulls += len(before)
                near += sum(1 for at in before if (lull - at) / 16_000 < NEAR_S)
                heard = {}
                for name, at in (("lull", lull), ("pause", pause)):
                    cut = -(-at // PACKET_SAMPLES) * PACKET_SAMPLES
                    # at the lull, with the silence the pause would add (as the cascade does)
                    pad = np.zeros(pause - lull if name == "lull" else 0, np.int16)
                    heard[name] = asr.transcribe(np.concatenate([audio[:cut], pad]))
                    errors[name] += edit_distance(words(text), words(heard[name]))
                total += len(words(text))
                if words(heard["lull"]) != words(heard["pause"]):
                    differ += 1
                    print(f"{voice:13s} {condition}: lull {heard['lull']!r} | pause "
                          f"{heard['pause']!r}", flush=True)
    print(f"RESULT wer_lull={errors['lull'] / total:.3f} wer_pause={errors['pause'] / total:.3f}"
          f" differ={differ} utterances={utterances} false_lulls={false_lulls}"
          f" near_lulls={near}")


if __name__ == "__main__":
    main()
