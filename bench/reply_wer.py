"""How whole the assistant's speech sounds, per way of cutting replies into clauses.

Replies are cut into clauses as the cascade cuts them, each clause synthesized by the
engine's voice (the streaming Piper) and joined as the Talker joins them (lead trimmed,
150 ms tails), then heard by Whisper tiny.en; WER against the reply text, for the engine's
cut (first clause after 4 words, moved past weak words), the plain 4-word cut, whole
sentences and the phrase-boundary cut (an option). Piper draws random noise on every run
(its durations and timbre vary), so one take of 12 replies swings the WER by +-0.015 - as
much as the cuts differ; each reply is spoken ``--takes`` times (5) and the mean is printed:
``RESULT reply_wer=<> reply_wer_sentences=<> reply_wer_phrases=<> reply_wer_fixed4=<>``.

    .venv/bin/python bench/reply_wer.py [--takes 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnicall.engine.cascade.clauses import ClauseSplitter  # noqa: E402

REPLIES = [
    "The sky on a clear day is blue because air scatters blue light the most.",
    "Paris is the capital and the largest city of France, on the river Seine.",
    "A spider has eight legs and most spiders have eight eyes as well.",
    "Bees make honey from the nectar of flowers and store it in their hives.",
    "The opposite of hot is cold, like ice in the winter.",
    "Mount Everest is the tallest mountain in the world at almost nine thousand metres.",
    "To boil an egg, put it in boiling water for about eight minutes.",
    "The largest ocean on Earth is the Pacific, which covers a third of the planet.",
    "Cats like to eat fish and meat, and they need fresh water every day.",
    "The moon goes around the Earth about once a month and shows us the same face.",
    "A good book to start with is a short novel that you can finish in a weekend.",
    "Winter is the best time of year for skiing in the mountains of Europe.",
]


def spoken_reply(text: str, splitter: Any, tts: Any) -> np.ndarray:
    """``text`` cut by ``splitter`` and spoken clause by clause as the Talker does (24 kHz)."""
    from omnicall.engine.cascade.talker import CLAUSE_TAIL_MS
    from omnicall.engine.cascade.tts import trim_silence
    from omnicall.media.resample import AudioConverter

    clauses = [*splitter.feed(text + " "), splitter.flush()]
    parts = []
    for clause in (c for c in clauses if c):
        converter = AudioConverter(24_000)
        audio = np.concatenate([converter.convert_array(chunk, rate)
                                for chunk, rate in tts.synthesize(clause)] + [converter.flush()])
        parts.append(trim_silence(audio, 24_000, lead=not parts, tail_keep_ms=CLAUSE_TAIL_MS))
    return np.concatenate(parts)


def main(takes: int) -> None:
    from omnicall.engine.cascade.asr import WhisperAsr
    from omnicall.engine.cascade.tts import load_tts
    from omnicall.media.resample import AudioConverter
    from tests.cascade_fixtures import wer

    tts, asr = load_tts(), WhisperAsr()
    cuts = {"phrases": lambda: ClauseSplitter(first_max_words=8, phrases=True),
            "4words": lambda: ClauseSplitter(),  # the engine's default
            "fixed4": lambda: ClauseSplitter(weak_endings=False),  # the earlier cut
            "sentences": lambda: ClauseSplitter(min_words=10_000, max_chars=10_000,
                                                first_max_words=None, phrases=False)}
    scores: dict[str, list[float]] = {name: [] for name in cuts}
    for text in [reply for reply in REPLIES for _ in range(takes)]:
        for name, make in cuts.items():
            audio = spoken_reply(text, make(), tts)
            converter = AudioConverter(16_000)
            heard = asr.transcribe(np.concatenate([converter.convert_array(audio, 24_000),
                                                   converter.flush()]))
            scores[name].append(wer(text, heard))
            first = make().feed(text + " ")[0]
            print(f"{name:>9}: WER {scores[name][-1]:.2f}  first clause {first!r}  heard "
                  f"{heard!r}", flush=True)
    mean = {name: statistics.mean(values) for name, values in scores.items()}
    print("goal: reply_wer <= reply_wer_sentences")
    print(f"RESULT reply_wer={mean['4words']:.3f} reply_wer_sentences={mean['sentences']:.3f}"
          f" reply_wer_phrases={mean['phrases']:.3f} reply_wer_fixed4={mean['fixed4']:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--takes", type=int, default=5,
                        help="how many times each reply is spoken")
    main(parser.parse_args().takes)
