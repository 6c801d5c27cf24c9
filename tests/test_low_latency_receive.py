"""The low-latency receive wiring over a real offer/answer: the buffer goes on the caller's
audio receiver when its track arrives, and with Opus negotiated the packets are decoded into
the feed at once; other codecs, and a failing feed, leave the call on its feet."""

from __future__ import annotations

from typing import Any

import av
from aiortc import RTCPeerConnection
from aiortc.mediastreams import AudioStreamTrack, MediaStreamTrack
from aiortc.rtp import RtpPacket
from aiortc.sdp import SessionDescription

from omnicall.app.call.peer import answer_offer, close_peer, new_peer_connection
from omnicall.media.audio_reorder import ReorderSettings
from omnicall.media.low_latency_receive import LowLatencyReceive
from omnicall.media.receive_jitter import ImmediateAudioJitterBuffer
from tests.test_opus_receive import encoded
from tests.test_signaling import offer_sdp


async def offered(sdp: str) -> tuple[RTCPeerConnection, MediaStreamTrack, SessionDescription]:
    """The server's side of a call: its peer connection, the caller's audio track, the
    answer."""
    pc = new_peer_connection("")
    tracks: list[MediaStreamTrack] = []
    pc.on("track", tracks.append)
    answer, _ = await answer_offer(pc, sdp, AudioStreamTrack())
    return pc, tracks[0], answer


def opus_packet(pt: int, payload: bytes, seq: int) -> RtpPacket:
    packet = RtpPacket(payload_type=pt, sequence_number=seq, timestamp=seq * 960)
    packet._data = payload  # type: ignore[attr-defined]
    return packet


def opus_type(answer: SessionDescription) -> int:
    return next(c.payloadType for c in answer.media[0].rtp.codecs
                if c.mimeType.lower() == "audio/opus")


async def test_opus_packets_are_decoded_straight_into_the_feed() -> None:
    frames: list[av.AudioFrame] = []
    receive = LowLatencyReceive(frames.append)
    pc, track, answer = await offered(await offer_sdp())
    try:
        assert receive.on_track(pc, track)
        assert isinstance(receive.buffer, ImmediateAudioJitterBuffer)
        assert receive.mid == answer.media[0].rtp.muxId
        assert receive.on_answer(answer) and receive.decoder is not None
        pt = opus_type(answer)
        for seq, payload in enumerate(encoded(0.1)):
            assert receive.buffer.add(opus_packet(pt, payload, seq)) == (False, None)
        assert len(frames) == 5 and receive.decoder.decoded == 5
        # another codec's packet goes on to aiortc's decoder
        _, frame = receive.buffer.add(opus_packet(0, b"\x00" * 160, 5))
        assert frame is not None and len(frames) == 5
    finally:
        await close_peer(pc, 2.0)


async def test_reordered_opus_packets_are_decoded_in_order() -> None:
    frames: list[av.AudioFrame] = []
    receive = LowLatencyReceive(frames.append)
    pc, track, answer = await offered(await offer_sdp())
    try:
        receive.on_track(pc, track)
        assert receive.on_answer(answer) and receive.buffer is not None
        pt = opus_type(answer)
        assert receive.buffer.direct_types == frozenset({pt})
        payloads = encoded(0.1)
        for seq in (0, 1, 3, 2, 4):
            assert receive.buffer.add(opus_packet(pt, payloads[seq], seq)) == (False, None)
        # 2 came after 3 and was waited for (or, on a stalled machine, rebuilt from 3's FEC):
        # either way five frames, in order, each at its own pts
        assert [f.pts for f in frames] == [0, 960, 1920, 2880, 3840]
        assert receive.reorder_stats()["reordered"] <= 1
        receive.close()
    finally:
        await close_peer(pc, 2.0)


async def test_the_reorder_bounds_reach_the_buffer() -> None:
    receive = LowLatencyReceive(lambda frame: None, ReorderSettings(max_s=0.0))
    pc, track, _ = await offered(await offer_sdp())
    try:
        assert receive.on_track(pc, track) and receive.buffer is not None
        assert receive.buffer.reorder.settings.max_s == 0.0
    finally:
        await close_peer(pc, 2.0)


async def test_a_failing_feed_is_logged_and_the_packet_still_consumed() -> None:
    def broken(frame: Any) -> None:
        raise RuntimeError("ingest bug")

    receive = LowLatencyReceive(broken)
    pc, track, answer = await offered(await offer_sdp())
    try:
        receive.on_track(pc, track)
        receive.on_answer(answer)
        assert receive.buffer is not None
        pt = opus_type(answer)
        assert receive.buffer.add(opus_packet(pt, encoded(0.02)[0], 0)) == (False, None)
        assert receive.feed_errors == 1
    finally:
        await close_peer(pc, 2.0)


async def test_without_opus_aiortc_keeps_decoding() -> None:
    sdp = (await offer_sdp()).replace("opus", "opux")  # PCMU/PCMA/G722 remain
    receive = LowLatencyReceive(lambda frame: None)
    pc, track, answer = await offered(sdp)
    try:
        assert receive.on_track(pc, track)
        assert not receive.on_answer(answer)
        assert receive.decoder is None and receive.buffer is not None
        assert receive.buffer.direct is None
    finally:
        await close_peer(pc, 2.0)


async def test_nothing_is_wired_for_a_track_of_another_connection() -> None:
    receive = LowLatencyReceive(lambda frame: None)
    pc, _, answer = await offered(await offer_sdp())
    try:
        assert not receive.on_track(pc, AudioStreamTrack())
        assert not receive.on_answer(answer) and receive.decoder is None
    finally:
        await close_peer(pc, 2.0)
