"""The caller's Opus packets decoded here, on the event loop, as they arrive; lost ones
recovered or concealed before anything downstream sees a gap.

aiortc decodes each received audio packet on a per-call decoder thread and hands every
decoded frame back to the event loop with ``run_coroutine_threadsafe`` (a task, a future
chain and a cross-thread wake-up per 20 ms frame), decoding to stereo that ingest then mixes
down. Measured, that hand-off costs more than the decoding. Here the
low-latency receive buffer (:mod:`omnicall.media.receive_jitter`) passes each in-order Opus packet
straight to :class:`OpusPacketDecoder` (libopus called directly, :mod:`omnicall.media.opus_lib`,
mono, ~25 us a packet), whose frames carry the RTP timestamp as pts. Packets of any other
codec still take aiortc's path.

A packet that never came (its successor's timestamp is one or more packets ahead) is not a
hole: the packet right before the one that arrived is decoded from that packet's in-band FEC
(Chromium sends it when ``useinbandfec=1`` is answered and it sees loss; libopus conceals it
when there is none), and any earlier ones of the same gap are concealed by libopus (PLC),
each frame stamped with the missing packet's pts, so ingest's 80 ms frames neither gain
silence nor shift. Gaps longer than :data:`MAX_CONCEALED_PACKETS` (an outage, a pause in
sending) are left as they are: ingest fills them with silence from pts, as before.
"""

from __future__ import annotations

import logging

import av

from omnicall.media.log_limit import worth_logging
from omnicall.media.opus_lib import OpusDecoderHandle, OpusError
from omnicall.media.resample import Int16Array, make_audio_frame
from omnicall.media.timebase import OPUS_FRAME_SAMPLES, OPUS_RATE_HZ, time_base_for_rate

logger = logging.getLogger(__name__)

_UINT32 = 1 << 32
_HALF = 1 << 31
MAX_CONCEALED_PACKETS = 6  # 120 ms: longer gaps are left to ingest's silence


class OpusPacketDecoder:
    """Opus RTP payloads -> mono 48 kHz s16 frames, pts = RTP timestamp from the first; the
    packets missing before each one recovered (FEC) or concealed (PLC)."""

    def __init__(self) -> None:
        self._codec = OpusDecoderHandle(channels=1)
        self._time_base = time_base_for_rate(OPUS_RATE_HZ)
        self._origin: int | None = None
        self._last = 0  # unwrapped timestamp of the last packet
        self._next_pts: int | None = None  # where the next packet should start
        self._frame_samples = OPUS_FRAME_SAMPLES  # the last packet's duration
        self.decoded = 0
        self.errors = 0
        self.recovered = 0  # lost packets decoded from the next one's FEC (or its PLC)
        self.concealed = 0  # lost packets concealed (PLC) further back in a gap

    def _pts(self, timestamp: int) -> int:
        if self._origin is None:
            self._origin = self._last = timestamp
            return 0
        delta = (timestamp - self._last) % _UINT32
        self._last += delta - _UINT32 if delta >= _HALF else delta
        return self._last - self._origin

    def _frame(self, samples: Int16Array, pts: int) -> av.AudioFrame:
        frame = make_audio_frame(samples, OPUS_RATE_HZ, pts=pts)
        frame.time_base = self._time_base
        return frame

    def _fill_gap(self, payload: bytes, pts: int) -> list[av.AudioFrame]:
        """Frames for the packets missing between the last one and this one."""
        if self._next_pts is None or pts <= self._next_pts:
            return []
        size = self._frame_samples
        missing, rest = divmod(pts - self._next_pts, size)
        if missing == 0 or rest or missing > MAX_CONCEALED_PACKETS:
            return []  # odd framing or a long gap: ingest fills it with silence from pts
        frames = []
        for k in range(missing - 1):
            frames.append(self._frame(self._codec.conceal(size), self._next_pts + k * size))
            self.concealed += 1
        frames.append(self._frame(self._codec.decode_fec(payload, size), pts - size))
        self.recovered += 1
        return frames

    def decode(self, payload: bytes, timestamp: int) -> list[av.AudioFrame]:
        """The frames of one packet, after those recovered for the packets lost before it
        ([] for an undecodable packet, counted and logged)."""
        if not payload:  # nothing to decode (and nothing to recover from)
            return []
        pts = self._pts(timestamp)
        try:
            frames = self._fill_gap(payload, pts)
            samples = self._codec.decode(payload)
        except OpusError as exc:
            self.errors += 1
            if worth_logging(self.errors):
                logger.warning("undecodable Opus packet (%d bytes): %s (%d so far)",
                               len(payload), exc, self.errors)
            return []
        self.decoded += 1
        if len(samples):
            self._frame_samples = len(samples)
            frames.append(self._frame(samples, pts))
        self._next_pts = pts + len(samples)
        return frames
