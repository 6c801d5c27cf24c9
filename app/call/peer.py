"""A call's peer connection: built on the server's ICE servers, answering the client's offer,
and closed, also when an offer left it half-built (no transport or socket outlives a call).

Anything a client puts in its SDP can make aiortc raise: :data:`ACCEPT_ERRORS` is what
applying an offer may raise (the server answers 400), :data:`CLOSE_ERRORS` what closing a
connection that never started may.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCSessionDescription
from aiortc.exceptions import InternalError, InvalidAccessError, InvalidStateError, OperationError
from aiortc.mediastreams import MediaStreamTrack
from aiortc.sdp import SessionDescription

from omnicall.app.access import parse_ice_servers
from omnicall.media.log_limit import clip

logger = logging.getLogger(__name__)

TRANSPORT_STOP_TIMEOUT_S = 1.0


class PeerSetupError(ValueError):
    """The offer was parsed but the peer connection could not be set up from it."""


# What applying an offer can raise on a client's SDP: aiortc's own errors, and the plain ones
# its parser and transports raise on input they did not expect.
ACCEPT_ERRORS = (InternalError, InvalidAccessError, InvalidStateError, OperationError,
                 ValueError, TypeError, KeyError, IndexError, AttributeError, AssertionError)
# What closing a half-built peer connection can raise (transports that never started)
CLOSE_ERRORS = (*ACCEPT_ERRORS, RuntimeError, OSError)


def new_peer_connection(ice_servers: str) -> RTCPeerConnection:
    """A peer connection on the server's own ICE servers (``--server-ice-servers``): none by
    default, so no public STUN server is asked anything."""
    return RTCPeerConnection(RTCConfiguration(iceServers=[
        RTCIceServer(**server) for server in parse_ice_servers(ice_servers)]))


async def answer_offer(pc: RTCPeerConnection, offer_sdp: str, send_track: MediaStreamTrack,
                       *, video: bool = True) -> tuple[SessionDescription, str | None]:
    """Apply the client's offer, add ``send_track`` and set our answer: the parsed answer
    and the mid of the track's media section (raises one of :data:`ACCEPT_ERRORS`).

    ``video`` off (``--no-video``): every video section is answered ``inactive``, so the
    client sends no video packets and aiortc never starts a receiver (nothing is decoded)."""
    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
    if any(t.receiver.transport is None for t in pc.getTransceivers()) or (
            pc.sctp is not None and pc.sctp.transport is None):
        raise PeerSetupError("a media section has no transport (check a=group:BUNDLE)")
    if not video:
        for transceiver in pc.getTransceivers():
            if transceiver.kind == "video":
                transceiver.direction = "inactive"
    ask_for_opus_fec(pc)
    sender = pc.addTrack(send_track)
    await pc.setLocalDescription(await pc.createAnswer())
    answer = SessionDescription.parse(pc.localDescription.sdp)
    mid = next((t.mid for t in pc.getTransceivers() if t.sender is sender), None)
    return answer, mid


def ask_for_opus_fec(pc: RTCPeerConnection) -> int:
    """Answer ``useinbandfec=1`` on every negotiated Opus codec, so the caller's encoder puts
    a copy of each packet in the next one once it sees loss (Chromium does), which
    :mod:`omnicall.media.opus_receive` decodes; aiortc answers Opus with no parameters.
    Returns how many codecs were marked (0 when aiortc moved its private ``_codecs``)."""
    marked = 0
    for transceiver in pc.getTransceivers():
        for codec in getattr(transceiver, "_codecs", None) or []:
            if getattr(codec, "mimeType", "").lower() == "audio/opus":
                codec.parameters["useinbandfec"] = 1
                marked += 1
    return marked


def check_answered(pc: RTCPeerConnection) -> None:
    """After the answer: aiortc may have given up on the offer's SDP meanwhile."""
    if pc.connectionState in ("failed", "closed"):
        raise PeerSetupError(f"the connection {pc.connectionState} while the offer was applied")


async def close_peer(pc: RTCPeerConnection, timeout_s: float) -> None:
    """Close the peer connection, also one that an offer left half-built: whatever
    ``pc.close()`` cannot stop, each transport is stopped on its own (no socket leaks)."""
    try:
        await asyncio.wait_for(pc.close(), timeout_s)
        return
    except TimeoutError:
        logger.error("peer connection did not close in time")
    except CLOSE_ERRORS as exc:
        logger.info("peer connection close failed (%s: %s); stopping its "
                    "transports one by one", type(exc).__name__, clip(str(exc)))
    for transport in _transports(pc):
        stop = getattr(transport, "stop", None) or getattr(transport, "close", None)
        if stop is None:
            continue
        try:
            await asyncio.wait_for(stop(), TRANSPORT_STOP_TIMEOUT_S)
        except (TimeoutError, *CLOSE_ERRORS) as exc:
            logger.debug("stopping %s: %s", type(transport).__name__, exc)


def _transports(pc: RTCPeerConnection) -> list[Any]:
    """Every transport of the connection, outermost first (DTLS, then ICE; SCTP, DTLS, ICE)."""
    transports: list[Any] = []
    for transceiver in pc.getTransceivers():
        for dtls in {transceiver.sender.transport, transceiver.receiver.transport}:
            if dtls is not None:
                transports += [dtls, dtls.transport]
    sctp = pc.sctp
    if sctp is not None and sctp.transport is not None:
        transports += [sctp, sctp.transport, sctp.transport.transport]
    return transports
