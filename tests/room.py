"""A room you can run in a test: a loudspeaker, an open microphone and background noise, seeded.

The microphone of a kiosk, of a phone on speaker or of a laptop without a headset hears three
things at once, and so does :class:`RoomMic`, a real aiortc audio track:

- the person (their script, levelled to :data:`PERSON_DBFS` of active speech);
- the assistant's voice as the client RECEIVED it, played back through a loudspeaker path
  (:class:`LoudspeakerPath`): a gain that puts it ``echo_db`` relative to the person, the
  loudspeaker's mild clipping (a soft ``tanh`` ceiling ``crest_db`` above the voice's active
  level), a room impulse response made here with numpy (:func:`room_impulse_response`: a
  direct path and an exponentially decaying noise tail of ``rt60_s``) and a delay of
  ``delay_ms`` (the device's playout and capture buffers, the air);
- background noise at ``snr_db`` below the person (:func:`babble_noise`,
  :func:`street_noise`).

Nothing here is a recording (nothing can be downloaded where the tests run): the babble is
six espeak-ng voices reading different sentences at once, the street is shaped pink and
brown noise with passing-car-like swells. They have the spectra and the level changes of
the real thing, not its exact texture; say so wherever a number rests on them.

**Deterministic in content.** Everything is drawn from ``RoomSpec.seed``. The echo is the
reply that really came back: each 20 ms the track emits the person's script + the loudspeaker
path applied to the received stream + the noise, on one sample clock: received sample ``r``
is heard by the microphone at microphone sample ``base + r + delay``, where ``base`` is
fixed when the first received frame is seen. When a received frame it needs is late, the
track waits for it (up to ``wait_s``; what it had to play as silence instead is counted in
``starved``), so what the microphone sent is an exact function of what was received, whatever
the CPU's speed: :meth:`RoomMic.expected` recomputes it offline and a test compares. Verdicts
are then read from what the client received and the events it was sent, never from wall
time.

The offline form (:meth:`Room.render`) gives the same mix for arrays (the engine-level tests
and the bench's recognition measure use it).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any

import av
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from omnicall.media.resample import make_audio_frame

RATE = 48_000
FRAME = 960  # 20 ms, the wire's frame (as Microphone)
PERSON_DBFS = -20.0  # the person's active speech level at the microphone
#: the assistant's voice as received: the bundled Piper voice (the cascade's, and the one
#: tests.utils.piper_speech speaks) measures -17 dBFS of active speech; the loudspeaker's
#: gain is set from this, so the echo sits ``echo_db`` from the person for that voice
ASSISTANT_DBFS = -17.0
DELAY_MS = (50.0, 250.0)  # the ranges a drawn room takes its delay and RT60 from
RT60_S = (0.2, 0.5)
NOISES = ("none", "babble", "street")
BABBLE_VOICES = ("en-us", "en-gb+f3", "en-gb-scotland", "en-us+m3", "en-029+f2",
                 "en-us-nyc+m7")
BABBLE_SENTENCES = (
    "I think the train leaves from platform nine in about ten minutes.",
    "Did you see the game last night? It went to extra time.",
    "We should get coffee before the meeting starts.",
    "My sister moved to a small town near the coast last year.",
    "The tickets were cheaper online, but the queue was shorter here.",
    "Can you hold this for a second while I find my card?",
    "They are building a new library across from the old station.",
    "I left my umbrella at the office again.",
    "The soup here is good, but the bread is even better.",
    "We are waiting for my brother, he is always late.",
    "Turn left at the bakery and walk until you see the bridge.",
    "The museum is closed on Mondays, so let us go tomorrow.",
    "She said the flight was delayed by two hours.",
    "Honestly, I have never seen so many people in this hall.",
    "Do you remember where we parked the car?",
    "The children want ice cream before lunch, of course.",
    "I will call you when I get to the hotel.",
    "This line is for passports, the other one is for tickets.",
)


def db(x: float) -> float:
    return 20 * float(np.log10(max(x, 1e-12)))


def active_rms(x: np.ndarray, block: int = FRAME, within_db: float = 30.0) -> float:
    """RMS over the 20 ms blocks within ``within_db`` of the loudest block: a speech signal's
    level without its pauses (a continuous noise's is close to its plain RMS)."""
    x = np.asarray(x, np.float64)
    n = len(x) // block * block
    if n == 0:
        return float(np.sqrt(np.mean(x ** 2))) if len(x) else 0.0
    power = np.mean(x[:n].reshape(-1, block) ** 2, axis=1)
    active = power[power >= power.max() * 10 ** (-within_db / 10)]
    return float(np.sqrt(np.mean(active))) if len(active) else 0.0


def leveled(x: np.ndarray, dbfs: float) -> np.ndarray:
    """``x`` (int16 or float, in int16 units) scaled to ``dbfs`` of active level, float64."""
    x = np.asarray(x, np.float64)
    rms = active_rms(x)
    return x * (10 ** (dbfs / 20) * 32768 / rms) if rms > 0 else x


def first_loud(x: np.ndarray, below_db: float = 20.0) -> int:
    """The first sample within ``below_db`` of the active level (a speech onset)."""
    x = np.abs(np.asarray(x, np.float64))
    loud = np.flatnonzero(x >= active_rms(x) * 10 ** (-below_db / 20))
    return int(loud[0]) if len(loud) else 0


# -- the loudspeaker path ---------------------------------------------------------------------
def room_impulse_response(rt60_s: float, seed: int, rate: int = RATE,
                          drr_db: float = 3.0) -> np.ndarray:
    """A room's impulse response: a direct path (sample 0), then from 2 ms a tail of seeded
    Gaussian noise whose amplitude decays 60 dB over ``rt60_s`` (a diffuse field), scaled so
    the direct path is ``drr_db`` above the tail's energy; unit energy overall (a speech
    signal keeps its level through it)."""
    rng = np.random.default_rng(seed)
    n = int(rt60_s * rate)
    t = np.arange(n) / rate
    tail = rng.standard_normal(n) * 10 ** (-3 * t / rt60_s)
    tail[:int(0.002 * rate)] = 0.0
    tail *= np.sqrt(10 ** (-drr_db / 10) / float(np.sum(tail ** 2)))
    h = tail
    h[0] = 1.0
    return h / np.sqrt(float(np.sum(h ** 2)))


KNEE = 0.7  # the loudspeaker is linear up to this share of its ceiling


def soft_clip(x: np.ndarray, ceiling: float) -> np.ndarray:
    """A loudspeaker driven near its limit: linear up to ``KNEE * ceiling``, then bending
    smoothly (``tanh``) toward the ceiling, never beyond it."""
    knee = KNEE * ceiling
    over = np.abs(x) - knee
    bent = np.sign(x) * (knee + (ceiling - knee) * np.tanh(over / (ceiling - knee)))
    return np.where(over > 0, bent, x)


class LoudspeakerPath:
    """The received audio -> gain -> soft clip -> room impulse response, streaming in 20 ms
    blocks (overlap-add, float64); the delay is applied by whoever places the output on the
    microphone's clock (:meth:`Room.echo_of` and :class:`RoomMic`)."""

    def __init__(self, rir: np.ndarray, gain: float, ceiling: float) -> None:
        self.rir, self.gain, self.ceiling = rir, gain, ceiling
        self._size = 1 << int(np.ceil(np.log2(FRAME + len(rir) - 1)))
        self._spectrum = np.fft.rfft(rir, self._size)
        self._tail = np.zeros(len(rir) - 1)

    def process(self, block: np.ndarray) -> np.ndarray:
        """One block of exactly :data:`FRAME` received samples -> :data:`FRAME` of echo."""
        x = soft_clip(np.asarray(block, np.float64) * self.gain, self.ceiling)
        out = np.fft.irfft(np.fft.rfft(x, self._size) * self._spectrum,
                           self._size)[:FRAME + len(self._tail)]
        out[:len(self._tail)] += self._tail
        self._tail = out[FRAME:].copy()
        return out[:FRAME]


# -- background noise ---------------------------------------------------------------------------
def _shaped(n: int, rng: np.random.Generator, exponent: float, rate: int,
            highpass_hz: float = 20.0) -> np.ndarray:
    """Gaussian noise with a 1/f**exponent power spectrum (1: pink, 2: brown), unit RMS."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / rate)
    spectrum *= 1 / np.maximum(f, highpass_hz) ** (exponent / 2)
    noise = np.fft.irfft(spectrum, n)
    return noise / np.sqrt(np.mean(noise ** 2))


def street_noise(seconds: float, seed: int, rate: int = RATE) -> np.ndarray:
    """A street, synthesized: a brown-noise rumble, a pink-noise hiss, and passing cars (brown
    noise, low-passed, under a Gaussian swell of 1.5-4 s every 3-9 s, rising 6-14 dB above the
    floor). Unit RMS, float64."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    floor = _shaped(n, rng, 2.0, rate) + 0.4 * _shaped(n, rng, 1.0, rate)
    cars = np.zeros(n)
    t = np.arange(n) / rate
    at = rng.uniform(0, 3)
    while at < seconds + 2:
        width = rng.uniform(1.5, 4.0) / 2.355  # FWHM -> sigma
        rise = 10 ** (rng.uniform(6, 14) / 20)
        cars += rise * np.exp(-0.5 * ((t - at) / width) ** 2)
        at += rng.uniform(3, 9)
    engine = _shaped(n, rng, 2.0, rate, highpass_hz=60.0)
    noise = floor + cars * engine
    return noise / np.sqrt(np.mean(noise ** 2))


_babble_talkers: dict[tuple[str, int, int, int], np.ndarray] = {}


def babble_noise(seconds: float, seed: int, rate: int = RATE, talkers: int = 6) -> np.ndarray:
    """A crowd, synthesized: ``talkers`` espeak-ng voices (accents, pitches, 150-185 words a
    minute), each reading different sentences of :data:`BABBLE_SENTENCES` (a seeded order)
    with short pauses, levelled alike, started at different moments and mixed. Unit RMS."""
    from tests.utils import espeak_speech

    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    mix = np.zeros(n)
    for k in range(talkers):
        voice = BABBLE_VOICES[k % len(BABBLE_VOICES)]
        order = rng.permutation(len(BABBLE_SENTENCES))
        speed = int(rng.integers(150, 186))
        key = (voice, speed, int(order[0]) * 100 + int(order[1]), rate)
        talk = _babble_talkers.get(key)
        if talk is None:
            text = " ".join(BABBLE_SENTENCES[i] for i in order)
            talk = leveled(espeak_speech(text, voice, rate=rate, lead_s=0.0, tail_s=0.3,
                                         words_per_min=speed), -20.0)
            _babble_talkers[key] = talk
        reps = int(np.ceil((n + len(talk)) / len(talk)))
        start = int(rng.integers(0, len(talk)))
        mix += np.tile(talk, reps)[start:start + n]
    return mix / np.sqrt(np.mean(mix ** 2))


def noise_of(kind: str, seconds: float, seed: int, rate: int = RATE) -> np.ndarray:
    if kind == "babble":
        return babble_noise(seconds, seed, rate)
    if kind == "street":
        return street_noise(seconds, seed, rate)
    if kind == "none":
        return np.zeros(int(seconds * rate))
    raise ValueError(f"noise must be one of {NOISES}")


# -- the room -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RoomSpec:
    """One room. ``echo_db`` None: no loudspeaker reaches the microphone (a headset)."""

    seed: int = 0
    echo_db: float | None = 0.0  # the assistant's voice at the microphone, re the person
    delay_ms: float = 120.0
    rt60_s: float = 0.3
    drr_db: float = 3.0  # the direct path over the reverberant tail
    crest_db: float = 12.0  # the loudspeaker's ceiling over the voice's active level
    noise: str = "none"
    snr_db: float = 20.0  # the person's active level over the noise's RMS
    noise_s: float = 30.0  # the noise loop's length
    person_dbfs: float = PERSON_DBFS
    #: the assistant's voice's active level as received (the gain is set from it): the
    #: bundled Piper voice's by default; a parrot's is its caller's
    assistant_dbfs: float = ASSISTANT_DBFS

    @classmethod
    def drawn(cls, seed: int, **fixed: Any) -> RoomSpec:
        """A room whose delay and RT60 are drawn from ``seed`` in :data:`DELAY_MS` and
        :data:`RT60_S` (``fixed`` sets any field, those too)."""
        rng = np.random.default_rng([seed, 33])
        drawn = {"delay_ms": round(float(rng.uniform(*DELAY_MS)), 1),
                 "rt60_s": round(float(rng.uniform(*RT60_S)), 3)}
        return cls(seed=seed, **{**drawn, **fixed})

    def with_(self, **changes: Any) -> RoomSpec:
        return replace(self, **changes)

    def describe(self) -> str:
        echo = "no echo" if self.echo_db is None else \
            f"echo {self.echo_db:+.0f} dB delay {self.delay_ms:.0f} ms RT60 {self.rt60_s:.2f} s"
        noise = "no noise" if self.noise == "none" else f"{self.noise} at {self.snr_db:.0f} dB SNR"
        return f"seed {self.seed}: {echo}, {noise}"


@dataclass
class Mix:
    """A rendered microphone signal and its parts (float64, int16 units) at ``rate``."""

    person: np.ndarray
    echo: np.ndarray
    noise: np.ndarray
    mic: np.ndarray  # int16: their sum, rounded and clipped as an ADC does


class Room:
    def __init__(self, spec: RoomSpec) -> None:
        self.spec = spec
        self.rir = room_impulse_response(spec.rt60_s, spec.seed, drr_db=spec.drr_db)
        self.delay = round(spec.delay_ms * RATE / 1000)
        echo_db = -200.0 if spec.echo_db is None else spec.echo_db
        self.gain = 10 ** ((spec.person_dbfs + echo_db - spec.assistant_dbfs) / 20)
        self.ceiling = 10 ** ((spec.assistant_dbfs + spec.crest_db) / 20) * 32768 * self.gain
        self._noise: dict[int, np.ndarray] = {}

    def path(self) -> LoudspeakerPath:
        return LoudspeakerPath(self.rir, self.gain, self.ceiling)

    def noise(self, rate: int = RATE) -> np.ndarray:
        """The noise loop at its level (float64, int16 units)."""
        bed = self._noise.get(rate)
        if bed is None:
            unit = noise_of(self.spec.noise, self.spec.noise_s, self.spec.seed, rate)
            bed = unit * 10 ** ((self.spec.person_dbfs - self.spec.snr_db) / 20) * 32768
            self._noise[rate] = bed
        return bed

    def noise_at(self, start: int, n: int, rate: int = RATE) -> np.ndarray:
        bed = self.noise(rate)
        index = (start + np.arange(n)) % len(bed)
        return bed[index]

    def person(self, speech: np.ndarray) -> np.ndarray:
        return leveled(speech, self.spec.person_dbfs)

    def echo_of(self, played: np.ndarray, n: int | None = None) -> np.ndarray:
        """What the microphone hears of ``played`` (48 kHz; sample 0 played at mic sample 0),
        ``n`` samples long (default: as long as ``played``)."""
        n = len(played) if n is None else n
        if self.spec.echo_db is None:
            return np.zeros(n)
        path = self.path()
        blocks = -(-max(0, n - self.delay) // FRAME)
        x = np.zeros(blocks * FRAME)
        x[:min(len(played), len(x))] = played[:len(x)]
        out = np.concatenate([np.zeros(self.delay)] + [path.process(x[i:i + FRAME])
                                                       for i in range(0, len(x), FRAME)])
        return out[:n]

    def render(self, person: np.ndarray | None = None, played: np.ndarray | None = None,
               rate: int = RATE, leveled_person: bool = True, noise_from: int = 0) -> Mix:
        """The offline room: ``person`` (levelled to the spec's, unless told) + the echo of
        ``played`` (48 kHz only) + the noise from its sample ``noise_from``, as long as the
        longer input."""
        if played is not None and len(played) and rate != RATE:
            raise ValueError("the loudspeaker path runs at 48 kHz")
        n = max(len(person) if person is not None else 0, len(played) if played is not None
                else 0)
        voice = np.zeros(n)
        if person is not None and len(person):
            voice[:len(person)] = self.person(person) if leveled_person else person
        echo = self.echo_of(played, n) if played is not None else np.zeros(n)
        noise = self.noise_at(noise_from, n, rate)
        mic = np.clip(np.round(voice + echo + noise), -32768, 32767).astype(np.int16)
        return Mix(voice, echo, noise, mic)


# -- the streaming form: a real call's microphone ------------------------------------------------
@dataclass
class Said:
    start: int  # the microphone sample where it starts
    onset: int  # ... where its speech starts (first sound within 20 dB of its level)
    end: int  # ... one past its last sample
    samples: np.ndarray  # levelled, float64


class RoomMic(MediaStreamTrack):
    """The client's microphone in ``room``, paced in real time (20 ms stereo frames at 48 kHz,
    as :class:`tests.utils.Microphone`). :meth:`hear` gives it the client's received frames
    (``Call.received``); :meth:`say` queues the person's speech."""

    kind = "audio"

    def __init__(self, room: Room, wait_s: float = 1.0, record: bool = True) -> None:
        super().__init__()
        self.room = room
        self.wait_s = wait_s  # how long a frame waits for received audio it needs
        self.record = record
        self.sent = 0  # microphone samples sent
        self.base: int | None = None  # microphone sample of received sample 0
        self.starved = 0  # echo samples played as silence: their received audio was late
        self.script: list[Said] = []
        self.frames: list[np.ndarray] = []  # what it sent, int16 mono
        self._received: list[np.ndarray] | None = None
        self._path = room.path()
        self._echo: list[np.ndarray] = []  # the path's output per received frame (no delay)
        self._start: float | None = None

    def hear(self, received: list[np.ndarray]) -> None:
        """Play back what the client receives (a list its recorder appends frames to)."""
        self._received = received

    def say(self, speech48k: np.ndarray, at: int | None = None, level_db: float = 0.0) -> Said:
        """The person says ``speech48k`` from microphone sample ``at`` (default: the next
        frame not yet sent, or when the speech queued before ends). Levelled to the room's
        person level, ``level_db`` over it (another voice in the room: a bystander, a TV)."""
        samples = self.room.person(speech48k) * 10 ** (level_db / 20)
        start = self.sent if at is None else max(at, self.sent)
        if at is None and self.script:
            start = max(start, self.script[-1].end)
        said = Said(start, start + first_loud(samples), start + len(samples), samples)
        self.script.append(said)
        return said

    def sent_at_s(self, sample: int) -> float:
        """When microphone sample ``sample`` was (or will be) sent, on ``time.monotonic``'s
        clock (the track is paced in real time from its first frame)."""
        if self._start is None:
            raise RuntimeError("the microphone has not sent anything yet")
        return self._start + sample / RATE

    @property
    def speaking(self) -> bool:
        return any(s.end > self.sent for s in self.script)

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        wait = self._start + self.sent / RATE - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        chunk = await self._next()
        frame = make_audio_frame(np.repeat(chunk, 2), RATE, pts=self.sent, layout="stereo")
        self.sent += FRAME
        return frame

    async def _next(self) -> np.ndarray:
        m = self.sent
        received = self._received
        if self.base is None and received:
            self.base = m - len(received) * FRAME
        echo = np.zeros(FRAME)
        if self.base is not None and received is not None:
            lo = m - self.base - self.room.delay  # the echo stream's index of sample m
            need = -(-(lo + FRAME) // FRAME)  # received frames that covers
            for _ in range(int(self.wait_s / 0.002)):  # the frames it needs, if late
                if len(received) >= need:
                    break
                await asyncio.sleep(0.002)
            while len(self._echo) < len(received):
                self._echo.append(self._path.process(received[len(self._echo)]))
            echo = self._echo_range(lo, FRAME)
        person = np.zeros(FRAME)
        for said in self.script:
            a, b = max(m, said.start), min(m + FRAME, said.end)
            if a < b:
                person[a - m:b - m] += said.samples[a - said.start:b - said.start]
        noise = self.room.noise_at(m, FRAME)
        chunk = np.clip(np.round(person + echo + noise), -32768, 32767).astype(np.int16)
        if self.record:
            self.frames.append(chunk)
        return chunk

    def _echo_range(self, lo: int, n: int) -> np.ndarray:
        out = np.zeros(n)
        for k in range(max(0, lo // FRAME), -(-(lo + n) // FRAME)):
            a, b = max(lo, k * FRAME), min(lo + n, (k + 1) * FRAME)
            if k < len(self._echo):
                out[a - lo:b - lo] = self._echo[k][a - k * FRAME:b - k * FRAME]
            elif a < b and self.room.spec.echo_db is not None:
                self.starved += b - a
        return out

    # -- for the checks ---------------------------------------------------------------------
    def sent_audio(self) -> np.ndarray:
        return np.concatenate(self.frames) if self.frames else np.zeros(0, np.int16)

    def parts(self, received: np.ndarray) -> Mix:
        """What the microphone should have sent, recomputed offline from ``received`` (all
        the client received, concatenated), the script and the noise, with its parts: its
        ``mic`` equals :meth:`sent_audio` (to the rounding of a sample) when nothing
        starved."""
        n = len(self.frames) * FRAME
        base = self.base if self.base is not None else n
        played = np.zeros(n)
        if base < n:
            seg = received[max(0, -base):n - base].astype(np.float64)
            played[max(0, base):max(0, base) + len(seg)] = seg
        person = np.zeros(n)
        for said in self.script:
            end = min(n, said.end)
            if said.start < end:
                person[said.start:end] += said.samples[:end - said.start]
        mix = self.room.render(person, played, leveled_person=False)
        return mix


# -- what the client received, and what it was told --------------------------------------------
LOUD_RMS = 300.0  # a received 20 ms block with the assistant's voice in it


def loud_frames(received: list[np.ndarray]) -> np.ndarray:
    """One bool per received frame: the assistant's voice is in it."""
    return np.array([float(np.sqrt(np.mean(f.astype(np.float64) ** 2))) > LOUD_RMS
                     for f in received], bool)


def sound_stop(loud: np.ndarray, from_frame: int, silent_frames: int = 30) -> int | None:
    """The first received frame at or after ``from_frame`` that begins ``silent_frames`` of
    silence (the reply's sound stopped), or None if it never did in what was received."""
    run = 0
    for k in range(max(0, from_frame), len(loud)):
        run = 0 if loud[k] else run + 1
        if run == silent_frames:
            return k - silent_frames + 1
    return None


#: a kiosk's welcome of ~8 s in the bundled voice: long enough to speak over, short to wait for
KIOSK_GREETING = (
    "Welcome to the city museum. The special exhibition about the harbor is in the east "
    "wing, and the cafe on the ground floor is open until six in the evening.")


async def room_call(url: str, spec: RoomSpec, mode: str | None = None) -> tuple[RoomMic, Any]:
    """A real aiortc call to the server at ``url`` whose microphone is ``spec``'s room,
    hearing what the call receives; ``mode``: the page mode its offer names. Returns the
    microphone and the client (``tests.utils.Call``)."""
    from omnicall.client import connect

    mic = RoomMic(Room(spec), record=False)
    client = await connect(url, mic, body=None if mode is None else {"mode": mode})
    mic.hear(client.received)
    return mic, client


async def until_heard(client: Any, seconds: float, timeout_s: float = 60.0) -> None:
    """Until the client has received ``seconds`` of the assistant's voice."""
    from tests.utils import wait_for

    await wait_for(lambda: loud_frames(client.received).sum() * FRAME / RATE >= seconds,
                   timeout_s=timeout_s)


def assistant_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The assistant's turn events the client was sent (start and end), in order."""
    return [m for m in messages if m.get("type") == "turn" and m.get("role") == "assistant"]


def interrupted_ends(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in assistant_turns(messages) if m.get("phase") == "end"
            and m.get("interrupted")]
