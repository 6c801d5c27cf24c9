"""Word error rate and time of the cascade's speech recognition, on a spoken set.

24 requests of the kind people ask a voice assistant, each in four voices (the bundled Piper
voice; espeak-ng en-us, en-gb+f3 and en-us+m3), each clean and with background noise (pink
noise at 10 dB SNR): 192 utterances. Every configuration of the bundled Whisper tiny.en (or
of ``--asr``: ``base``, the bundled Whisper base, or a folder) is run on the same audio;
today's (greedy, no prompt) is the baseline. WER is over all words;
ASR time is per utterance, on the 2 threads the engine gives it.
Last line: ``RESULT wer=<> wer_baseline=<> asr_ms=<median> asr_ms_baseline=<median>``
(``wer``: the configuration the engine now uses).

    .venv/bin/python bench/asr_wer.py [--asr base]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.voice_to_voice import QUESTIONS  # noqa: E402
from omnicall.engine.cascade.asr import DEFAULT_DECODING, Decoding, WhisperAsr  # noqa: E402
from tests.cascade_fixtures import edit_distance, words  # noqa: E402
from tests.utils import espeak_speech, piper_speech  # noqa: E402

REQUESTS = [
    "What do bees make?",
    "What is the opposite of hot?",
    *QUESTIONS[:10],  # the latency bench's questions, then harder words
    "When does the museum open tomorrow?",
    "How much is a ticket for a child?",
    "Where can I find the nearest pharmacy?",
    "Please set a timer for ten minutes.",
    "What is the weather like in Berlin today?",
    "Who wrote the book about the white whale?",
    "Can you spell the word necessary?",
    "Turn the volume down a little.",
    "What time does the last train leave?",
    "How far is it to the airport?",
    "Is it going to rain this afternoon?",
    "Tell me a fun fact about octopuses.",
]
VOICES = {
    "piper": lambda t: piper_speech(t, lead_s=0.3, tail_s=0.3),
    "espeak-us": lambda t: espeak_speech(t, "en-us", lead_s=0.3, tail_s=0.3),
    "espeak-gb-f3": lambda t: espeak_speech(t, "en-gb+f3", lead_s=0.3, tail_s=0.3),
    "espeak-us-m3": lambda t: espeak_speech(t, "en-us+m3", lead_s=0.3, tail_s=0.3),
}
CONFIGS = {
    "baseline (greedy)": Decoding(beam_size=1, prompt=False),
    "beam 3": Decoding(beam_size=3, prompt=False),
    "beam 5": Decoding(beam_size=5, prompt=False),
    "greedy + prompt": Decoding(beam_size=1, prompt=True),
    "beam 3 + prompt": Decoding(beam_size=3, prompt=True),
}


def with_noise(speech: np.ndarray, snr_db: float, seed: int) -> np.ndarray:
    """Pink noise (1/f) at ``snr_db`` below the speech's power, over the whole clip."""
    rng = np.random.default_rng(seed)
    spectrum = np.fft.rfft(rng.standard_normal(len(speech)))
    spectrum /= np.sqrt(np.maximum(1, np.arange(len(spectrum))))
    noise = np.fft.irfft(spectrum, len(speech))
    voiced = speech[np.abs(speech.astype(np.int32)) > 300].astype(np.float64)
    power = float(np.mean(voiced ** 2)) if len(voiced) else 1.0
    noise *= np.sqrt(power / 10 ** (snr_db / 10) / np.mean(noise ** 2))
    return np.clip(speech + noise, -32768, 32767).astype(np.int16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asr", default="", help="the model, as the server's --asr takes it "
                        "('' = the bundled tiny.en; base: the bundled Whisper base)")
    asr = WhisperAsr(parser.parse_args().asr)
    clips = []
    for i, text in enumerate(REQUESTS):
        for voice, speak in VOICES.items():
            clean = speak(text)
            clips.append((text, voice, "clean", clean))
            clips.append((text, voice, "noise", with_noise(clean, 10.0, seed=i)))
    results = {}
    for name, decoding in CONFIGS.items():
        asr.decoding = decoding
        errors, total, times = 0, 0, []
        by_kind: dict[str, list[int]] = {}
        for text, voice, kind, audio in clips:
            started = time.monotonic()
            heard = asr.transcribe(audio)
            times.append((time.monotonic() - started) * 1000)
            wrong = edit_distance(words(text), words(heard))
            errors, total = errors + wrong, total + len(words(text))
            tally = by_kind.setdefault(f"{voice}/{kind}", [0, 0])
            tally[0] += wrong
            tally[1] += len(words(text))
        results[name] = (errors / total, statistics.median(times))
        detail = " ".join(f"{k}={e / n:.3f}" for k, (e, n) in by_kind.items())
        print(f"{name:>18}: WER {errors / total:.3f}  ASR median {statistics.median(times):.0f} ms"
              f" p95 {sorted(times)[int(0.95 * len(times))]:.0f} ms  [{detail}]", flush=True)
    chosen = next(n for n, d in CONFIGS.items() if d == DEFAULT_DECODING)
    wer, ms = results[chosen]
    base_wer, base_ms = results["baseline (greedy)"]
    print(f"the engine uses: {chosen}; goal: wer <= 2/3 of the baseline, median asr_ms <= 250")
    print(f"RESULT wer={wer:.3f} wer_baseline={base_wer:.3f} asr_ms={ms:.0f} "
          f"asr_ms_baseline={base_ms:.0f}")


if __name__ == "__main__":
    main()
