"""What an answer negotiated for audio: the codecs of one audio section, in the order aiortc
prefers them (it sends with the first). Parsed once per call by the session, read by the
outgoing encoder (:mod:`media.opus_encoder`) and the incoming decoder
(:mod:`media.opus_receive`)."""

from __future__ import annotations

from aiortc.rtcrtpparameters import RTCRtpCodecParameters
from aiortc.sdp import SessionDescription


def audio_codecs(description: SessionDescription,
                 mid: str | None) -> list[RTCRtpCodecParameters]:
    """The codecs of the audio section ``mid`` (any audio section when ``None``); ``[]`` when
    there is no such section."""
    for media in description.media:
        if media.kind == "audio" and (mid is None or media.rtp.muxId == mid):
            return list(media.rtp.codecs)
    return []
