"""The call's echo canceller and noise suppressor (:class:`EchoCanceller`) on real speech: the
assistant's reply sent as 20 ms 48 kHz frames, played through a simulated loudspeaker path
(delay, attenuation, a room impulse response made with numpy, mild clipping) into the caller's
microphone, which arrives over a jittery network in 20 ms packets and is cleaned in the audio
ring's 80 ms frames. Everything is seeded and timed on simulated clocks: no verdict depends on
the CPU."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest

from omnicall.media.echo_canceller import ECHO_REACH_S, EchoCanceller, RoomSettings
from omnicall.media.resample import AudioConverter
from omnicall.media.timebase import INPUT_FRAME_SAMPLES, OPUS_FRAME_SAMPLES, OPUS_RATE_HZ
from tests.utils import espeak_speech, piper_speech

RATE = 16_000
CLIP = 0.8  # the loudspeaker clips at this share of its peak
ROOM = RoomSettings()  # both on
REPLY = ("The museum opens at nine in the morning and closes at six in the evening. Tickets "
         "are sold at the front desk, and children under twelve enter for free. On weekends "
         "there is a guided tour every hour, starting from the main hall near the fountain.")


@cache
def reply() -> tuple[np.ndarray, np.ndarray]:
    """The assistant's reply at 48 kHz (what the paced track sends) and at 16 kHz."""
    at48 = piper_speech(REPLY, rate=OPUS_RATE_HZ, lead_s=0.2, tail_s=0.2)
    conv = AudioConverter(RATE)
    at16 = np.concatenate([conv.convert_array(at48, OPUS_RATE_HZ), conv.flush()])
    return at48, at16


CALLER = "Hold on, what time does the gift shop close"


@cache
def caller() -> np.ndarray:
    return espeak_speech(CALLER, lead_s=0.0, tail_s=0.0)


def room_impulse_response(rng: np.random.Generator, t60_s: float = 0.3) -> np.ndarray:
    """A direct path and an exponentially decaying diffuse tail (-60 dB after ``t60_s``)."""
    n = int(RATE * t60_s)
    t = np.arange(n) / RATE
    h = rng.standard_normal(n) * np.exp(-6.9 * t / t60_s) * 0.5
    h[0] = 1.0
    return h / np.sqrt(np.sum(h ** 2))


def loudspeaker(far16: np.ndarray, rng: np.random.Generator, delay_ms: float,
                gain_db: float) -> np.ndarray:
    """What the microphone picks up of the reply: delayed, through the room, attenuated,
    mildly clipped (a small loudspeaker driven hard)."""
    y = np.convolve(far16.astype(np.float64), room_impulse_response(rng))[:len(far16)]
    y *= 10 ** (gain_db / 20)
    limit = CLIP * np.abs(y).max()
    y = np.clip(y, -limit, limit)
    d = int(delay_ms * RATE / 1000)
    return np.concatenate([np.zeros(d), y])[:len(far16)]


@dataclass
class Call:
    out: np.ndarray  # the cleaned microphone
    canceller: EchoCanceller
    #: for each 80 ms near frame: whether the canceller said, as its last packet arrived,
    #: that the audio arriving then passes unchanged (``passes_raw``)
    raw_said: list[bool]


def run_call(mic: np.ndarray, far48: np.ndarray | None, rng: np.random.Generator,
             settings: RoomSettings = ROOM, *, delay_hint_ms: int = 0,
             net_ms: float = 30.0, jitter_ms: float = 15.0) -> Call:
    """The call on simulated clocks: far frame ``k`` sent at ``k * 20 ms`` (a little
    event-loop jitter); microphone sample ``n`` captured at ``n / 16 kHz``, sent in 20 ms
    packets that arrive ``net_ms`` plus an exponential jitter later, in order; cleaned per
    80 ms frame when its last packet has arrived (as the audio ring completes it)."""
    ec = EchoCanceller(settings, delay_hint_ms=delay_hint_ms)
    mic16 = np.clip(np.round(mic), -32768, 32767).astype(np.int16)
    frames = len(mic16) // INPUT_FRAME_SAMPLES
    events: list[tuple[float, int, int]] = []  # (time, order, what) what>=0: near frame
    if far48 is not None:
        for k in range(len(far48) // OPUS_FRAME_SAMPLES):
            events.append((k * 0.02 + rng.uniform(0, 0.004), 0, -1 - k))
    last = 0.0
    for i in range(frames):
        captured = (i + 1) * INPUT_FRAME_SAMPLES / RATE
        last = max(last, captured + net_ms / 1000 + rng.exponential(jitter_ms / 1000))
        events.append((last, 1, i))
    out = np.zeros(frames * INPUT_FRAME_SAMPLES)
    raw_said: list[bool] = []
    for at, _, what in sorted(events):
        if what < 0:
            k = -1 - what
            assert far48 is not None
            ec.far_end(far48[k * OPUS_FRAME_SAMPLES:(k + 1) * OPUS_FRAME_SAMPLES], at)
        else:
            part = slice(what * INPUT_FRAME_SAMPLES, (what + 1) * INPUT_FRAME_SAMPLES)
            raw_said.append(ec.passes_raw(at))
            out[part] = ec.near_end(mic16[part], at)
    return Call(out, ec, raw_said)


def power(x: np.ndarray) -> float:
    return float(np.mean(np.asarray(x, np.float64) ** 2)) + 1e-9


def erle_db(echo: np.ndarray, residual: np.ndarray, last_s: float = 4.0) -> float:
    """Echo return loss enhancement over the last ``last_s``: the echo the microphone picked
    up against what is left of it after the canceller (no near-end speech)."""
    tail = slice(len(residual) - int(last_s * RATE), len(residual))
    return 10 * np.log10(power(echo[tail]) / power(residual[tail]))


@pytest.mark.parametrize("delay_ms, gain_db", [(50, -6), (150, 0), (250, -10)])
def test_the_assistants_voice_from_a_loudspeaker_is_cancelled(delay_ms: int,
                                                               gain_db: float) -> None:
    rng = np.random.default_rng(delay_ms)
    far48, far16 = reply()
    echo = loudspeaker(far16, rng, delay_ms, gain_db)
    mic = echo + rng.standard_normal(len(echo)) * 3  # the microphone's own noise floor
    call = run_call(mic, far48, rng)
    echo = echo[:len(call.out)]
    assert erle_db(echo, call.out) >= 20
    assert call.canceller.far_dropped == 0
    assert len(call.canceller._far) <= 20  # only what the network's jitter holds back


def test_an_echo_path_beyond_aec3s_reach_needs_the_delay_hint() -> None:
    """AEC3 searches about 0-500 ms: a 700 ms path is missed, and found with a 300 ms hint."""
    rng = np.random.default_rng(7)
    far48, far16 = reply()
    echo = loudspeaker(far16, rng, 700, -6)
    mic = echo + rng.standard_normal(len(echo)) * 3
    missed = run_call(mic, far48, np.random.default_rng(1))
    found = run_call(mic, far48, np.random.default_rng(1), delay_hint_ms=300)
    echo = echo[:len(found.out)]
    assert erle_db(echo, missed.out) < 10
    assert erle_db(echo, found.out) >= 20


def spectral_similarity(out: np.ndarray, reference: np.ndarray) -> float:
    """How alike two signals sound: the correlation of their log-magnitude spectrograms (32
    ms frames). Phase-blind: the module's high-pass filter turns a voice's waveform (its low
    harmonics' phase) without changing how it sounds, and its processing may lag by a few ms."""
    def spectrogram(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float64)
        frames = np.stack([x[i:i + 512] * np.hanning(512) for i in range(0, len(x) - 512, 256)])
        return 20 * np.log10(np.abs(np.fft.rfft(frames, axis=1))[:, 6:] + 1.0)  # above 190 Hz
    return float(np.corrcoef(spectrogram(out).ravel(), spectrogram(reference).ravel())[0, 1])


def test_the_callers_words_come_through_while_the_assistant_talks() -> None:
    """Double talk: the caller speaks over the reply's echo (echo 10 dB under the caller's
    voice at the microphone), late in the reply (AEC3 has converged): Whisper, the cascade's
    ASR, still gets the caller's words from the cleaned audio.

    Not free: AEC3's suppressor takes a moment to tell the caller from the echo, and costs
    words, most at the onset (measured over three such sentences, this one first: WER 0.44,
    0.17 and 0.38 with the noise suppressor, 0.11, 0.17 and 0.88 without, against 0 for the
    raw microphone; with the echo as loud as the caller, 0.6-1.0 for both): the reason the
    server's canceller is not on for every page (docs/room.md)."""
    from omnicall.engine.cascade.asr import WhisperAsr
    from tests.cascade_fixtures import wer

    rng = np.random.default_rng(3)
    far48, far16 = reply()
    echo = loudspeaker(far16, rng, 150, -6)
    near = np.zeros(len(echo))
    voice = caller().astype(np.float64)
    at = len(echo) - len(voice) - RATE
    near[at:at + len(voice)] = voice * np.sqrt(
        power(echo[at:at + len(voice)]) / power(voice) * 10)
    call = run_call(echo + near + rng.standard_normal(len(echo)) * 3, far48, rng)
    span = slice(at - RATE // 10, at + len(voice) + RATE // 10)
    heard = WhisperAsr(threads=1).transcribe(call.out[span].astype(np.int16))
    assert wer(CALLER, heard) <= 0.5 and "gift shop" in heard.lower(), heard
    assert erle_db(echo[:at], call.out[:at], 3.0) >= 20  # and the echo before it is gone


def test_a_headset_call_passes_the_callers_voice_unchanged() -> None:
    """No echo path (a headset): with the reply playing, the caller's speech passes through
    the canceller almost untouched."""
    rng = np.random.default_rng(4)
    far48, far16 = reply()
    near = np.zeros(len(far16))
    voice = caller().astype(np.float64) * 0.5
    at = len(far16) - len(voice) - RATE
    near[at:at + len(voice)] = voice
    call = run_call(near + rng.standard_normal(len(near)) * 3, far48, rng,
                    RoomSettings(echo_cancellation=True, noise_suppression=False))
    span = slice(at, at + len(voice))
    assert spectral_similarity(call.out[span], near[span]) >= 0.8
    assert power(call.out[span]) >= 0.7 * power(near[span])


def test_a_headset_callers_quiet_voice_under_the_reply_passes_sample_for_sample() -> None:
    """No echo path, the caller 10 dB under the reply's level, speaking while it plays: AEC3,
    whose filter never converges without an echo, would take the voice for the echo it
    expects (30-60 dB lower, measured); the canceller's echo presence check finds no echo
    within about a second of the reply, and from then on the raw input passes."""
    rng = np.random.default_rng(9)
    far48, far16 = reply()
    voice = caller().astype(np.float64)
    voice *= np.sqrt(power(far16.astype(np.float64)) / power(voice) / 10)
    at = 3 * RATE
    near = np.zeros(len(far16))
    near[at:at + len(voice)] = voice
    mic = near + rng.standard_normal(len(near)) * 3
    call = run_call(mic, far48, rng, RoomSettings(echo_cancellation=True,
                                                 noise_suppression=False))
    raw = np.clip(np.round(mic), -32768, 32767).astype(np.int16)
    span = slice(at, at + len(voice))
    assert call.canceller.presence.echo is False
    assert np.array_equal(call.out[span], raw[span])


def test_without_an_echo_to_remove_the_callers_audio_passes_unchanged() -> None:
    """The canceller's output is used only while an echo can be in the microphone: before the
    assistant's first sound and from ECHO_REACH_S after its last, the caller's audio comes
    through sample for sample (AEC3 costs words even with no echo); while the reply's echo
    is there, it is removed."""
    rng = np.random.default_rng(8)
    far48, far16 = reply()
    quiet_s = 2.0  # the assistant silent (the paced track sends silence) after its reply
    lead = RATE  # and for a second before it
    voice = caller().astype(np.float64) * 0.5
    tail_s = quiet_s + len(voice) / RATE + 0.5
    silence48 = np.zeros(int(tail_s * OPUS_RATE_HZ), np.int16)
    far = np.concatenate([np.zeros(lead * 3, np.int16), far48, silence48])
    echo = np.concatenate([np.zeros(lead), loudspeaker(far16, rng, 150, -6)])
    mic = np.zeros(len(echo) + int(tail_s * RATE))
    mic[:len(echo)] = echo
    at = len(echo) + int(quiet_s * RATE)
    mic[at:at + len(voice)] = voice
    mic += rng.standard_normal(len(mic)) * 3
    call = run_call(mic, far, rng, RoomSettings(echo_cancellation=True,
                                                noise_suppression=False))
    raw = np.clip(np.round(mic), -32768, 32767).astype(np.int16)[:len(call.out)]
    before = slice(0, lead - INPUT_FRAME_SAMPLES)
    assert np.array_equal(call.out[before], raw[before])
    after = slice(len(echo) + int((ECHO_REACH_S + 0.3) * RATE), len(call.out))
    assert np.array_equal(call.out[after], raw[after])  # the caller's words among them
    assert call.canceller.passed_blocks > 0
    assert erle_db(echo, call.out[:len(echo)], 3.0) >= 20  # the echo itself is gone
    # what the canceller says ahead of a frame (the listener's VAD then hears the raw audio
    # before the frame is formed) holds: every frame it said would pass does, sample for
    # sample; it says so before the reply and again once its echo can no longer be there,
    # and never while the reply sounds
    said = np.array(call.raw_said)
    for frame in np.flatnonzero(said):
        part = slice(frame * INPUT_FRAME_SAMPLES, (frame + 1) * INPUT_FRAME_SAMPLES)
        assert np.array_equal(call.out[part], raw[part]), frame
    unit_s = INPUT_FRAME_SAMPLES / RATE
    sounding = slice(int(1.3 / unit_s), int((1.0 + len(far16) / RATE) / unit_s))  # 1 s lead
    assert said[:int(0.9 / unit_s)].all() and not said[sounding].any()
    assert said[after.start // INPUT_FRAME_SAMPLES:].all()
    with_suppressor = run_call(mic[:RATE * 2], None, rng, RoomSettings(
        echo_cancellation=True, noise_suppression=True))
    assert not any(with_suppressor.raw_said)  # its output is never the raw audio


def test_noise_suppression_lowers_stationary_noise_and_keeps_the_voice() -> None:
    rng = np.random.default_rng(5)
    voice = caller().astype(np.float64)
    lead = 3 * RATE  # the suppressor learns the noise
    clean = np.concatenate([np.zeros(lead), voice, np.zeros(RATE)])
    # a fan or an air conditioner: low-passed noise about 10 dB under the voice
    noise = np.convolve(rng.standard_normal(len(clean)), np.ones(4) / 4, mode="same")
    noise *= np.sqrt(power(voice) / power(noise) / 10)
    off = run_call(clean + noise, None, np.random.default_rng(1),
                   RoomSettings(echo_cancellation=False, noise_suppression=False))
    on = run_call(clean + noise, None, np.random.default_rng(1),
                  RoomSettings(echo_cancellation=False, noise_suppression=True))
    quiet = slice(2 * RATE, lead)  # noise alone, after the suppressor learned it
    assert 10 * np.log10(power(off.out[quiet]) / power(on.out[quiet])) >= 10
    span = slice(lead, lead + len(voice))
    assert spectral_similarity(on.out[span], clean[span]) >= spectral_similarity(
        off.out[span], clean[span])


def test_the_far_end_waiting_for_a_silent_caller_is_bounded() -> None:
    """The assistant talks, the caller's audio stops arriving: the far end kept is at most
    its bound (oldest dropped, counted); when the caller's audio comes back, it is cleaned
    again from its own clock (re-anchored)."""
    far48, _ = reply()
    ec = EchoCanceller(max_far_blocks=50)
    frames = [far48[k * OPUS_FRAME_SAMPLES:(k + 1) * OPUS_FRAME_SAMPLES] for k in range(300)]
    quiet = np.zeros(INPUT_FRAME_SAMPLES, np.int16)
    assert len(ec.near_end(quiet, 0.1)) == INPUT_FRAME_SAMPLES
    for k, frame in enumerate(frames):  # 6 s of reply, no caller audio
        ec.far_end(frame, 0.1 + k * 0.02)
        assert len(ec._far) <= 50
    assert ec.far_dropped == 300 * 2 - 50
    # the caller comes back 6 s later (a gap the ingest did not fill): its next frame is
    # placed at its arrival, not 6 s in the past
    assert len(ec.near_end(quiet, 6.2)) == INPUT_FRAME_SAMPLES
    assert ec.reanchors == 1
    assert len(ec._far) < 20


def test_odd_chunks_are_carried_and_every_sample_comes_back() -> None:
    ec = EchoCanceller(RoomSettings(echo_cancellation=True, noise_suppression=False))
    ec.far_end(np.zeros(700, np.int16), 0.0)  # not a whole number of 10 ms blocks
    ec.far_end(np.zeros(700, np.int16), 0.02)
    assert len(ec._far) == 2
    sizes = [100, 250, 60, 900, 10]
    got = sum(len(ec.near_end(np.zeros(n, np.int16), 0.1 + i * 0.02))
              for i, n in enumerate(sizes))
    assert got == sum(sizes) // 160 * 160
    with pytest.raises(ValueError):
        EchoCanceller(far_rate_hz=44_100)
