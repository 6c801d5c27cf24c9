"""Echo cancellation and noise suppression of one call's microphone, with the exact reference.

The media plane knows every 20 ms frame of the assistant's voice it sent and when (the paced
track). :class:`EchoCanceller` takes those frames as the far end (:meth:`far_end`, 48 kHz as
sent, or 16/24/32 kHz) and the caller's 16 kHz audio as the near end (:meth:`near_end`, the
80 ms frames the audio ring forms, before the VAD, the turn detector and the ASR read them),
and runs them through WebRTC's audio processing module (AEC3, its noise suppressor and its
high-pass filter) from the ``livekit`` package (LiveKit's Python RTC SDK: the module is
compiled into the wheel, no download, no model file), 10 ms at a time. Synchronous and free of
I/O: every call passes its own times, so tests drive it without a network or a clock.

Pairing the two ends. AEC3 expects the far end's 10 ms blocks interleaved with the near end's
about as the sound card would deliver them. Here the near end comes over the network in
bursts, so each near-end block is placed on the call's clock by its own sample count: its
capture time is ``anchor + samples_before_it / 16 kHz``, where ``anchor`` is the smallest
``arrival - media time`` seen so far (the least-delayed packet: network jitter and bursts do
not move it), relaxed upward by at most ``ANCHOR_RELAX`` (200 ppm, above sound-card clock
drift) and reset when the caller's audio resumes after a gap the ingest did not fill. Before
each near-end block, every far-end block sent up to its capture time (less ``delay_hint_ms``)
goes to AEC3, so it sees the echo ``d`` after its reference, where ``d`` is the echo path as
the server sees it: the network's least one-way delay out and in, the browser's jitter buffer
and playout, the loudspeaker, the room, the microphone and the browser's capture framing.

How far that reaches. AEC3's delay estimator (5 matched filters of 32 sub-blocks of 4 ms,
each shifted by 24 sub-blocks, on the signal decimated by 4) searches lags of 0 to about 500
ms, and its adaptive filter then models about 50 ms of the room's tail past that lag.
Measured with this class (tests/test_echo_canceller.py, speech through a room impulse
response): 44-45 dB of echo return loss enhancement at 50, 150, 250, 400 and 500 ms, none at
600 ms. ``delay_hint_ms`` holds the reference back that long before AEC3 sees it, moving the
window to ``[hint, hint + 500]`` ms for a deployment whose round trip is known to be long
(satellite links, a TURN relay on another continent); the module's own
``set_stream_delay_ms`` does not widen it (measured: no change up to 500 ms, worse at a 300 ms
hint), so it is not used.

Only while an echo can be there. With the noise suppressor off, the caller's audio passes
unchanged while no echo of the assistant's voice can be in it: from :data:`ECHO_REACH_S` after
the last far-end block with sound was given to AEC3 (its reach, plus the room's tail) until the
next one. AEC3 still sees every block, so it stays converged, but its output is used only
while it has an echo to remove: it costs words even with none (Whisper tiny.en on the room
bench's set, no far end: WER 0.129 with AEC3's output against 0.081 for the raw audio). The
switch crossfades over one 10 ms block.

Only where there is an echo at all. With no echo path (a headset, earbuds, a browser whose own
canceller left none) AEC3's filter never converges and its suppressor takes the caller's voice
under the reply for the echo it expects (a caller 10 dB under the reply came out 30-60 dB
lower; over a headset the kiosk page missed 2 of 4 interruptions). :class:`EchoPresence`
(``media/echo_presence.py``) checks each call's reference against its microphone; once it
finds no echo, the raw audio passes there too. Until it has decided (about a second of the
assistant talking) the output is used, the safe side for a loudspeaker.

Bounded: the far-end blocks waiting for their near end are at most ``max_far_blocks`` (1 s);
past that (the caller's audio stopped arriving while the assistant kept talking) the oldest are
dropped (``far_dropped`` counts them), and at most ``MAX_RELEASE_BLOCKS`` are given to AEC3
before one near-end block (older ones are dropped too: AEC3 resets its alignment on a render
burst anyway). The carried remainders are under 10 ms each.

Cost: about 8 ms of one core per second of call with both on (0.8 %: AEC3 7, the suppressor 2;
measured with the test module's simulated call, framing included; never asserted).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from omnicall.media.echo_presence import EchoPresence
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ, OPUS_RATE_HZ

logger = logging.getLogger(__name__)

BLOCK_MS = 10  # the audio processing module's frame
NEAR_BLOCK = INPUT_RATE_HZ * BLOCK_MS // 1000  # 160
FAR_RATES_HZ = (16_000, 24_000, 32_000, 48_000)
ANCHOR_RELAX = 2e-4  # the near end's anchor may move later by this many seconds per second
REANCHOR_S = 0.5  # arrival this much later than the anchor predicts: the caller's audio resumed
TOLERANCE_BLOCKS = 3  # the pairing follows the clock only when it is off by more than 30 ms
MAX_RELEASE_BLOCKS = 20  # far-end blocks given to AEC3 before one near-end block, at most
DEFAULT_MAX_FAR_BLOCKS = 100  # 1 s of far end waiting for its near end
#: an echo can reach the microphone this long after its far-end block was given to AEC3
#: (its delay search's 0.5 s and the room's tail)
ECHO_REACH_S = 0.6
SOUND_PEAK = 32  # a far-end block whose peak is above this (about -60 dBFS) has sound
#: ``passes_raw`` asks this much more than ECHO_REACH_S: the near end's blocks are judged by
#: their capture time, which trails their arrival by the network's jitter and the reorder
#: buffer's hold (at most 120 ms), and the far end is paired within 30 ms
RAW_MARGIN_S = 0.2


@dataclass(frozen=True, slots=True)
class RoomSettings:
    """What runs on a call's microphone: AEC3 (needs the far end), the noise suppressor."""

    echo_cancellation: bool = True
    noise_suppression: bool = True

    @property
    def any(self) -> bool:
        return self.echo_cancellation or self.noise_suppression


def _audio_processing(echo_cancellation: bool, noise_suppression: bool) -> Any:
    from livekit import rtc  # loads the module's native library: only when a call uses it

    return rtc.AudioProcessingModule(echo_cancellation=echo_cancellation,
                                     noise_suppression=noise_suppression,
                                     high_pass_filter=True, auto_gain_control=False)


def _has_sound(samples: Int16Array) -> bool:
    """Whether a far-end block (or frame) peaks above :data:`SOUND_PEAK`."""
    return bool(len(samples)) and (int(samples.max()) > SOUND_PEAK
                                   or int(samples.min()) < -SOUND_PEAK)


def _frame(samples: Int16Array, rate_hz: int) -> Any:
    from livekit import rtc

    return rtc.AudioFrame(bytearray(samples.tobytes()), rate_hz, 1, len(samples))


class EchoCanceller:
    """One call's AEC3 and noise suppressor; see the module's docstring."""

    def __init__(self, settings: RoomSettings = RoomSettings(), *,
                 far_rate_hz: int = OPUS_RATE_HZ, delay_hint_ms: int = 0,
                 max_far_blocks: int = DEFAULT_MAX_FAR_BLOCKS) -> None:
        if far_rate_hz not in FAR_RATES_HZ:
            raise ValueError(f"far_rate_hz must be one of {FAR_RATES_HZ}")
        if not 0 <= delay_hint_ms <= 2000:
            raise ValueError("delay_hint_ms must be in [0, 2000]")
        if max_far_blocks < 1:
            raise ValueError("max_far_blocks must be >= 1")
        self.settings = settings
        self.far_rate_hz = far_rate_hz
        self._far_block = far_rate_hz * BLOCK_MS // 1000
        self._hint_s = delay_hint_ms / 1000
        self._apm = _audio_processing(settings.echo_cancellation, settings.noise_suppression)
        # far end: (sent at, 10 ms block) waiting for the near end's clock to reach it
        self._far: deque[tuple[float, Int16Array]] = deque(maxlen=max_far_blocks)
        self._far_rest = np.zeros(0, np.int16)  # under one block, carried
        self._far_rest_at = 0.0
        self._near_rest = np.zeros(0, np.int16)  # under one block, carried
        self._near_samples = 0  # near-end samples processed: its media clock
        self._anchor: float | None = None
        self._anchor_at = 0.0  # the near end's media time when the anchor was last moved
        self.far_blocks = 0
        self.far_dropped = 0
        self.near_blocks = 0
        self.reanchors = 0
        self.realignments = 0
        self._paired = False
        self._last_given_s = float("-inf")
        #: the far end's time until which an echo of what was given can reach the microphone
        self._echo_until_s = float("-inf")
        #: when the last far-end frame with sound was sent (given to AEC3 or not yet)
        self._sound_sent_s = float("-inf")
        #: how much of AEC3's output the near end's last sample was (1: all; 0: the raw input)
        self._cleaned = 0.0
        #: the raw input passes while no echo can be there (not with the suppressor on)
        self._pass_without_echo = settings.echo_cancellation and not settings.noise_suppression
        self.passed_blocks = 0
        #: whether the microphone hears the assistant at all (with none, AEC3's output
        #: would take the caller's voice for the echo it expects: the raw input passes)
        self.presence = EchoPresence()

    @property
    def cancels_echo(self) -> bool:
        return self.settings.echo_cancellation

    @property
    def no_echo(self) -> bool:
        """The microphone was found not to hear the assistant (a headset, or a client whose
        own canceller left no echo); until then an echo is assumed."""
        return self.presence.echo is False

    # -- far end -------------------------------------------------------------------------
    def far_end(self, samples: Int16Array, sent_s: float) -> None:
        """One frame of the assistant's voice (or the silence sent in its place), mono int16
        at ``far_rate_hz``, handed to the network at ``sent_s`` (the call's clock)."""
        if not self.settings.echo_cancellation:
            return
        if _has_sound(samples):
            self._sound_sent_s = sent_s + len(samples) / self.far_rate_hz
        block = self._far_block
        if len(self._far_rest):
            samples = np.concatenate([self._far_rest, samples])
            start = self._far_rest_at
        else:
            start = sent_s
        whole = len(samples) // block * block
        for pos in range(0, whole, block):
            if len(self._far) == self._far.maxlen:
                self.far_dropped += 1  # the deque drops its oldest
            self._far.append((start + pos / self.far_rate_hz, samples[pos:pos + block]))
        self._far_rest = samples[whole:].copy()
        self._far_rest_at = start + whole / self.far_rate_hz

    def passes_raw(self, now_s: float) -> bool:
        """Whether the caller's audio arriving now will pass unchanged: the suppressor is
        off, the output is not (being crossfaded to) AEC3's, and no echo can be in it (the
        microphone was found to hear none, or no sound was sent for :data:`ECHO_REACH_S`
        and :data:`RAW_MARGIN_S`).
        A reader may then use the raw audio before its frame is formed (the listener's
        VAD: ``AudioRing.ahead``)."""
        if not self._pass_without_echo or self._cleaned != 0.0:
            return False
        if self.presence.echo is False:
            return True
        return now_s - self._hint_s > self._sound_sent_s + ECHO_REACH_S + RAW_MARGIN_S

    # -- near end ------------------------------------------------------------------------
    def near_end(self, samples: Int16Array, arrived_s: float) -> Int16Array:
        """The caller's 16 kHz mono audio (any length; the audio ring gives 80 ms frames),
        whose last sample arrived at ``arrived_s``: returns it cleaned, as many samples as
        came (a remainder under 10 ms is carried: the output then lags by it, its length
        always matches over time)."""
        if len(self._near_rest):
            samples = np.concatenate([self._near_rest, samples])
        whole = len(samples) // NEAR_BLOCK * NEAR_BLOCK
        self._near_rest = samples[whole:].copy()
        if whole == 0:
            return np.zeros(0, np.int16)
        end_media_s = (self._near_samples + whole) / INPUT_RATE_HZ
        self._move_anchor(arrived_s - end_media_s, end_media_s)
        assert self._anchor is not None
        out = np.empty(whole, np.int16)
        for pos in range(0, whole, NEAR_BLOCK):
            captured_s = self._anchor + self._near_samples / INPUT_RATE_HZ
            given = self._release_far(captured_s - self._hint_s)
            raw = samples[pos:pos + NEAR_BLOCK]
            frame = _frame(raw, INPUT_RATE_HZ)
            self._apm.process_stream(frame)
            cleaned = np.frombuffer(frame.data, np.int16)
            if self._pass_without_echo:
                self.presence.feed(given, raw)
                echo = captured_s - self._hint_s <= self._echo_until_s and \
                    self.presence.echo is not False
                cleaned = self._blend(raw, cleaned, 1.0 if echo else 0.0)
            out[pos:pos + NEAR_BLOCK] = cleaned
            self._near_samples += NEAR_BLOCK
            self.near_blocks += 1
        return out

    def _blend(self, raw: Int16Array, cleaned: Int16Array, target: float) -> Int16Array:
        """AEC3's output, the raw input, or a 10 ms crossfade from one to the other."""
        start, self._cleaned = self._cleaned, target
        if start == target:
            if target == 0.0:
                self.passed_blocks += 1
                return raw
            return cleaned
        weight = np.linspace(start, target, NEAR_BLOCK, endpoint=False) + \
            (target - start) / NEAR_BLOCK
        mixed = weight * cleaned + (1.0 - weight) * raw
        return np.clip(np.round(mixed), -32768, 32767).astype(np.int16)

    def _move_anchor(self, offset_s: float, media_s: float) -> None:
        if self._anchor is None:
            self._anchor, self._anchor_at = offset_s, media_s
            return
        relaxed = self._anchor + (media_s - self._anchor_at) * ANCHOR_RELAX
        if offset_s - relaxed > REANCHOR_S:
            self.reanchors += 1  # a gap the ingest did not fill: the near end's clock jumped
            self._anchor = offset_s
        else:
            self._anchor = min(relaxed, offset_s)
        self._anchor_at = media_s

    def _release_far(self, until_s: float) -> Int16Array | None:
        """One far-end block goes to AEC3 per near-end block, as a sound card pairs them,
        while that stays within ``TOLERANCE_BLOCKS`` of the blocks sent by ``until_s``; past
        it (the clocks drifted, the caller's audio stalled or resumed) the pairing jumps to
        them: the extra blocks are given at once (at most ``MAX_RELEASE_BLOCKS``, older ones
        dropped), or none until the near end catches up. Returns the last block given (None:
        none)."""
        due = 0
        while due < len(self._far) and self._far[due][0] <= until_s:
            due += 1
        # how far the pairing is from the clock, in blocks: behind (due blocks piled up)
        # or ahead (the last block given was sent after until_s)
        off = due - 1 if due or self._last_given_s == float("-inf") else \
            -round((self._last_given_s - until_s) * 1000 / BLOCK_MS)
        if not self._paired:
            give = due  # the first near-end block: the clock sets the pairing
        elif abs(off) <= TOLERANCE_BLOCKS:
            give = min(1, len(self._far))  # the steady pairing: jitter does not move it
        else:
            give = due  # a real jump: catch up at once, or give none until the clock does
            self.realignments += 1
        self._paired = True
        for _ in range(max(0, give - MAX_RELEASE_BLOCKS)):
            self._far.popleft()
            self.far_dropped += 1
        block = None
        for _ in range(min(give, MAX_RELEASE_BLOCKS)):
            self._last_given_s, block = self._far.popleft()
            self._apm.process_reverse_stream(_frame(block, self.far_rate_hz))
            self.far_blocks += 1
            if _has_sound(block):
                self._echo_until_s = self._last_given_s + BLOCK_MS / 1000 + ECHO_REACH_S
        return block

    def stats(self) -> dict[str, int]:
        return {"aec_far_blocks": self.far_blocks, "aec_far_dropped": self.far_dropped,
                "aec_near_blocks": self.near_blocks, "aec_passed_blocks": self.passed_blocks,
                "aec_reanchors": self.reanchors,
                "aec_realignments": self.realignments}
