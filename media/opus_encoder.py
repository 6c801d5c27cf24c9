"""Outgoing speech encoded here, one Opus packet per 20 ms frame, on the event loop.

aiortc's own audio path costs ~2.5% of a core per call on the 2-core machine, for work a
speech track does not need: it resamples every frame to stereo, encodes stereo at 96 kbps
with a thread-pool hop per frame, and computes the RFC 6465 audio level in a pure-Python
loop over the samples (~110 us a frame). The assistant's voice is mono speech:
:class:`SpeechOpusEncoder` encodes it mono at ``bit_rate`` (32 kbps, an Opus packet that any
stereo decoder plays) with libopus through PyAV, ~150 us a frame, inline. An assistant is
silent most of a call, and libopus settles on sustained digital silence into the same
3-byte packet every frame: once it has produced ``SILENCE_SETTLE_FRAMES`` identical silent
packets in a row, that packet is sent again without running the encoder. The silence is
byte-identical to what the encoder would send; the sound after it differs only through the
encoder's analysis history (decoded, the two differ at ~69 dB SNR; a test checks both).

:class:`EncodedAudioTrack` wraps the paced track and hands aiortc ``av.Packet`` s, which its
sender only packetizes (``Encoder.pack``), when the call negotiated Opus; for any other codec
(PCMU/PCMA clients) it passes the frames through for aiortc to encode as before.
"""

from __future__ import annotations

import logging
from fractions import Fraction

import av
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtcrtpparameters import RTCRtpCodecParameters

from omnicall.media.negotiated import OPUS_MIME
from omnicall.media.paced_track import PacedAudioTrack
from omnicall.media.resample import Int16Array, make_audio_frame
from omnicall.media.timebase import WIRE_FRAME_SAMPLES, WIRE_RATE_HZ, time_base_for_rate

logger = logging.getLogger(__name__)

SPEECH_BIT_RATE = 32_000
COMPLEXITY = 2  # libopus 0-10: 10 (aiortc's) costs ~2.5x as much a frame
SILENCE_SETTLE_FRAMES = 10  # identical silent packets in a row before that packet is reused


class SpeechOpusEncoder:
    """Mono 48 kHz int16 frames of 20 ms -> Opus packets with the frame's pts."""

    def __init__(self, bit_rate: int = SPEECH_BIT_RATE, complexity: int = COMPLEXITY) -> None:
        self.time_base: Fraction = time_base_for_rate(WIRE_RATE_HZ)
        codec = av.CodecContext.create("libopus", "w")
        codec.bit_rate = bit_rate
        codec.format = "s16"
        codec.layout = "mono"
        codec.sample_rate = WIRE_RATE_HZ
        codec.time_base = self.time_base
        codec.options = {"application": "audio", "compression_level": str(complexity)}
        self._codec = codec
        self._silent_run = 0
        self._silence: bytes | None = None
        self.reused_silence = 0

    def encode(self, samples: Int16Array, pts: int) -> av.Packet:
        """One 20 ms frame in, its packet out (libopus does not buffer whole frames)."""
        if len(samples) != WIRE_FRAME_SAMPLES:
            raise ValueError(f"expected {WIRE_FRAME_SAMPLES} samples, got {len(samples)}")
        silent = not samples.any()
        if silent and self._silent_run >= SILENCE_SETTLE_FRAMES and self._silence is not None:
            packet = av.Packet(self._silence)
            self.reused_silence += 1
        else:
            packets = self._codec.encode(make_audio_frame(samples, WIRE_RATE_HZ, pts=pts))
            if len(packets) != 1:
                raise RuntimeError(f"libopus returned {len(packets)} packets for one frame")
            packet = packets[0]
            if silent:
                data = bytes(packet)
                self._silent_run = self._silent_run + 1 if data == self._silence else 1
                self._silence = data
            else:
                self._silent_run = 0
        # the encoder's own pts is shifted by its look-ahead; the RTP clock is the frame's
        packet.pts = pts
        packet.time_base = self.time_base
        return packet


class EncodedAudioTrack(MediaStreamTrack):
    """Frames of ``source`` (48 kHz mono s16, 20 ms) sent as Opus packets once
    :meth:`use_codec` said Opus was negotiated; until then, or for other codecs, as frames."""

    kind = "audio"

    def __init__(self, source: PacedAudioTrack) -> None:
        super().__init__()
        self.source = source
        self._encoder: SpeechOpusEncoder | None = None

    def use_codec(self, codecs: list[RTCRtpCodecParameters]) -> None:
        """The answer's codecs for this track (:func:`omnicall.media.negotiated.audio_codecs`):
        aiortc sends with the first."""
        mime_type = codecs[0].mimeType.lower() if codecs else None
        self._encoder = SpeechOpusEncoder() if mime_type == OPUS_MIME else None
        logger.debug("outgoing audio codec %s; encoding %s", mime_type,
                     "here (mono speech)" if self.encodes else "in aiortc")

    @property
    def encodes(self) -> bool:
        return self._encoder is not None

    async def recv(self):  # type: ignore[no-untyped-def]  # aiortc's untyped signature
        if self.readyState != "live":
            raise MediaStreamError
        samples, pts = await self.source.next_samples()
        if self._encoder is None:
            return make_audio_frame(samples, WIRE_RATE_HZ, pts=pts)
        return self._encoder.encode(samples, pts)

    def stop(self) -> None:
        super().stop()
        self.source.stop()
