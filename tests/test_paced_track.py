import asyncio

import numpy as np
import pytest

from omnicall.media.clock import ManualClock
from omnicall.media.paced_track import PacedAudioTrack
from omnicall.media.playout import FrameTag, PlayoutMeter
from omnicall.media.playout_queue import PlayoutQueue


async def test_paces_20ms_frames_with_monotonic_pts_and_silence_when_empty() -> None:
    clock = ManualClock()
    jb = PlayoutQueue(target_frames=1)
    track = PacedAudioTrack(jb, clock)
    jb.push(np.full(960, 5, np.int16))
    first = await track.recv()  # due immediately
    assert first.pts == 0 and first.sample_rate == 48_000 and first.samples == 960
    assert first.to_ndarray()[0, 0] == 5
    pending = asyncio.ensure_future(track.recv())
    await asyncio.sleep(0)
    assert not pending.done()  # frame 1 is due at 20 ms
    await clock.advance(0.019)
    assert not pending.done()
    await clock.advance(0.001)
    second = await pending
    assert second.pts == 960
    assert not second.to_ndarray().any()  # silence
    assert track.silence_frames == 1 and track.late_frames == 0
    track.stop()


async def test_stall_skips_ahead_instead_of_bursting() -> None:
    clock = ManualClock()
    track = PacedAudioTrack(PlayoutQueue(target_frames=1), clock, max_lag_frames=3)
    await track.recv()
    await clock.advance(0.5)  # the loop stalled for 500 ms
    late = await track.recv()
    assert track.late_frames == 1
    assert track.skipped_frames == 24
    assert late.pts == 25 * 960  # pts follows real time: 0.5 s
    nxt = asyncio.ensure_future(track.recv())
    await asyncio.sleep(0)
    assert not nxt.done()  # back on schedule: no burst
    await clock.advance(0.02)
    assert (await nxt).pts == 26 * 960
    track.stop()


async def test_small_lateness_is_counted_not_skipped() -> None:
    clock = ManualClock()
    track = PacedAudioTrack(PlayoutQueue(target_frames=1), clock)
    await track.recv()
    await clock.advance(0.045)  # frame 1 due at 20 ms, sent at 45 ms
    frame = await track.recv()
    assert frame.pts == 960 and track.late_frames == 1 and track.skipped_frames == 0
    track.stop()


async def test_waits_briefly_for_a_late_block_instead_of_underrunning() -> None:
    clock = ManualClock()
    jb = PlayoutQueue(target_frames=1)
    track = PacedAudioTrack(jb, clock, max_slip_s=0.5)
    jb.push(np.full(960, 1, np.int16))
    await track.recv()  # plays the only frame; the buffer is now starving
    await clock.advance(0.02)
    pending = asyncio.ensure_future(track.recv())
    await asyncio.sleep(0.01)
    assert not pending.done()  # holding the tick for the late block
    await clock.advance(0.004)
    jb.push(np.full(960, 2, np.int16))
    frame = await asyncio.wait_for(pending, 1)
    assert frame.to_ndarray()[0, 0] == 2 and frame.pts == 960
    assert track.slips == 1 and jb.underruns == 0
    assert abs(track.slipped_s - 0.004) < 1e-9
    # the schedule moved by the slip: the next frame is due at 44 ms, not 40 ms
    nxt = asyncio.ensure_future(track.recv())
    await clock.advance(0.0199)
    assert not nxt.done()
    await clock.advance(0.0001)
    await asyncio.wait_for(nxt, 1)
    track.stop()


async def test_gives_up_after_max_slip_and_sends_silence() -> None:
    clock = ManualClock()
    jb = PlayoutQueue(target_frames=1)
    track = PacedAudioTrack(jb, clock, max_slip_s=0.01)
    jb.push(np.full(960, 1, np.int16))
    await track.recv()
    await clock.advance(0.02)
    frame = await asyncio.wait_for(track.recv(), 1)
    assert not frame.to_ndarray().any() and track.slips == 0 and jb.underruns == 1
    track.stop()


async def test_a_burst_that_waited_for_its_tick_moves_the_schedule_earlier() -> None:
    clock = ManualClock()
    jb = PlayoutQueue(target_frames=1, clock=clock)  # the queue dates each burst
    track = PacedAudioTrack(jb, clock, max_slip_s=0.0, max_advance_s=0.005)
    await track.recv()  # silence at 0 ms; frame 1 is due at 20 ms
    await clock.advance(0.004)
    jb.push(np.full(960, 1, np.int16))  # the burst arrives 16 ms before its tick
    jb.push(np.full(960, 2, np.int16))
    pending = asyncio.ensure_future(track.recv())
    await clock.advance(0.016)
    assert (await asyncio.wait_for(pending, 1)).to_ndarray()[0, 0] == 1
    assert track.advances == 1 and abs(track.advanced_s - 0.005) < 1e-9
    # frame 2 of the same burst is due 5 ms early (35 ms); its own wait is not a burst's
    nxt = asyncio.ensure_future(track.recv())
    await clock.advance(0.0149)
    assert not nxt.done()
    await clock.advance(0.0001)
    assert (await asyncio.wait_for(nxt, 1)).to_ndarray()[0, 0] == 2
    assert track.advances == 1
    track.stop()


async def test_a_tick_the_loop_ran_late_does_not_move_the_schedule() -> None:
    clock = ManualClock()
    jb = PlayoutQueue(target_frames=1, clock=clock)
    track = PacedAudioTrack(jb, clock, max_slip_s=0.0, max_advance_s=0.005)
    await track.recv()
    await clock.advance(0.004)
    jb.push(np.full(960, 1, np.int16))
    await clock.advance(0.041)  # a busy loop: the 20 ms tick runs at 45 ms
    await track.recv()
    assert track.advances == 0 and track.late_frames == 1
    track.stop()


async def test_meter_hears_each_sent_reply_frame_when_it_is_sent() -> None:
    clock = ManualClock()
    meter = PlayoutMeter(clock)
    jb = PlayoutQueue(target_frames=1)
    track = PacedAudioTrack(jb, clock, max_slip_s=0.0, meter=meter)
    jb.push(np.full(960, 1, np.int16))  # not a reply: not metered
    jb.push(np.full(960, 2, np.int16), FrameTag(4))
    jb.push(np.full(960, 3, np.int16), FrameTag(4, samples=500, last=True))
    await track.recv()  # at 0 ms: the untagged frame
    assert meter.reply(4) is None
    for _ in range(2):  # at 20 and 40 ms: the reply's two frames
        pending = asyncio.ensure_future(track.recv())
        await clock.advance(0.02)
        await asyncio.wait_for(pending, 1)
    pending = asyncio.ensure_future(track.recv())
    await clock.advance(0.02)
    assert not (await asyncio.wait_for(pending, 1)).to_ndarray().any()  # silence
    reply = meter.reply(4)
    assert reply is not None and reply.sent_samples == 960 + 500
    assert reply.first_sent_at_s == pytest.approx(0.02)
    assert reply.ended_at_s == pytest.approx(0.04) == reply.last_sent_at_s
    assert track.silence_frames == 1
    track.stop()
