import asyncio

import numpy as np

from media.clock import ManualClock
from media.jitter_buffer import JitterBuffer
from media.paced_track import PacedAudioTrack


async def test_paces_20ms_frames_with_monotonic_pts_and_silence_when_empty() -> None:
    clock = ManualClock()
    jb = JitterBuffer(target_frames=1)
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
    track = PacedAudioTrack(JitterBuffer(target_frames=1), clock, max_lag_frames=3)
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
    track = PacedAudioTrack(JitterBuffer(target_frames=1), clock)
    await track.recv()
    await clock.advance(0.045)  # frame 1 due at 20 ms, sent at 45 ms
    frame = await track.recv()
    assert frame.pts == 960 and track.late_frames == 1 and track.skipped_frames == 0
    track.stop()
