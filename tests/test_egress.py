import numpy as np

from omnicall.media.egress import AudioEgress
from omnicall.media.playout import FrameTag, PlayoutMeter
from omnicall.media.playout_queue import PlayoutQueue
from omnicall.media.resample import StreamConverter
from tests.utils import pop, tone, wait_for


async def test_engine_frames_become_wire_frames_streaming_equals_batch() -> None:
    reply = tone(300, 0.8, rate=24_000)
    streamed = AudioEgress(PlayoutQueue(target_frames=1))
    for i in range(0, len(reply), 1920):
        await streamed.write(reply[i:i + 1920], 24_000)
    streamed.end_utterance()
    batch = AudioEgress(PlayoutQueue(target_frames=1))
    await batch.write(reply, 24_000)
    batch.end_utterance()

    def drain(jb: PlayoutQueue) -> np.ndarray:
        out = []
        while (f := pop(jb)) is not None:
            out.append(f)
        return np.concatenate(out)

    a, b = drain(streamed.queue), drain(batch.queue)
    assert len(a) == len(b) == 0.8 * 48_000 + 960  # + the resampler's delay, padded
    assert np.array_equal(a, b)
    assert streamed.queue.underruns == 0


async def test_each_80ms_block_gives_four_frames_at_once() -> None:
    """The resampler's filter delay is paid once as leading silence: no block's last frame
    waits for the next block (that held every reply back by a frame)."""
    egress = AudioEgress(PlayoutQueue(target_frames=1))
    reply = tone(300, 0.4, rate=24_000)
    for n, i in enumerate(range(0, len(reply), 1920), start=1):
        await egress.write(reply[i:i + 1920], 24_000)
        assert len(egress.queue) == 4 * n


async def test_partial_tail_is_padded_on_end() -> None:
    egress = AudioEgress(PlayoutQueue(target_frames=5))
    await egress.write(np.ones(100, np.int16) * 1000, 48_000)
    assert len(egress.queue) == 0
    egress.end_utterance()
    assert len(egress.queue) == 1
    frame = pop(egress.queue)
    assert frame is not None and frame[:100].min() == 1000 and not frame[100:].any()


async def test_flush_drops_queued_and_partial() -> None:
    egress = AudioEgress(PlayoutQueue(target_frames=1))
    await egress.write(tone(300, 0.5, rate=24_000), 24_000)
    assert egress.flush() > 0
    assert len(egress.queue) == 0 and pop(egress.queue) is None
    egress.end_utterance()  # nothing partial left to pad
    assert len(egress.queue) == 0


async def test_write_waits_while_full() -> None:
    import asyncio
    jb = PlayoutQueue(target_frames=1, capacity_frames=2)
    egress = AudioEgress(jb)
    writer = asyncio.ensure_future(egress.write(np.zeros(960 * 4, np.int16), 48_000))
    await asyncio.sleep(0.01)
    assert not writer.done() and len(jb) == 2
    pop(jb)
    pop(jb)
    await asyncio.wait_for(writer, 1)
    assert len(jb) == 2


class FakeTime:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


def drain_tagged(jb: PlayoutQueue) -> list[tuple[np.ndarray, FrameTag | None]]:
    out = []
    while (popped := jb.pop_tagged()) is not None:
        out.append(popped)
    return out


async def test_frames_carry_their_reply_and_the_padded_tail_counts_its_audio() -> None:
    egress = AudioEgress(PlayoutQueue(target_frames=1))
    await egress.write(np.ones(2000, np.int16), 48_000, turn_id=7)  # 2 frames + 80 samples
    egress.end_utterance()
    tags = [tag for _, tag in drain_tagged(egress.queue)]
    assert tags == [FrameTag(7), FrameTag(7), FrameTag(7, samples=80, last=True)]


async def test_reply_resampled_from_24khz_counts_its_whole_stream_not_the_padding() -> None:
    egress = AudioEgress(PlayoutQueue(target_frames=1))
    reply = tone(300, 0.51, rate=24_000)  # 12240 samples: 24480 at 48 kHz, 25.5 frames
    converter = StreamConverter(48_000)  # the same stream, uncut: its length is the count
    stream = 0
    for i in range(0, len(reply), 1920):
        await egress.write(reply[i:i + 1920], 24_000, turn_id=1)
        stream += len(converter.convert(reply[i:i + 1920], 24_000))
    stream += len(converter.flush())
    egress.end_utterance()
    tags = [tag for _, tag in drain_tagged(egress.queue)]
    assert all(t is not None and t.turn_id == 1 for t in tags)
    # the reply and the resampler's delay (paid as leading silence, a few samples)
    assert 2 * len(reply) <= stream < 2 * len(reply) + 100
    assert sum(t.samples for t in tags if t is not None) == stream
    assert tags[-1] is not None and tags[-1].last and tags[-1].samples == stream % 960
    assert len(tags) == -(-stream // 960)


async def test_untagged_writes_stay_untagged() -> None:
    egress = AudioEgress(PlayoutQueue(target_frames=1))
    await egress.write(np.ones(1000, np.int16), 48_000)
    egress.end_utterance()
    assert [tag for _, tag in drain_tagged(egress.queue)] == [None, None]


async def test_a_new_reply_closes_the_previous_ones_partial_frame() -> None:
    """Reply 2 follows reply 1 without an end: reply 1's remainder is its own last frame
    (zero padded), not the start of a frame of reply 2."""
    egress = AudioEgress(PlayoutQueue(target_frames=1))
    await egress.write(np.full(1000, 1, np.int16), 48_000, turn_id=1)
    await egress.write(np.full(960, 2, np.int16), 48_000, turn_id=2)
    got = drain_tagged(egress.queue)
    assert [tag for _, tag in got] == [FrameTag(1), FrameTag(1, samples=40, last=True),
                                       FrameTag(2)]
    assert got[1][0][:40].min() == 1 and not got[1][0][40:].any()
    assert (got[2][0] == 2).all()


async def test_end_with_nothing_queued_tells_the_meter_the_end_already_left() -> None:
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    egress = AudioEgress(PlayoutQueue(target_frames=1), meter)
    await egress.write(np.ones(960, np.int16), 48_000, turn_id=3)  # one whole frame
    popped = egress.queue.pop_tagged()
    assert popped is not None and popped[1] is not None
    meter.sent(popped[1])
    clock.t = 1.0
    egress.end_utterance()  # no tail: the frame that left was the last
    reply = meter.reply(3)
    assert reply is not None and reply.ended_at_s == 0.0


async def test_flush_marks_queued_and_open_replies_interrupted() -> None:
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    egress = AudioEgress(PlayoutQueue(target_frames=1), meter)
    await egress.write(np.ones(960 * 3, np.int16), 48_000, turn_id=1)
    popped = egress.queue.pop_tagged()
    assert popped is not None and popped[1] is not None
    meter.sent(popped[1])
    egress.end_utterance()  # reply 1 ended, two of its frames still queued
    await egress.write(np.ones(500, np.int16), 48_000, turn_id=2)  # only a partial frame
    clock.t = 2.0
    assert egress.flush() == 2
    one, two = meter.reply(1), meter.reply(2)
    assert one is not None and one.interrupted_at_s == 2.0 and one.interrupted_sent_samples == 960
    assert not one.ended
    assert two is not None and two.interrupted and two.sent_samples == 0


async def test_flush_spares_a_reply_played_to_its_end() -> None:
    meter = PlayoutMeter(FakeTime())
    egress = AudioEgress(PlayoutQueue(target_frames=1), meter)
    await egress.write(np.ones(960, np.int16), 48_000, turn_id=1)
    egress.end_utterance()
    popped = egress.queue.pop_tagged()
    assert popped is not None and popped[1] == FrameTag(1, last=True)
    meter.sent(popped[1])
    egress.flush()
    reply = meter.reply(1)
    assert reply is not None and reply.ended and not reply.interrupted


async def test_live_drops_reach_the_meter_as_discarded() -> None:
    meter = PlayoutMeter(FakeTime())
    egress = AudioEgress(PlayoutQueue(target_frames=1, max_latency_frames=2, meter=meter), meter)
    await egress.write(np.ones(960 * 5, np.int16), 48_000, turn_id=1)
    reply = meter.reply(1)
    assert reply is not None and reply.discarded_samples == 3 * 960 and reply.sent_samples == 0


async def test_a_flush_while_waiting_for_space_drops_the_rest_of_the_write() -> None:
    import asyncio
    meter = PlayoutMeter(FakeTime())
    jb = PlayoutQueue(target_frames=1, capacity_frames=2)
    egress = AudioEgress(jb, meter)
    writer = asyncio.ensure_future(egress.write(np.zeros(960 * 5, np.int16), 48_000, turn_id=1))
    await wait_for(lambda: len(jb) == 2)
    assert not writer.done()
    egress.flush()  # barge-in while the write waits: the rest of it is stale
    await asyncio.wait_for(writer, 1)
    assert len(jb) == 0 and egress.abandoned_frames == 3
    reply = meter.reply(1)
    assert reply is not None and reply.interrupted


async def test_stop_cuts_its_reply_and_the_next_reply_plays() -> None:
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    egress = AudioEgress(PlayoutQueue(target_frames=1), meter)
    await egress.write(np.ones(960 * 4, np.int16), 48_000, turn_id=1)
    popped = egress.queue.pop_tagged()
    assert popped is not None and popped[1] is not None
    meter.sent(popped[1])
    clock.t = 1.5
    egress.stop(1)  # a barge-in on reply 1 (the call output's stop)
    assert len(egress.queue) == 0
    cut = meter.reply(1)
    assert cut is not None and cut.interrupted_at_s == 1.5 and cut.interrupted_sent_samples == 960
    await egress.write(np.ones(960, np.int16), 48_000, turn_id=2)  # the next reply plays
    assert egress.queue.queued_turns() == [2]


async def test_stopping_a_reply_that_is_not_queued_keeps_the_one_that_is() -> None:
    meter = PlayoutMeter(FakeTime())
    egress = AudioEgress(PlayoutQueue(target_frames=1), meter)
    await egress.write(np.ones(960 * 2, np.int16), 48_000, turn_id=2)
    egress.stop(1)  # nothing of reply 1 reached the media plane
    assert egress.queue.queued_turns() == [2] and meter.reply(2) is None
