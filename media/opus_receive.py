"""The caller's Opus packets decoded here, on the event loop, as they arrive.

aiortc decodes each received audio packet on a per-call decoder thread and hands every
decoded frame back to the event loop with ``run_coroutine_threadsafe`` (a task, a future
chain and a cross-thread wake-up per 20 ms frame), decoding to stereo that ingest then mixes
down. Measured on the 2-core machine that hand-off costs more than the decoding. Here the
low-latency receive buffer (:mod:`omnicall.media.receive_jitter`) passes each in-order Opus packet
straight to :class:`OpusPacketDecoder` (libopus through PyAV, mono, ~35 us a packet), whose
frames carry the RTP timestamp as pts, so ingest fills gaps exactly as before. Packets of
any other codec still take aiortc's path.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import av

from omnicall.media.log_limit import worth_logging
from omnicall.media.timebase import WIRE_RATE_HZ, time_base_for_rate

logger = logging.getLogger(__name__)

_UINT32 = 1 << 32
_HALF = 1 << 31


class OpusPacketDecoder:
    """Opus RTP payloads -> mono 48 kHz s16 frames, pts = RTP timestamp from the first."""

    def __init__(self) -> None:
        codec = av.CodecContext.create("libopus", "r")
        codec.format = "s16"
        codec.layout = "mono"
        codec.sample_rate = WIRE_RATE_HZ
        self._codec = codec
        self._time_base = time_base_for_rate(WIRE_RATE_HZ)
        self._origin: int | None = None
        self._last = 0  # unwrapped timestamp of the last packet
        self.decoded = 0
        self.errors = 0

    def _pts(self, timestamp: int) -> int:
        if self._origin is None:
            self._origin = self._last = timestamp
            return 0
        delta = (timestamp - self._last) % _UINT32
        self._last += delta - _UINT32 if delta >= _HALF else delta
        return self._last - self._origin

    def decode(self, payload: bytes, timestamp: int) -> Iterable[av.AudioFrame]:
        """The frames of one packet ([] for an undecodable one, counted and logged)."""
        if not payload:  # an empty packet would put the decoder in its end-of-stream state
            return []
        pts = self._pts(timestamp)
        try:
            frames = self._codec.decode(av.Packet(payload))
        except av.FFmpegError as exc:
            self.errors += 1
            if worth_logging(self.errors):
                logger.warning("undecodable Opus packet (%d bytes): %s (%d so far)",
                               len(payload), exc, self.errors)
            return []
        self.decoded += 1
        for frame in frames:  # stamped here: libavcodec's own pts lag after a bad packet
            frame.pts = pts
            frame.time_base = self._time_base
            pts += frame.samples
        return frames
