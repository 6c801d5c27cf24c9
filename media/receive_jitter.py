"""Low-latency receive jitter buffer for incoming audio.

aiortc hard-codes ``JitterBuffer(capacity=16, prefetch=4)`` for every audio receiver: a
frame is only released once four later frames have arrived, ~80 ms of added delay on every
call (measured: docs/benchmarks.md). Opus sends one packet per frame, so a packet can be decoded the
moment it arrives in order. :class:`ImmediateAudioJitterBuffer` releases each in-order packet
at once. Packets of the ``direct_types`` (Opus, decoded on the event loop) go through an
adaptive reorder buffer (:mod:`omnicall.media.audio_reorder`): in order they still pass at
once; a gap holds the packets after it until the missing one comes (used, in order) or the
network's measured jitter says it will not (0-120 ms; then FEC/PLC fill it), released by a
timer on the event loop. Other packets (aiortc decodes them) keep the immediate path: late or
duplicated ones are dropped (counted) and ingest fills gaps with silence from pts.

:func:`install_low_latency_audio` swaps it into an ``RTCRtpReceiver`` through aiortc's private
(name-mangled) attribute: :mod:`omnicall.media.third_party`, where every patched third-party
internal is, checked against the aiortc version it was written for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket
from aiortc.utils import uint16_add

from omnicall.media.audio_reorder import AdaptiveReorderBuffer, ReorderSettings
from omnicall.media.third_party import ThirdPartyChanged, set_receiver_jitter_buffer

logger = logging.getLogger(__name__)

_MAX_MISORDER = 100
_UINT16_HALF = 0x8000


#: takes an in-order packet and its depayloaded data; True when it consumed it (aiortc then
#: decodes nothing)
DirectSink = Callable[[RtpPacket, bytes], bool]


class ImmediateAudioJitterBuffer(JitterBuffer):
    """Releases each in-order audio packet immediately (prefetch 0), to ``direct`` first
    when set (:mod:`omnicall.media.opus_receive`), else to aiortc's decoder; packets of the
    ``direct_types`` go to ``direct`` through the adaptive reorder buffer."""

    def __init__(self, settings: ReorderSettings | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(capacity=16, prefetch=0)
        self.direct: DirectSink | None = None
        self.direct_types: frozenset[int] = frozenset()
        self.reorder: AdaptiveReorderBuffer[tuple[RtpPacket, bytes]] = \
            AdaptiveReorderBuffer(settings)
        self._clock = clock
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due: float | None = None
        self._expected: int | None = None
        self.late_packets = 0
        self.lost_packets = 0

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        if self.direct is not None and packet.payload_type in self.direct_types:
            data: bytes = getattr(packet, "_data", b"")
            self._give(self.reorder.push(packet.sequence_number, packet.timestamp,
                                         (packet, data), self._clock()))
            return False, None
        return self._immediate(packet)

    def poll(self) -> None:
        """Release what the reorder buffer stopped waiting for by now (the timer's call)."""
        self._timer = None
        self._give(self.reorder.poll(self._clock()))

    def close(self) -> None:
        """Stop the release timer (held packets are dropped with the call)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _give(self, packets: list[tuple[RtpPacket, bytes]]) -> None:
        assert self.direct is not None
        for packet, data in packets:
            self.direct(packet, data)
        self._arm()

    def _arm(self) -> None:
        """(Re)arm the timer for the reorder buffer's deadline (none outside an event loop:
        a synchronous caller polls)."""
        due = self.reorder.deadline()
        if due == self._timer_due and self._timer is not None:
            return
        self.close()
        if due is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer_due = due
        self._timer = loop.call_later(max(0.0, due - self._clock()), self.poll)

    def _immediate(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        seq = packet.sequence_number
        if self._expected is not None:
            ahead = uint16_add(seq, -self._expected)
            if ahead >= _UINT16_HALF:  # behind what was already released
                behind = 0x10000 - ahead
                if behind < _MAX_MISORDER:
                    self.late_packets += 1
                    return False, None
                logger.debug("audio sequence jumped back by %d; resyncing", behind)
            elif ahead < _MAX_MISORDER:
                self.lost_packets += ahead
            else:
                logger.debug("audio sequence jumped ahead by %d; resyncing", ahead)
        self._expected = uint16_add(seq, 1)
        data: bytes = getattr(packet, "_data", b"")
        if self.direct is not None and self.direct(packet, data):
            return False, None
        return False, JitterFrame(data=data, timestamp=packet.timestamp)


def install_low_latency_audio(receiver: Any, settings: ReorderSettings | None = None
                              ) -> ImmediateAudioJitterBuffer | None:
    """Swap an audio receiver's jitter buffer for :class:`ImmediateAudioJitterBuffer`.

    Returns the new buffer, or ``None`` (logged) when aiortc's internals changed, in which
    case the call still works with aiortc's own buffer and its extra delay.
    """
    buffer = ImmediateAudioJitterBuffer(settings)
    try:
        set_receiver_jitter_buffer(receiver, buffer)
    except ThirdPartyChanged:
        logger.exception("cannot install the low-latency audio jitter buffer")
        return None
    return buffer
