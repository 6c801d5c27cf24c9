"""Whether the microphone hears the assistant (:class:`EchoPresence`), on real speech: the
bundled Piper voice as the assistant, played through the seeded rooms of tests/room.py
(delay, a numpy room impulse response, mild clipping) or not at all (a headset), an espeak
voice as the caller. Blocks are fed paired, as the echo canceller pairs them: no clock, no
verdict that depends on the CPU."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from omnicall.media.echo_presence import (
    NO_ECHO_CHECKS,
    EchoPresence,
    correlation,
)
from omnicall.media.resample import AudioConverter
from omnicall.media.timebase import INPUT_RATE_HZ, OPUS_RATE_HZ
from tests.room import Room, RoomSpec
from tests.utils import espeak_speech, piper_speech

FAR_BLOCK = OPUS_RATE_HZ // 100  # 10 ms
NEAR_BLOCK = INPUT_RATE_HZ // 100
REPLY = ("The museum opens at nine in the morning and closes at six in the evening. Tickets "
         "are sold at the front desk, and children under twelve enter for free.")


@cache
def reply48() -> np.ndarray:
    return piper_speech(REPLY, rate=OPUS_RATE_HZ, lead_s=0.3, tail_s=0.2).astype(np.int16)


@cache
def caller16() -> np.ndarray:
    return espeak_speech("Hold on, what time does the gift shop close", lead_s=0.0,
                         tail_s=0.0).astype(np.float64)


def to16(x48: np.ndarray) -> np.ndarray:
    conv = AudioConverter(INPUT_RATE_HZ)
    x = np.clip(np.round(x48), -32768, 32767).astype(np.int16)
    return np.concatenate([conv.convert_array(x, OPUS_RATE_HZ), conv.flush()]).astype(
        np.float64)


def microphone(echo_db: float | None, seed: int, caller_at_s: float | None = None,
               caller_db: float = 10.0, noise: float = 3.0) -> np.ndarray:
    """16 kHz: the reply's echo in room ``seed`` (None: a headset, no echo), the caller
    ``caller_db`` over the echo (or over the reply's level less 10 dB, with no echo) from
    ``caller_at_s``, and a noise floor of ``noise`` (int16 units, RMS)."""
    far = reply48()
    room = Room(RoomSpec.drawn(seed, echo_db=echo_db))
    mic = to16(room.echo_of(far.astype(np.float64)))[:len(far) // 3]
    mic = np.concatenate([mic, np.zeros(len(far) // 3 - len(mic))])
    if caller_at_s is not None:
        voice = caller16()
        at = int(caller_at_s * INPUT_RATE_HZ)
        level = np.mean(mic ** 2) if echo_db is not None else \
            np.mean(to16(far.astype(np.float64)) ** 2) / 10
        voice = voice * np.sqrt(level / np.mean(voice ** 2) * 10 ** (caller_db / 10))
        end = min(len(mic), at + len(voice))
        mic[at:end] += voice[:end - at]
    rng = np.random.default_rng(seed)
    return np.clip(np.round(mic + rng.standard_normal(len(mic)) * noise), -32768, 32767)


def feed(presence: EchoPresence, mic16: np.ndarray) -> list[bool | None]:
    """The reply's 10 ms blocks paired with the microphone's; the verdict after each."""
    far = reply48()
    verdicts: list[bool | None] = []
    for k in range(min(len(far) // FAR_BLOCK, len(mic16) // NEAR_BLOCK)):
        presence.feed(far[k * FAR_BLOCK:(k + 1) * FAR_BLOCK],
                      mic16[k * NEAR_BLOCK:(k + 1) * NEAR_BLOCK].astype(np.int16))
        verdicts.append(presence.echo)
    return verdicts


def first(verdicts: list[bool | None], value: bool) -> float | None:
    """Seconds into the call of the first block with this verdict."""
    return next((k / 100 for k, v in enumerate(verdicts) if v is value), None)


def test_correlation_finds_a_delayed_copy_and_not_noise() -> None:
    rng = np.random.default_rng(0)
    far = rng.standard_normal(6000)
    near = 0.3 * far[1000:5000] + 0.01 * rng.standard_normal(4000)  # 1000 samples late
    assert correlation(far, near) > 0.99
    assert correlation(far, rng.standard_normal(4000)) < 0.1
    assert correlation(far, np.zeros(4000)) == 0.0
    with pytest.raises(ValueError):
        correlation(far[:100], near)


@pytest.mark.parametrize(("echo_db", "seed"), [(0.0, 1), (-10.0, 2), (-20.0, 3), (0.0, 4)])
def test_a_loudspeakers_echo_is_found_within_a_second_of_talk(echo_db: float,
                                                              seed: int) -> None:
    presence = EchoPresence()
    verdicts = feed(presence, microphone(echo_db, seed))
    found = first(verdicts, True)
    assert found is not None and found <= 0.3 + 1.25, (found, presence.last_rho)
    assert first(verdicts, False) is None  # never taken for no echo


@pytest.mark.parametrize("noise", [3.0, 30.0])
def test_a_headset_with_the_caller_talking_is_no_echo(noise: float) -> None:
    presence = EchoPresence()
    verdicts = feed(presence, microphone(None, 5, caller_at_s=1.0, noise=noise))
    assert first(verdicts, True) is None, presence.last_rho  # the caller is no echo
    decided = first(verdicts, False)
    assert decided is not None and decided <= 0.3 + 0.75 + 0.25 * NO_ECHO_CHECKS
    assert verdicts[-1] is False


def test_a_silent_microphone_is_no_echo_at_the_first_check() -> None:
    presence = EchoPresence()
    verdicts = feed(presence, np.zeros(len(reply48()) // 3))
    assert presence.checks >= 1 and first(verdicts, True) is None
    assert verdicts[-1] is False and presence.last_rho == 0.0
    checked = [k for k, v in enumerate(verdicts) if v is not None]
    assert checked and checked[0] / 100 <= 1.1  # the first check decided it


def test_the_caller_talking_over_a_found_echo_does_not_undo_it() -> None:
    presence = EchoPresence()
    verdicts = feed(presence, microphone(-10.0, 6, caller_at_s=2.0, caller_db=10.0))
    found = first(verdicts, True)
    assert found is not None and found < 2.0
    assert all(v is True for v in verdicts[int(found * 100):])


def test_no_verdict_before_the_assistant_talks() -> None:
    presence = EchoPresence()
    quiet = np.zeros(FAR_BLOCK, np.int16)
    rng = np.random.default_rng(7)
    for _ in range(300):  # 3 s of the caller's room, the assistant silent
        presence.feed(quiet, (rng.standard_normal(NEAR_BLOCK) * 300).astype(np.int16))
    assert presence.echo is None and presence.checks == 0
    with pytest.raises(ValueError):
        presence.feed(quiet[:100], np.zeros(NEAR_BLOCK, np.int16))
