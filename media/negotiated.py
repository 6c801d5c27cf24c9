"""What an answer negotiated for audio: the codecs of one audio section, in the order aiortc
prefers them (it sends with the first), and which of their payload types carry Opus. Parsed
once per call by the session, read for the outgoing encoder (:mod:`omnicall.media.opus_encoder`) and
the incoming decoder (:mod:`omnicall.media.opus_receive`)."""

from __future__ import annotations

from aiortc.rtcrtpparameters import RTCRtpCodecParameters
from aiortc.sdp import SessionDescription

OPUS_MIME = "audio/opus"


def audio_codecs(description: SessionDescription,
                 mid: str | None) -> list[RTCRtpCodecParameters]:
    """The codecs of the audio section ``mid`` (any audio section when ``None``); ``[]`` when
    there is no such section."""
    for media in description.media:
        if media.kind == "audio" and (mid is None or media.rtp.muxId == mid):
            return list(media.rtp.codecs)
    return []


def opus_payload_types(codecs: list[RTCRtpCodecParameters]) -> frozenset[int]:
    """Payload types negotiated for Opus among an audio section's codecs."""
    return frozenset(c.payloadType for c in codecs
                     if c.mimeType.lower() == OPUS_MIME and c.payloadType is not None)
