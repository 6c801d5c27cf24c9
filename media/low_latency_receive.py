"""The caller's audio on the low-latency receive path, wired over the two signaling phases.

1. The offer is applied and the caller's audio track appears (:meth:`LowLatencyReceive.on_track`):
   its receiver gets the buffer that releases each in-order packet at once
   (:mod:`omnicall.media.receive_jitter`) instead of aiortc's 4-frame prefetch.
2. The answer fixed the codecs (:meth:`LowLatencyReceive.on_answer`): when they include Opus,
   its packets go through the adaptive reorder buffer (:mod:`omnicall.media.audio_reorder`:
   no wait in order, a bounded adaptive one for a missing packet), are decoded right there
   on the event loop (:mod:`omnicall.media.opus_receive`) and handed to ``feed`` (the ingest
   pump), skipping aiortc's decoder thread; packets of other codecs (PCMU/PCMA) keep
   aiortc's path.

Nothing here is needed for a call to work: where aiortc's internals moved, or no Opus was
negotiated, the call runs on aiortc's own receive path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import av
from aiortc import RTCPeerConnection
from aiortc.mediastreams import MediaStreamTrack
from aiortc.rtp import RtpPacket
from aiortc.sdp import SessionDescription

from omnicall.media.audio_reorder import ReorderSettings
from omnicall.media.negotiated import audio_codecs, opus_payload_types
from omnicall.media.opus_receive import OpusPacketDecoder
from omnicall.media.receive_jitter import ImmediateAudioJitterBuffer, install_low_latency_audio

logger = logging.getLogger(__name__)

AudioSink = Callable[[av.AudioFrame], None]


class LowLatencyReceive:
    """One call's receive wiring: the buffer installed on its audio receiver, then (with
    Opus) the decoder that feeds ``feed`` from inside aiortc's receive path."""

    def __init__(self, feed: AudioSink, reorder: ReorderSettings | None = None) -> None:
        self._feed = feed
        self._reorder = reorder  # the reorder buffer's bounds (None: its defaults, 0-120 ms)
        self.buffer: ImmediateAudioJitterBuffer | None = None
        self.mid: str | None = None  # the audio section whose receiver has the buffer
        self.decoder: OpusPacketDecoder | None = None
        self.feed_errors = 0

    def on_track(self, pc: RTCPeerConnection, track: MediaStreamTrack) -> bool:
        """The caller's audio track arrived: install the buffer on its receiver; ``False``
        when it could not be (aiortc's own buffer stays)."""
        for transceiver in pc.getTransceivers():
            if transceiver.receiver.track is track:
                buffer = install_low_latency_audio(transceiver.receiver, self._reorder)
                if buffer is not None:
                    self.buffer, self.mid = buffer, transceiver.mid
        return self.buffer is not None

    def on_answer(self, answer: SessionDescription) -> bool:
        """The answer fixed the codecs: Opus packets skip aiortc's decoder thread from now
        on; ``False`` when they do not (no buffer installed, or no Opus negotiated)."""
        if self.buffer is None:
            return False
        opus = opus_payload_types(audio_codecs(answer, self.mid))
        if not opus:
            return False
        self.decoder = OpusPacketDecoder()
        self.buffer.direct = self._receiver(opus, self.decoder)
        self.buffer.direct_types = opus
        return True

    def reorder_stats(self) -> dict[str, float]:
        """What the reorder buffer did: packets used out of order, given up on, too late;
        its current wait (ms)."""
        if self.buffer is None:
            return {}
        r = self.buffer.reorder
        return {"reordered": r.reordered, "skipped": r.skipped, "late": r.late,
                "held_max": r.held_max, "wait_ms": round(r.target_s * 1000, 1)}

    def close(self) -> None:
        """The call ended: stop the reorder buffer's release timer."""
        if self.buffer is not None:
            self.buffer.close()

    def _receiver(self, opus: frozenset[int], decoder: OpusPacketDecoder
                  ) -> Callable[[RtpPacket, bytes], bool]:
        def receive(packet: RtpPacket, data: bytes) -> bool:
            if packet.payload_type not in opus:
                return False
            try:
                for frame in decoder.decode(data, packet.timestamp):
                    self._feed(frame)
            except Exception:  # runs inside aiortc's receive path: the call must go on
                self.feed_errors += 1
                logger.exception("audio ingest failed")
            return True

        return receive
