"""Audio format conversion with ``av.AudioResampler``: any layout/format/rate -> mono s16.

Pure and synchronous: feed ``av.AudioFrame`` s (or int16 arrays), get int16 mono arrays at
the target rate. swresample keeps a few samples of filter history (16 at 48 -> 16 kHz), so
output lengths are not exactly proportional per call, but the stream as a whole is.
A change of input rate or layout mid-stream (renegotiation, odd clients) rebuilds the
resampler instead of failing.
"""

from __future__ import annotations

import logging
from fractions import Fraction

import av
import numpy as np
import numpy.typing as npt

from omnicall.media.log_limit import worth_logging
from omnicall.media.timebase import time_base_for_rate

logger = logging.getLogger(__name__)

Int16Array = npt.NDArray[np.int16]

MAX_INPUT_RATE_HZ = 384_000
MIN_INPUT_RATE_HZ = 4_000


class UnsupportedAudioError(ValueError):
    """An input frame this converter refuses (absurd rate, no samples...)."""


class AudioConverter:
    """Converts audio frames to mono int16 at ``rate_hz``."""

    def __init__(self, rate_hz: int) -> None:
        self.rate_hz = rate_hz
        self._resampler: av.AudioResampler | None = None
        self._input_key: tuple[str, str, int] | None = None
        self.rebuilds = 0

    def _resampler_for(self, frame: av.AudioFrame) -> av.AudioResampler:
        key = (frame.format.name, frame.layout.name, int(frame.sample_rate))
        if self._resampler is None or key != self._input_key:
            if self._input_key is not None:
                self.rebuilds += 1
                if worth_logging(self.rebuilds):  # a client flipping formats logs little
                    logger.info("audio input changed %s -> %s; rebuilding resampler (%d)",
                                self._input_key, key, self.rebuilds)
            self._resampler = av.AudioResampler(format="s16", layout="mono", rate=self.rate_hz)
            self._input_key = key
        return self._resampler

    def convert(self, frame: av.AudioFrame) -> Int16Array:
        rate = int(frame.sample_rate or 0)
        if not MIN_INPUT_RATE_HZ <= rate <= MAX_INPUT_RATE_HZ:
            raise UnsupportedAudioError(f"unsupported sample rate {rate} Hz")
        if frame.samples <= 0:
            raise UnsupportedAudioError("audio frame without samples")
        resampler = self._resampler_for(frame)
        # The resampler derives output pts from input pts; frames without pts get a fresh
        # time base so av never has to guess.
        frame.pts = None
        out = resampler.resample(frame)
        if not out:
            return np.zeros(0, dtype=np.int16)
        return _join(out)

    def flush(self) -> Int16Array:
        """Return the samples the resampler still holds and start afresh."""
        resampler, self._resampler, self._input_key = self._resampler, None, None
        if resampler is None:
            return np.zeros(0, dtype=np.int16)
        out = resampler.resample(None)
        if not out:
            return np.zeros(0, dtype=np.int16)
        return _join(out)

    def reset(self) -> None:
        """Forget held samples (barge-in)."""
        self._resampler = None
        self._input_key = None

    def convert_array(self, samples: Int16Array, rate_hz: int) -> Int16Array:
        """Convert a mono int16 array at ``rate_hz``."""
        if rate_hz == self.rate_hz:
            return samples
        return self.convert(make_audio_frame(samples, rate_hz))


class StreamConverter:
    """A live stream converted chunk by chunk, each chunk giving its whole share of output.

    A resampler holds back its filter delay (a few samples) on the first chunk; cut into
    fixed frames downstream, every frame would then wait for the next chunk. Here that delay
    is paid once, as leading silence, so 80 ms in gives 80 ms out from the first chunk."""

    def __init__(self, rate_hz: int) -> None:
        self.rate_hz = rate_hz
        self._converter = AudioConverter(rate_hz)
        self._primed = False

    def convert(self, samples: Int16Array, rate_hz: int) -> Int16Array:
        out = self._converter.convert_array(samples, rate_hz)
        if not self._primed and len(samples):
            self._primed = True
            held = len(samples) * self.rate_hz // rate_hz - len(out)
            if held > 0:
                out = np.concatenate([np.zeros(held, np.int16), out])
        return out

    def flush(self) -> Int16Array:
        """The end of the stream: the held samples; the next chunk starts a new stream."""
        self._primed = False
        return self._converter.flush()

    def reset(self) -> None:
        self._converter.reset()
        self._primed = False


def make_audio_frame(samples: Int16Array, rate_hz: int, pts: int | None = None,
                     layout: str = "mono") -> av.AudioFrame:
    """Build an s16 packed ``av.AudioFrame`` from int16 samples (interleaved if stereo)."""
    channels = 2 if layout == "stereo" else 1
    data = np.ascontiguousarray(samples, dtype=np.int16).reshape(1, -1)
    frame = av.AudioFrame.from_ndarray(data, format="s16", layout=layout)
    if data.shape[1] % channels:
        raise UnsupportedAudioError("interleaved sample count not a multiple of channels")
    frame.sample_rate = rate_hz
    frame.time_base = Fraction(time_base_for_rate(rate_hz))
    frame.pts = pts
    return frame


def _join(frames: list[av.AudioFrame]) -> Int16Array:
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(np.int16,
                                                                                copy=False)
