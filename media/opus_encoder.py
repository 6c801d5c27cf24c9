"""Outgoing speech encoded here, one Opus packet per 20 ms frame, on the event loop.

aiortc's own audio path costs ~2.5% of a core per call, for work a speech track does not
need: it resamples every frame to stereo, encodes stereo at 96 kbps with a thread-pool hop
per frame, and computes the RFC 6465 audio level in a pure-Python
loop over the samples (~110 us a frame). The assistant's voice is mono speech:
:class:`SpeechOpusEncoder` encodes it mono at ``bit_rate`` (32 kbps, an Opus packet that any
stereo decoder plays) with libopus (called directly, :mod:`omnicall.media.opus_lib`, so
in-band FEC and the expected loss follow the caller's receiver reports during the call),
~150 us a frame, inline. An assistant is silent most of a call, and libopus settles on
sustained digital silence into the same 3-byte packet every frame: once it has produced
``SILENCE_SETTLE_FRAMES`` identical silent packets in a row, that packet is sent again
without running the encoder. The silence is byte-identical to what the encoder would send;
the sound after it differs only through the encoder's analysis history (decoded, the two
differ at ~69 dB SNR; a test checks both).

:class:`EncodedAudioTrack` wraps the paced track and hands aiortc ``av.Packet`` s, which its
sender only packetizes (``Encoder.pack``), when the call negotiated Opus; for any other codec
(PCMU/PCMA clients) it passes the frames through for aiortc to encode as before.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import av
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtcrtpparameters import RTCRtpCodecParameters

from omnicall.media.negotiated import OPUS_MIME
from omnicall.media.opus_lib import APPLICATION_AUDIO, OpusEncoderHandle
from omnicall.media.paced_track import PacedAudioTrack
from omnicall.media.resample import Int16Array, make_audio_frame
from omnicall.media.timebase import OPUS_FRAME_SAMPLES, OPUS_RATE_HZ, time_base_for_rate

logger = logging.getLogger(__name__)

SPEECH_BIT_RATE = 32_000
COMPLEXITY = 2  # libopus 0-10: 10 (aiortc's) costs ~2.5x as much a frame
SILENCE_SETTLE_FRAMES = 10  # identical silent packets in a row before that packet is reused
MAX_LOSS_PERCENT = 25  # the most loss the encoder is told to expect (more FEC buys little)
LOSS_DECAY = 0.8  # per report: a burst's loss is remembered for a few reports


class LossEstimate:
    """The loss the encoder should plan for, from the caller's RTCP receiver reports
    (fractions 0..1 between reports): a new report raises it at once, quiet ones let it
    decay by :data:`LOSS_DECAY` each, so loss that comes and goes keeps its FEC on."""

    def __init__(self) -> None:
        self.fraction = 0.0

    def report(self, fraction: float | None) -> int:
        """Fold in one report (``None``: nothing known); the percent to tell the encoder."""
        if fraction is not None:
            self.fraction = max(min(1.0, max(0.0, fraction)), self.fraction * LOSS_DECAY)
        return self.percent

    @property
    def percent(self) -> int:
        return min(MAX_LOSS_PERCENT, math.ceil(self.fraction * 100 - 0.5))


class SpeechOpusEncoder:
    """Mono 48 kHz int16 frames of 20 ms -> Opus packets with the frame's pts.

    In-band FEC is always allowed (omnicall answers ``useinbandfec=1``; libopus only spends
    bits on it while the expected loss is above zero): :meth:`expect_loss` passes the caller's
    reported loss on, so each packet carries a low-rate copy of the one before it once the
    link loses packets."""

    def __init__(self, bit_rate: int = SPEECH_BIT_RATE, complexity: int = COMPLEXITY,
                 fec: bool = True) -> None:
        self.time_base: Fraction = time_base_for_rate(OPUS_RATE_HZ)
        codec = OpusEncoderHandle(channels=1, application=APPLICATION_AUDIO)
        codec.set_bitrate(bit_rate)
        codec.set_complexity(complexity)
        # free VBR, as through FFmpeg's libopusenc before: libopus's default constrained VBR
        # spent ~25% fewer bits on speech at the same bitrate (and sounded different)
        codec.set_vbr_constraint(False)
        codec.set_fec(fec)
        self._codec = codec
        self.loss = LossEstimate()
        self._silent_run = 0
        self._silence: bytes | None = None
        self.reused_silence = 0

    def expect_loss(self, fraction: float | None) -> int:
        """One receiver report's loss (0..1, ``None`` when unknown): the encoder's expected
        loss follows it (:class:`LossEstimate`); returns the percent now set."""
        percent = self.loss.report(fraction)
        if percent != self._codec.packet_loss:
            self._codec.set_packet_loss(percent)
            logger.debug("outgoing Opus: expecting %d%% loss", percent)
        return percent

    def encode(self, samples: Int16Array, pts: int) -> av.Packet:
        """One 20 ms frame in, its packet out (libopus does not buffer whole frames)."""
        if len(samples) != OPUS_FRAME_SAMPLES:
            raise ValueError(f"expected {OPUS_FRAME_SAMPLES} samples, got {len(samples)}")
        silent = not samples.any()
        if silent and self._silent_run >= SILENCE_SETTLE_FRAMES and self._silence is not None:
            packet = av.Packet(self._silence)
            self.reused_silence += 1
        else:
            data = self._codec.encode(samples)
            packet = av.Packet(data)
            if silent:
                self._silent_run = self._silent_run + 1 if data == self._silence else 1
                self._silence = data
            else:
                self._silent_run = 0
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
            return make_audio_frame(samples, OPUS_RATE_HZ, pts=pts)
        return self._encoder.encode(samples, pts)

    def expect_loss(self, fraction: float | None) -> None:
        """The caller's latest RTCP-reported loss of our audio (0..1; ``None``: unknown)."""
        if self._encoder is not None:
            self._encoder.expect_loss(fraction)

    def stop(self) -> None:
        super().stop()
        self.source.stop()
