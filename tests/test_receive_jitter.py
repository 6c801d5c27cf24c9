"""The low-latency audio jitter buffer, and its place in aiortc's receiver."""

import asyncio

from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtp import RtpPacket

from omnicall.media.audio_reorder import ReorderSettings
from omnicall.media.receive_jitter import ImmediateAudioJitterBuffer, install_low_latency_audio
from omnicall.media.third_party import receiver_jitter_buffer
from tests.test_third_party import audio_receiver


def packet(seq: int, ts: int) -> RtpPacket:
    p = RtpPacket(payload_type=111, sequence_number=seq, timestamp=ts)
    p._data = bytes([seq % 256])  # type: ignore[attr-defined]
    return p


def test_the_low_latency_buffer_takes_the_place_of_aiortcs() -> None:
    """(That aiortc's own buffer is where the patch puts this one, with its 4-frame
    prefetch, is tests/test_third_party.py's check.)"""
    receiver = audio_receiver()
    assert type(receiver_jitter_buffer(receiver)) is JitterBuffer
    installed = install_low_latency_audio(receiver)
    assert isinstance(installed, ImmediateAudioJitterBuffer)
    assert receiver_jitter_buffer(receiver) is installed


def test_install_reports_missing_internals() -> None:
    assert install_low_latency_audio(object()) is None


def test_releases_each_in_order_packet_immediately() -> None:
    jb = ImmediateAudioJitterBuffer()
    for i in range(5):
        pli, frame = jb.add(packet(100 + i, 960 * i))
        assert not pli and frame is not None and frame.timestamp == 960 * i
    # aiortc's own buffer holds the first frame until 4 more have arrived
    stock = JitterBuffer(capacity=16, prefetch=4)
    released = [stock.add(packet(100 + i, 960 * i))[1] for i in range(5)]
    assert released[:4] == [None] * 4


def test_late_duplicate_and_lost_packets() -> None:
    jb = ImmediateAudioJitterBuffer()
    assert jb.add(packet(10, 0))[1] is not None
    assert jb.add(packet(12, 1920))[1] is not None  # 11 lost (or late)
    assert jb.lost_packets == 1
    assert jb.add(packet(11, 960))[1] is None  # arrives late: dropped
    assert jb.add(packet(12, 1920))[1] is None  # duplicate
    assert jb.late_packets == 2


def test_sequence_wraps_and_resyncs() -> None:
    jb = ImmediateAudioJitterBuffer()
    assert jb.add(packet(65535, 0))[1] is not None
    assert jb.add(packet(0, 960))[1] is not None
    assert jb.lost_packets == 0
    assert jb.add(packet(30000, 5000))[1] is not None  # a big jump resyncs
    assert jb.add(packet(30001, 5960))[1] is not None


def test_a_direct_sink_takes_the_packets_it_wants_and_aiortc_gets_the_rest() -> None:
    buffer = ImmediateAudioJitterBuffer()
    taken: list[int] = []
    data: list[bytes] = []

    def sink(p: RtpPacket, payload: bytes) -> bool:
        if p.sequence_number % 2:
            return False
        taken.append(p.sequence_number)
        data.append(payload)
        return True

    buffer.direct = sink
    released = [buffer.add(packet(seq, seq * 960))[1] for seq in range(6)]
    assert taken == [0, 2, 4]
    assert data == [bytes([0]), bytes([2]), bytes([4])]  # the depayloaded data, passed along
    assert [f is not None for f in released] == [False, True, False, True, False, True]
    # late packets never reach the sink
    assert buffer.add(packet(2, 2 * 960)) == (False, None) and taken == [0, 2, 4]
    assert buffer.late_packets == 1


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_direct_packets_are_reordered_and_a_gap_waits_at_most_the_deadline() -> None:
    clock = FakeClock()
    buffer = ImmediateAudioJitterBuffer(ReorderSettings(min_s=0.05), clock=clock)
    taken: list[int] = []
    buffer.direct = lambda p, data: p.payload_type == 111 and taken.append(
        p.sequence_number) is None
    buffer.direct_types = frozenset({111})
    for seq, at in ((0, 0.0), (2, 0.04), (1, 0.05), (4, 0.08)):
        clock.now = at
        assert buffer.add(packet(seq, seq * 960)) == (False, None)
    assert taken == [0, 1, 2]  # the late 1 was waited for and used
    clock.now = 0.129
    buffer.poll()
    assert taken == [0, 1, 2]
    clock.now = 0.131  # 3 never came: given up on at 0.08 + 0.05 (then FEC/PLC fill it)
    buffer.poll()
    assert taken == [0, 1, 2, 4] and buffer.reorder.skipped == 1
    # another payload type keeps the immediate path to aiortc's decoder
    other = RtpPacket(payload_type=0, sequence_number=7, timestamp=0)
    assert buffer.add(other)[1] is not None


async def test_the_event_loop_timer_releases_what_waited_too_long() -> None:
    buffer = ImmediateAudioJitterBuffer(ReorderSettings(min_s=0.03, max_s=0.03))
    taken: list[int] = []
    buffer.direct = lambda p, data: taken.append(p.sequence_number) is None
    buffer.direct_types = frozenset({111})
    buffer.add(packet(0, 0))
    buffer.add(packet(2, 1920))
    assert taken == [0]
    for _ in range(100):  # the timer fires ~30 ms later (waited for, not timed)
        if taken == [0, 2]:
            break
        await asyncio.sleep(0.01)
    assert taken == [0, 2]
    buffer.add(packet(4, 3840))
    buffer.close()  # the call ended: no timer left behind
    await asyncio.sleep(0.06)
    assert taken == [0, 2]
