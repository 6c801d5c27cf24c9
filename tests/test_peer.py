"""The call's peer connection: answering an offer, refusing one it cannot use, and closing
whatever state an offer left it in."""

from __future__ import annotations

import pytest
from aiortc import RTCPeerConnection
from aiortc.mediastreams import AudioStreamTrack

from omnicall.app.call.peer import (
    ACCEPT_ERRORS,
    PeerSetupError,
    answer_offer,
    check_answered,
    close_peer,
    new_peer_connection,
)
from tests.test_signaling import offer_sdp


def ice_servers(pc: RTCPeerConnection) -> list[object]:
    return list(pc._RTCPeerConnection__configuration.iceServers)  # type: ignore[attr-defined]


async def test_no_ice_servers_unless_configured() -> None:
    default = new_peer_connection("")
    configured = new_peer_connection("stun:127.0.0.1:3478")
    try:
        assert ice_servers(default) == []
        assert [s.urls for s in ice_servers(configured)] == ["stun:127.0.0.1:3478"]  # type: ignore[attr-defined]
    finally:
        await default.close()
        await configured.close()


async def test_an_offer_is_answered_with_the_tracks_section() -> None:
    pc = new_peer_connection("")
    try:
        answer, mid = await answer_offer(pc, await offer_sdp(("audio", "video")),
                                         AudioStreamTrack())
        check_answered(pc)
        assert pc.localDescription.type == "answer"
        assert [m.kind for m in answer.media] == ["audio", "video"]
        assert mid == answer.media[0].rtp.muxId
    finally:
        await close_peer(pc, 2.0)
    assert pc.connectionState == "closed"
    with pytest.raises(PeerSetupError, match="closed"):
        check_answered(pc)


async def test_an_offer_without_transports_is_refused_and_still_closes() -> None:
    sdp = (await offer_sdp(("audio", "video"))).replace("a=group:BUNDLE 0 1",
                                                       "a=group:BUNDLE 7 0 1")
    pc = new_peer_connection("")
    with pytest.raises(PeerSetupError, match="no transport"):
        await answer_offer(pc, sdp, AudioStreamTrack())
    await close_peer(pc, 2.0)  # pc.close() fails on it: each transport is stopped


async def test_an_offer_aiortc_refuses_raises_an_accept_error() -> None:
    sdp = (await offer_sdp()).replace("a=setup:actpass", "a=setup:weird", 1)
    pc = new_peer_connection("")
    with pytest.raises(ACCEPT_ERRORS):
        await answer_offer(pc, sdp, AudioStreamTrack())
    await close_peer(pc, 2.0)
    assert pc.connectionState == "closed"


async def test_garbage_sdp_raises_an_accept_error() -> None:
    pc = new_peer_connection("")
    with pytest.raises(ACCEPT_ERRORS):
        await answer_offer(pc, "v=0\r\nm=audio nonsense\r\n", AudioStreamTrack())
    await close_peer(pc, 2.0)


async def test_without_video_the_video_section_is_answered_inactive() -> None:
    pc = new_peer_connection("")
    try:
        answer, mid = await answer_offer(pc, await offer_sdp(("audio", "video")),
                                         AudioStreamTrack(), video=False)
        assert [(m.kind, m.direction) for m in answer.media] == [
            ("audio", "sendrecv"), ("video", "inactive")]
        assert mid == answer.media[0].rtp.muxId
        video = next(t for t in pc.getTransceivers() if t.kind == "video")
        assert video.currentDirection == "inactive"  # aiortc starts no receiver for it
    finally:
        await close_peer(pc, 2.0)


async def test_the_answer_asks_for_opus_in_band_fec() -> None:
    pc = new_peer_connection("")
    try:
        answer, _ = await answer_offer(pc, await offer_sdp(("audio",)), AudioStreamTrack())
        opus = [c for c in answer.media[0].rtp.codecs if c.mimeType.lower() == "audio/opus"]
        assert opus and all(c.parameters.get("useinbandfec") == 1 for c in opus)
        assert "useinbandfec=1" in pc.localDescription.sdp
    finally:
        await close_peer(pc, 2.0)
