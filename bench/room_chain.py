"""The server's input chain as bench/room.py measures it: the echo canceller's CPU and
its echo return loss enhancement on real calls (:class:`ChainMeter`, :func:`erle_db`), and
Whisper's word errors through the chain, clean and in babble (:func:`word_errors`).
bench/room.py's docstring says how each is measured."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from omnicall.media.echo_canceller import EchoCanceller, RoomSettings
from tests.room import Room, RoomSpec
from tests.utils import espeak_speech, piper_speech

NEAR_RATE = 16_000  # the canceller's near end
RING_FRAME = 1280  # 80 ms at 16 kHz: the audio ring's frame, what the canceller is fed
CONVERGE_S = 5.0  # erle_db: from this long after the echo's first sound
ACTIVE_DB = 30.0  # erle_db: frames within this of the call's loudest input frame
ROUNDING_POWER = 1 / 12  # an int16 sample's rounding noise: the output's power floor
WARMUP_S = 3.0  # the recognition measure: the room's sound before each utterance


class ChainMeter:
    """Times and records the server's echo canceller in this process (see the docstring):
    wraps ``EchoCanceller.far_end`` and ``near_end`` at class level; :meth:`install` before
    the server starts, :meth:`remove` after."""

    def __init__(self) -> None:
        self.cancellers: list[EchoCanceller] = []
        self.cpu_s = 0.0
        self.recording = False  # keep each canceller's near-end input and output
        self.near: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        self._saved: tuple[Any, Any] | None = None

    def install(self) -> None:
        near_end, far_end = EchoCanceller.near_end, EchoCanceller.far_end
        self._saved = (near_end, far_end)
        meter = self

        def timed_far_end(canceller: EchoCanceller, samples: Any, sent_s: float) -> None:
            started = time.thread_time()
            far_end(canceller, samples, sent_s)
            meter.cpu_s += time.thread_time() - started

        def timed_near_end(canceller: EchoCanceller, samples: Any, arrived_s: float) -> Any:
            meter.seen(canceller)
            started = time.thread_time()
            out = near_end(canceller, samples, arrived_s)
            meter.cpu_s += time.thread_time() - started
            if meter.recording:
                inputs, outputs = meter.near[id(canceller)]
                inputs.append(np.array(samples, np.int16))
                outputs.append(np.array(out, np.int16))
            return out

        EchoCanceller.far_end = timed_far_end  # type: ignore[method-assign]
        EchoCanceller.near_end = timed_near_end  # type: ignore[method-assign]

    def remove(self) -> None:
        if self._saved is not None:
            EchoCanceller.near_end, EchoCanceller.far_end = self._saved  # type: ignore[method-assign]
            self._saved = None

    def seen(self, canceller: EchoCanceller) -> None:
        if not any(c is canceller for c in self.cancellers):
            self.cancellers.append(canceller)
            self.near[id(canceller)] = ([], [])

    def take(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The near-end (input, output) of each canceller recorded since the last take."""
        taken = [(np.concatenate(i) if i else np.zeros(0, np.int16),
                  np.concatenate(o) if o else np.zeros(0, np.int16))
                 for i, o in self.near.values() if i]
        for inputs, outputs in self.near.values():
            inputs.clear()
            outputs.clear()
        return taken

    def call_s(self) -> float:
        """Seconds of microphone audio the cancellers cleaned."""
        return sum(c.near_blocks for c in self.cancellers) * 0.010

    def cpu_pct(self) -> float:
        seconds = self.call_s()
        return 100 * self.cpu_s / seconds if seconds > 0 else math.nan

    def stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for canceller in self.cancellers:
            for key, value in canceller.stats().items():
                total[key] = total.get(key, 0) + value
        return total


def erle_db(near_in: np.ndarray, near_out: np.ndarray) -> float:
    """Echo return loss enhancement after convergence of one echo call (see the docstring)."""
    n = min(len(near_in), len(near_out)) // RING_FRAME * RING_FRAME
    if n == 0:
        return math.nan
    x = near_in[:n].astype(np.float64).reshape(-1, RING_FRAME)
    y = near_out[:n].astype(np.float64).reshape(-1, RING_FRAME)
    px, py = np.mean(x ** 2, axis=1), np.mean(y ** 2, axis=1)
    loud = np.flatnonzero(px >= px.max() * 10 ** (-ACTIVE_DB / 10)) if px.max() > 0 else []
    if not len(loud):
        return math.nan
    start = int(loud[0]) + round(CONVERGE_S * NEAR_RATE / RING_FRAME)
    active = [k for k in loud if k >= start]
    if not active:
        return math.nan
    return 10 * math.log10(float(np.sum(px[active])) /
                           float(np.sum(np.maximum(py[active], ROUNDING_POWER))))


def clean_input(audio16k: np.ndarray, settings: RoomSettings | None) -> np.ndarray:
    """The server's input chain before its ASR: the call's ``EchoCanceller`` with
    ``settings`` (None or both off: none, the audio as it came), 80 ms at a time on the
    audio's own clock, no far end (nobody else talked)."""
    if settings is None or not settings.any:
        return audio16k
    canceller = EchoCanceller(settings)
    n = -(-len(audio16k) // RING_FRAME) * RING_FRAME
    padded = np.zeros(n, np.int16)
    padded[:len(audio16k)] = audio16k
    out = [canceller.near_end(padded[i:i + RING_FRAME], (i + RING_FRAME) / NEAR_RATE)
           for i in range(0, n, RING_FRAME)]
    return np.concatenate(out)[:len(audio16k)]


def word_errors(requests: int, settings: RoomSettings | None, asr_model: str = "",
                noise: str = "babble", beam_size: int = 1) -> tuple[float, float]:
    """Word error rates of ``asr_model`` (``--asr``: '' = tiny.en) decoding with ``beam_size``
    on ``requests`` requests in two voices, alone and at 10 dB SNR of ``noise`` (babble or
    street)."""
    from bench.asr_wer import REQUESTS
    from omnicall.engine.cascade.asr import Decoding, WhisperAsr
    from tests.cascade_fixtures import edit_distance, words

    asr = WhisperAsr(asr_model, decoding=Decoding(beam_size=beam_size))
    babble = Room(RoomSpec(seed=100, echo_db=None, noise=noise, snr_db=10.0))
    quiet = Room(RoomSpec(echo_db=None))
    errors = {"clean": 0, "noisy": 0}
    total = 0
    # with a chain: the room's sound before the utterance, as a call hears it first
    lead = round(WARMUP_S * NEAR_RATE) if settings is not None and settings.any else 0
    for i, text in enumerate(REQUESTS[:requests]):
        for voice, speech in (("piper", piper_speech(text, lead_s=0.3, tail_s=0.3)),
                              ("espeak", espeak_speech(text, "en-us", lead_s=0.3,
                                                       tail_s=0.3))):
            # each utterance over another stretch of the crowd (the same with or without
            # the lead: it starts that much earlier)
            speech = np.concatenate([np.zeros(lead, speech.dtype), speech])
            noisy = babble.render(speech, rate=16_000, noise_from=i * 37_000 - lead).mic
            clean = quiet.render(speech, rate=16_000).mic
            total += len(words(text))
            for kind, audio in (("clean", clean), ("noisy", noisy)):
                heard = asr.transcribe(clean_input(audio, settings)[lead:])
                errors[kind] += edit_distance(words(text), words(heard))
            print(f"  wer {voice:>6}: {text!r}", flush=True)
    return errors["clean"] / total, errors["noisy"] / total
