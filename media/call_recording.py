"""A call's recording (``--record DIR``): both sides in one stereo WAV on the call's clock.

Left: the caller's microphone as it arrived (16 kHz, before the echo canceller: what the
caller's device sent); right: the assistant's voice as it was sent (the paced track's frames,
48 kHz to 16 kHz). Each piece is placed at the moment the server had it, measured on the
call's clock from the recording's start: the caller's 80 ms frame where it was formed, the
assistant's 20 ms frame where it left. So the file is the call as the server lived it (the
caller heard each reply one network trip later than the right channel shows it, and spoke
one trip earlier than the left shows it). Silence fills what neither side had.

:class:`StereoTimeline` is the pure core: pieces in, interleaved stereo out, drained up to
``hold_s`` behind now (a late piece still finds its place); pieces older than what was
drained are dropped and counted, and each side keeps at most ``MAX_PIECES`` waiting.
:class:`CallRecording` writes it: the call drains it once a stats tick and at its end (small
writes to a local file, as the transcript file does; a failing disk stops the recording, said
once, and never ends the call).
"""

from __future__ import annotations

import logging
import os
import wave
from collections import deque
from pathlib import Path
from typing import BinaryIO

import numpy as np

from omnicall.media.resample import Int16Array, StreamConverter

logger = logging.getLogger(__name__)

RECORD_RATE_HZ = 16_000
CALLER, ASSISTANT = 0, 1  # the channels: left, right
HOLD_S = 0.5  # drained this far behind now: a late piece still lands in place
MAX_PIECES = 500  # per side waiting to be drained (10 s of the assistant's 20 ms frames)


class StereoTimeline:
    """Both sides of a call placed on one clock (see the module docstring)."""

    def __init__(self, start_s: float, rate_hz: int = RECORD_RATE_HZ) -> None:
        self.start_s = start_s
        self.rate_hz = rate_hz
        self.written = 0  # samples (per channel) drained so far
        self.dropped_samples = 0  # pieces that came after their place was written
        self._pieces: tuple[deque[tuple[int, Int16Array]], ...] = (
            deque(maxlen=MAX_PIECES), deque(maxlen=MAX_PIECES))

    def add(self, channel: int, samples: Int16Array, end_s: float) -> None:
        """``samples`` (mono, at the recording's rate) of ``channel`` whose last one is at
        ``end_s`` (clock seconds)."""
        if not len(samples):
            return
        first = round((end_s - self.start_s) * self.rate_hz) - len(samples)
        if first + len(samples) <= self.written:
            self.dropped_samples += len(samples)
            return
        pieces = self._pieces[channel]
        if len(pieces) == pieces.maxlen:
            self.dropped_samples += len(pieces[0][1])
        pieces.append((first, samples))

    def drain(self, now_s: float, hold_s: float = HOLD_S) -> Int16Array:
        """The stereo samples (shape (n, 2)) from what was written up to ``hold_s`` before
        ``now_s``; empty when there is nothing new."""
        until = round((now_s - hold_s - self.start_s) * self.rate_hz)
        if until <= self.written:
            return np.zeros((0, 2), np.int16)
        out = np.zeros((until - self.written, 2), np.int16)
        for channel, pieces in enumerate(self._pieces):
            kept: deque[tuple[int, Int16Array]] = deque(maxlen=MAX_PIECES)
            for first, samples in pieces:
                lo, hi = max(first, self.written), min(first + len(samples), until)
                if lo < hi:
                    out[lo - self.written:hi - self.written, channel] = \
                        samples[lo - first:hi - first]
                if first + len(samples) > until:
                    kept.append((first, samples))
            self._pieces[channel].clear()
            self._pieces[channel].extend(kept)
        self.written = until
        return out


class CallRecording:
    """One call's stereo WAV (16-bit, 16 kHz): fed by the call's media, written as drained."""

    def __init__(self, path: Path, start_s: float) -> None:
        self.path = path
        self.timeline = StereoTimeline(start_s)
        self._to_16k = StreamConverter(RECORD_RATE_HZ)  # the assistant's 48 kHz frames
        self._file: BinaryIO | None = None
        self._wav: wave.Wave_write | None = None
        self.failed = False

    # -- fed by the media plane --------------------------------------------------------
    def caller(self, samples: Int16Array, arrived_s: float) -> None:
        """An 80 ms frame of the caller's 16 kHz audio, formed at ``arrived_s``."""
        self.timeline.add(CALLER, samples, arrived_s)

    def assistant(self, samples: Int16Array, sent_s: float) -> None:
        """A 20 ms frame of the assistant's 48 kHz voice (or the silence in its place),
        sent at ``sent_s``."""
        self.timeline.add(ASSISTANT, self._to_16k.convert(samples, 48_000), sent_s)

    # -- the file ------------------------------------------------------------------------
    def write(self, now_s: float, hold_s: float = HOLD_S) -> None:
        """Append what can be drained now (the call's stats tick)."""
        stereo = self.timeline.drain(now_s, hold_s)
        if not len(stereo) or self.failed:
            return
        try:
            if self._wav is None:  # owner-only: it holds what people said
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                self._file = os.fdopen(fd, "wb")
                self._wav = wave.open(self._file, "wb")  # noqa: SIM115 - kept open
                self._wav.setnchannels(2)
                self._wav.setsampwidth(2)
                self._wav.setframerate(RECORD_RATE_HZ)
            self._wav.writeframes(stereo.tobytes())
        except (OSError, wave.Error) as exc:  # a full disk must not end the call
            logger.warning("recording %s: %s; the rest of the call is not recorded",
                           self.path, exc)
            self.failed = True
            self._close_file()

    def close(self, now_s: float) -> None:
        """The call ended: everything that came is written and the file closed."""
        self.write(now_s, hold_s=0.0)
        self._close_file()

    def _close_file(self) -> None:
        try:
            if self._wav is not None:
                self._wav.close()  # writes the header's lengths
            if self._file is not None:
                self._file.close()
        except (OSError, wave.Error) as exc:
            logger.warning("recording %s: %s", self.path, exc)
        self._wav = self._file = None
