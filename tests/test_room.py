"""tests/room.py: the room's pure parts (delay, level, impulse response, noise, clipping,
seeds), its streaming microphone against its offline form, and one real call through it."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.room import (
    DELAY_MS,
    FRAME,
    KNEE,
    PERSON_DBFS,
    RATE,
    RT60_S,
    LoudspeakerPath,
    Room,
    RoomMic,
    RoomSpec,
    active_rms,
    assistant_turns,
    db,
    interrupted_ends,
    loud_frames,
    room_impulse_response,
    soft_clip,
    sound_stop,
)
from tests.utils import piper_speech

SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank."


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return piper_speech(SENTENCE, rate=RATE, lead_s=0.5, tail_s=0.5)


def test_the_echo_arrives_after_the_delay() -> None:
    for delay_ms in (50.0, 137.5, 250.0):
        room = Room(RoomSpec(echo_db=-10.0, delay_ms=delay_ms))
        click = np.zeros(RATE // 2)
        click[0] = 100.0  # far below the loudspeaker's ceiling: linear
        echo = room.echo_of(click)
        delay = round(delay_ms * RATE / 1000)
        assert not echo[:delay].any()
        assert int(np.argmax(np.abs(echo))) == delay  # the direct path is the strongest
        assert echo[delay] == pytest.approx(100.0 * room.gain * room.rir[0], rel=1e-3)


@pytest.mark.parametrize("echo_db", [0.0, -10.0])
def test_the_echo_sits_echo_db_from_the_person(speech: np.ndarray, echo_db: float) -> None:
    """The assistant's voice (the bundled Piper voice, as the cascade speaks) comes back at
    ``echo_db`` relative to the person's level, through the room and the mild clipping."""
    room = Room(RoomSpec.drawn(3, echo_db=echo_db))
    mix = room.render(speech, speech)
    assert db(active_rms(mix.person)) == pytest.approx(PERSON_DBFS + 90.31, abs=0.01)
    assert db(active_rms(mix.echo)) - db(active_rms(mix.person)) == pytest.approx(echo_db,
                                                                                  abs=1.5)
    assert not Room(RoomSpec(echo_db=None)).echo_of(speech).any()  # a headset


@pytest.mark.parametrize("rt60_s", [0.2, 0.35, 0.5])
def test_the_impulse_response_decays_60_db_over_rt60(rt60_s: float) -> None:
    rir = room_impulse_response(rt60_s, seed=5)
    assert float(np.sum(rir ** 2)) == pytest.approx(1.0)
    assert int(np.argmax(np.abs(rir))) == 0  # the direct path first and strongest
    # Schroeder's backward integration; the slope from -5 to -25 dB, extrapolated to -60
    edc = np.cumsum(rir[::-1] ** 2)[::-1]
    edc_db = 10 * np.log10(edc / edc[0])
    t = np.arange(len(rir)) / RATE
    span = (edc_db <= -5) & (edc_db >= -25)
    slope = np.polyfit(t[span], edc_db[span], 1)[0]  # dB per second
    assert -60 / slope == pytest.approx(rt60_s, rel=0.15)


def test_the_streaming_path_is_the_convolution() -> None:
    rng = np.random.default_rng(1)
    rir = room_impulse_response(0.25, seed=2)
    path = LoudspeakerPath(rir, gain=0.5, ceiling=1e9)  # no clipping: linear
    x = rng.standard_normal(FRAME * 20) * 1000
    out = np.concatenate([path.process(x[i:i + FRAME]) for i in range(0, len(x), FRAME)])
    np.testing.assert_allclose(out, np.convolve(0.5 * x, rir)[:len(x)], atol=1e-6)


@pytest.mark.parametrize("noise", ["babble", "street"])
def test_the_noise_is_at_the_snr_measured_in_the_mix(speech: np.ndarray, noise: str) -> None:
    room = Room(RoomSpec(seed=4, echo_db=None, noise=noise, snr_db=10.0))
    # the person speaks across the whole noise loop (a street's swells fall on speech and on
    # pauses alike)
    person = np.tile(speech, -(-len(room.noise()) // len(speech)))[:len(room.noise())]
    mix = room.render(person)
    assert db(active_rms(mix.person)) - db(float(np.sqrt(np.mean(room.noise() ** 2)))) == \
        pytest.approx(10.0, abs=0.01)
    # measured in the microphone signal alone: its power where the person speaks, less its
    # power where the person does not (the noise's)
    blocks = len(person) // FRAME
    power = np.mean(mix.person[:blocks * FRAME].reshape(blocks, FRAME) ** 2, axis=1)
    loud = power >= active_rms(mix.person) ** 2 * 10 ** -3  # the blocks active_rms counts
    quiet = power == 0
    mic = mix.mic[:blocks * FRAME].astype(np.float64).reshape(blocks, FRAME) ** 2
    noise_power = float(np.mean(mic[quiet]))
    speech_power = float(np.mean(mic[loud])) - noise_power
    assert quiet.sum() > 100 and 10 * np.log10(speech_power / noise_power) == \
        pytest.approx(10.0, abs=1.5)
    assert np.abs(mix.mic.astype(np.float64) - (mix.person + mix.noise)).max() <= 0.5


def test_babble_is_speech_of_several_voices_and_street_swells() -> None:
    babble = Room(RoomSpec(seed=1, noise="babble", snr_db=0.0)).noise()
    street = Room(RoomSpec(seed=1, noise="street", snr_db=0.0)).noise()
    for bed in (babble, street):
        assert len(bed) == 30 * RATE
    # babble's energy is in the voice band; the street's below it, and it changes level
    def low_share(x: np.ndarray) -> float:
        spectrum = np.abs(np.fft.rfft(x)) ** 2
        f = np.fft.rfftfreq(len(x), 1 / RATE)
        return float(spectrum[f < 200].sum() / spectrum.sum())
    assert low_share(babble) < 0.3 < low_share(street)
    second = np.sqrt(np.mean(street[:29 * RATE].reshape(29, RATE) ** 2, axis=1))
    assert db(second.max()) - db(second.min()) > 6  # cars pass


def test_the_loudspeaker_clips_mildly_and_never_past_its_ceiling(speech: np.ndarray) -> None:
    x = np.linspace(-10, 10, 2001)
    assert np.abs(soft_clip(x, 2.0)).max() < 2.0
    below = np.linspace(-KNEE, KNEE, 101)
    np.testing.assert_array_equal(soft_clip(below, 1.0), below)  # linear below the knee
    assert np.all(np.diff(soft_clip(x, 2.0)) > 0)  # and smooth, monotonic above it
    room = Room(RoomSpec(echo_db=0.0))
    driven = speech.astype(np.float64) * room.gain
    clipped = soft_clip(driven, room.ceiling)
    assert np.abs(clipped).max() < room.ceiling
    # Piper's peaks reach full scale, 17 dB over its level: the speaker squeezes the few
    # over the knee (12 dB over the voice's level, less 3), by 10 % or more on ~1 % of them
    voiced = np.abs(speech) > 300
    squeezed = (np.abs(clipped) < 0.9 * np.abs(driven))[voiced].mean()
    assert 0.002 < squeezed < 0.05


def test_seeds_reproduce_a_room_and_draw_in_the_ranges(speech: np.ndarray) -> None:
    spec = RoomSpec.drawn(11, noise="street", snr_db=15.0)
    assert spec == RoomSpec.drawn(11, noise="street", snr_db=15.0)
    assert DELAY_MS[0] <= spec.delay_ms <= DELAY_MS[1] and RT60_S[0] <= spec.rt60_s <= RT60_S[1]
    a, b = Room(spec).render(speech, speech), Room(spec).render(speech, speech)
    assert np.array_equal(a.mic, b.mic)
    other = Room(RoomSpec.drawn(12, noise="street", snr_db=15.0)).render(speech, speech)
    assert not np.array_equal(a.mic, other.mic)
    draws = [RoomSpec.drawn(s) for s in range(40)]
    assert len({(d.delay_ms, d.rt60_s) for d in draws}) == 40  # seeds draw different rooms


async def test_the_streaming_microphone_sends_the_offline_room(speech: np.ndarray) -> None:
    """Received frames arrive from the microphone's 4th frame on, one per frame sent (the
    first is heard as 20 ms old): the microphone's frames are the offline room of what was
    received, sample for sample."""
    room = Room(RoomSpec.drawn(9, echo_db=0.0, noise="street", snr_db=20.0))
    mic = RoomMic(room)
    received: list[np.ndarray] = []
    mic.hear(received)
    reply = np.concatenate([np.zeros(FRAME * 3, np.int16), speech[:FRAME * 80],
                            np.zeros(FRAME * 30, np.int16)])
    said = mic.say(speech[:FRAME * 60], at=FRAME * 20)
    for k in range(110):
        if k >= 3 and k - 3 < len(reply) // FRAME:
            received.append(reply[(k - 3) * FRAME:(k - 2) * FRAME])
        await mic.recv()
    mic.stop()
    assert mic.base == 2 * FRAME and mic.starved == 0
    assert said.start == 20 * FRAME and said.onset > said.start
    expected = mic.parts(np.concatenate(received))
    assert np.abs(mic.sent_audio().astype(np.int32) - expected.mic).max() <= 1
    assert active_rms(expected.echo) > 0 and active_rms(expected.noise) > 0


async def test_a_late_received_frame_is_waited_for_then_counted() -> None:
    room = Room(RoomSpec(echo_db=0.0, delay_ms=50.0))
    mic = RoomMic(room, wait_s=0.02)
    received = [np.full(FRAME, 1000, np.int16)]
    mic.hear(received)
    for _ in range(8):  # nothing more arrives
        await mic.recv()
    mic.stop()
    assert mic.starved > 0


def test_the_received_sound_stop_is_found() -> None:
    frames = [np.full(FRAME, 2000 if k < 50 or 60 <= k < 70 else 0, np.int16)
              for k in range(120)]
    loud = loud_frames(frames)
    assert sound_stop(loud, 10, silent_frames=30) == 70  # a 10-frame pause is not a stop
    assert sound_stop(loud, 10, silent_frames=5) == 50
    assert sound_stop(loud[:80], 10, silent_frames=30) is None


# -- one real call through the room --------------------------------------------------------------
async def test_a_real_call_hears_the_parrots_own_voice_come_back_through_the_room() -> None:
    """The parrot (examples/parrot.py) repeats the person, and its voice comes back into the
    microphone at 0 dB through a drawn room. The harness's own guarantees are asserted: the
    microphone sent exactly the room of what the client received, with the reply's echo in
    it at the asked level, and what the client was told of the reply (played out, or cut by
    a barge-in on the echo) is read from its events and its received audio. Whether today's
    code barges in on its own echo is measured by bench/room.py, not asserted here."""
    from examples.parrot import ParrotEngine
    from omnicall.app.config import ServerConfig
    from omnicall.client import connect
    from omnicall.engine.conversation.settings import TurnSettings
    from tests.utils import running_server, wait_for

    # a parrot's voice is its caller's, so its level is the person's
    room = Room(RoomSpec.drawn(7, echo_db=0.0, assistant_dbfs=PERSON_DBFS))
    mic = RoomMic(room)
    engine = ParrotEngine(TurnSettings(turn_model="fixed"))
    config = ServerConfig(engine="loopback", ice_loopback=True, resume_window_s=0)
    async with running_server(config, engine=engine) as (url, _app):
        call = await connect(url, mic)
        try:
            mic.hear(call.received)
            await wait_for(lambda: mic.base is not None, timeout_s=10)
            said = mic.say(piper_speech(SENTENCE, rate=RATE, lead_s=0.3, tail_s=0.0))
            ended = lambda: any(m.get("phase") == "end"  # noqa: E731
                                for m in assistant_turns(call.messages))
            await wait_for(ended, timeout_s=60)
            settled = len(call.received) + 40  # its last sound reaches the client (decoded)
            await wait_for(lambda: len(call.received) >= settled, timeout_s=15)
            await asyncio.sleep(0)
        finally:
            await call.close()
    received = call.received_audio()
    first = assistant_turns(call.messages)[0]
    assert first["phase"] == "start"
    # the loopback is exact: what the microphone sent is the room of what was received
    assert mic.starved == 0
    parts = mic.parts(received)
    assert np.abs(mic.sent_audio().astype(np.int32) - parts.mic).max() <= 1
    # the reply came back into the microphone, after the person's speech, at ~0 dB
    loud = loud_frames(call.received)
    reply_frames = np.flatnonzero(loud[:len(loud)])
    assert mic.base is not None
    reply_starts_at = mic.base + int(reply_frames[0]) * FRAME
    assert reply_starts_at > said.end - FRAME  # the parrot waits for the end of the turn
    echo = parts.echo[reply_starts_at:]
    assert db(active_rms(echo)) - db(active_rms(parts.person)) == pytest.approx(0.0, abs=3.0)
    # what happened to the reply is measured from the client's side alone, consistently
    cut = interrupted_ends(call.messages)
    stop = sound_stop(loud, int(reply_frames[0]), silent_frames=30)
    assert stop is not None  # the reply's sound ended (played out or cut) before the call did
    print(f"room: {room.spec.describe()}; the parrot's reply "
          f"{'was cut by a barge-in' if cut else 'played out'} after "
          f"{(stop - reply_frames[0]) * 20} ms of sound")
