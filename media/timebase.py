"""Media time: integer ``pts`` plus a ``Fraction`` time base, converted through one helper.

Every frame in omnicall carries an integer ``pts`` counted in its own time base (for audio,
one tick per sample: ``Fraction(1, rate_hz)``). All conversions between time bases or to
seconds go through :func:`rescale` / :func:`pts_to_seconds` so rounding is done in one place.
"""

from __future__ import annotations

import math
from fractions import Fraction

# Formats of record (docs/architecture.md, "Data flow and clocks").
FRAME_MS = 80  # the scheduling quantum: one Qwen3-Omni codec frame (12.5 Hz)
INPUT_RATE_HZ = 16_000  # what the engine hears
INPUT_FRAME_SAMPLES = INPUT_RATE_HZ * FRAME_MS // 1000  # 1280
OUTPUT_RATE_HZ = 24_000  # what the engine speaks
OUTPUT_FRAME_SAMPLES = OUTPUT_RATE_HZ * FRAME_MS // 1000  # 1920
OPUS_RATE_HZ = 48_000  # the call's audio to and from the browser: Opus's native rate
OPUS_FRAME_MS = 20  # one Opus packet, one paced frame
OPUS_FRAME_SAMPLES = OPUS_RATE_HZ * OPUS_FRAME_MS // 1000  # 960
VIDEO_TIME_BASE = Fraction(1, 90_000)
FRAME_S = Fraction(FRAME_MS, 1000)


def time_base_for_rate(rate_hz: int) -> Fraction:
    """Audio time base: one tick per sample."""
    if rate_hz <= 0:
        raise ValueError(f"sample rate must be positive, got {rate_hz}")
    return Fraction(1, rate_hz)


def rescale(pts: int, from_base: Fraction, to_base: Fraction) -> int:
    """Convert ``pts`` from one time base to another, rounding to the nearest tick
    (halves round down, so the result never runs ahead of the source time)."""
    exact = Fraction(pts) * from_base / to_base
    floor = exact.numerator // exact.denominator
    return floor + 1 if exact - floor > Fraction(1, 2) else floor


def pts_to_seconds(pts: int, time_base: Fraction) -> float:
    return float(pts * time_base)


def frame_index(pts: int, time_base: Fraction) -> int:
    """Index of the 80 ms scheduling frame that contains media time ``pts``."""
    return math.floor(Fraction(pts) * time_base / FRAME_S)
