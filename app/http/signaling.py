"""Validation of ``POST /offer`` bodies: clear 4xx errors before any WebRTC object exists."""

from __future__ import annotations

import json
from dataclasses import dataclass

from aiortc.sdp import SessionDescription

MAX_SDP_CHARS = 60_000
# codecs aiortc can decode; an offer naming none of them for audio cannot be answered
AUDIO_CODECS = frozenset({"opus", "pcmu", "pcma", "g722"})
# What aiortc's SDP parser raises on malformed lines (it asserts, indexes and unpacks freely;
# an a=fmtp before its a=rtpmap raises StopIteration, which a coroutine turns into
# "RuntimeError: coroutine raised StopIteration")
SDP_PARSE_ERRORS = (ValueError, IndexError, KeyError, AttributeError, AssertionError, TypeError,
                    StopIteration, RuntimeError, RecursionError)


PAGE_MODES = ("call", "kiosk", "companion")  # web/app.js's MODE


class OfferError(ValueError):
    """A bad offer; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Offer:
    sdp: str
    has_audio: bool
    has_video: bool
    session_hint: str | None = None  # a dropped call's session id, to resume it
    video_fps: float | None = None  # the client asks for fewer video frames (companion mode)
    mode: str | None = None  # the page's mode (call, kiosk, companion): --echo-cancel auto


def parse_offer(body: bytes) -> Offer:
    try:
        data = json.loads(body)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise OfferError(f"body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise OfferError("body is not valid JSON: nested too deeply") from exc
    if not isinstance(data, dict):
        raise OfferError("body must be a JSON object {\"sdp\": ..., \"type\": \"offer\"}")
    sdp, kind = data.get("sdp"), data.get("type")
    if kind != "offer":
        raise OfferError("field 'type' must be \"offer\"")
    if not isinstance(sdp, str) or not sdp.strip():
        raise OfferError("field 'sdp' must be a non-empty string")
    if len(sdp) > MAX_SDP_CHARS:
        raise OfferError(f"sdp longer than {MAX_SDP_CHARS} characters", status=413)
    if not sdp.lstrip().startswith("v=0"):
        raise OfferError("sdp is not a session description (it must start with v=0)")
    try:
        parsed = SessionDescription.parse(sdp)
    except SDP_PARSE_ERRORS as exc:
        raise OfferError(f"sdp could not be parsed: {type(exc).__name__} "
                         f"{str(exc)[:120]}".rstrip()) from exc
    kinds = {m.kind for m in parsed.media if m.port != 0 or m.kind == "application"}
    if "audio" not in kinds:
        raise OfferError("offer has no audio track: the assistant needs a microphone")
    audio = [m for m in parsed.media if m.kind == "audio" and m.port != 0]
    if not any(m.fmt for m in audio):
        raise OfferError("offer's audio section lists no codecs")
    mids = [m.rtp.muxId for m in parsed.media]
    if len(set(mids)) != len(mids):
        raise OfferError("offer's media sections must have distinct a=mid values")
    for group in parsed.group:
        if group.semantic == "BUNDLE" and group.items and group.items[0] not in mids:
            raise OfferError(f"a=group:BUNDLE names mid {str(group.items[0])[:40]!r}, which "
                             "no media section has")
    if not any(codec.mimeType.partition("/")[2].lower() in AUDIO_CODECS
               for m in audio for codec in m.rtp.codecs):
        raise OfferError("offer's audio codecs are all unsupported (need Opus, PCMU, PCMA or "
                         "G722)")
    hint = data.get("resume", data.get("session"))
    if hint is not None and (not isinstance(hint, str) or not 0 < len(hint) <= 64):
        raise OfferError("field 'resume' must be a session id string")
    fps = data.get("video_fps")
    if fps is not None:
        if isinstance(fps, bool) or not isinstance(fps, int | float) or not 0.1 <= fps <= 30:
            raise OfferError("field 'video_fps' must be a number in [0.1, 30]")
        fps = float(fps)
    mode = data.get("mode")
    if mode is not None and mode not in PAGE_MODES:
        raise OfferError(f"field 'mode' must be one of {', '.join(PAGE_MODES)}")
    return Offer(sdp=sdp, has_audio=True, has_video="video" in kinds, session_hint=hint,
                 video_fps=fps, mode=mode)
