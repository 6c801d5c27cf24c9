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


# -- ducking: one reply's frames scaled as they are sent ---------------------------------
def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))


def _voice(frames: int, amp: float = 0.5) -> list[np.ndarray]:
    """Real audio (a 220 Hz tone), cut in 20 ms 48 kHz frames."""
    t = np.arange(frames * 960) / 48_000
    wave = (np.sin(2 * np.pi * 220 * t) * amp * 32767).astype(np.int16)
    return [wave[i * 960:(i + 1) * 960] for i in range(frames)]


def test_a_ducked_reply_is_scaled_after_a_ramp_within_its_first_frame() -> None:
    from omnicall.media.paced_track import RAMP_SAMPLES, ReplyGains

    gains = ReplyGains()
    frames = _voice(3)
    gains.set(1, 0.25)
    first, ducked = gains.apply(frames[0], FrameTag(1))
    assert ducked and first.dtype == np.int16
    # the ramp: from 1 down to 0.25 over its first RAMP_SAMPLES, then flat
    expected = np.rint(frames[0] * np.concatenate(
        [1 + (0.25 - 1) * np.arange(1, RAMP_SAMPLES + 1) / RAMP_SAMPLES,
         np.full(960 - RAMP_SAMPLES, 0.25)])).astype(np.int16)
    assert np.array_equal(first, expected)
    assert _rms(first[RAMP_SAMPLES:]) == pytest.approx(0.25 * _rms(frames[0][RAMP_SAMPLES:]),
                                                       rel=1e-3)
    second, ducked = gains.apply(frames[1], FrameTag(1))
    assert ducked and np.array_equal(second, np.rint(frames[1] * 0.25).astype(np.int16))
    assert _rms(second) == pytest.approx(0.25 * _rms(frames[1]), rel=1e-3)
    # another reply's frame leaves untouched, the very samples
    other, ducked = gains.apply(frames[2], FrameTag(2))
    assert not ducked and other is frames[2]


def test_restoring_ramps_back_up_then_sends_untouched() -> None:
    from omnicall.media.paced_track import RAMP_SAMPLES, ReplyGains

    gains = ReplyGains()
    frames = _voice(4)
    gains.set(1, 0.5)
    gains.apply(frames[0], FrameTag(1))
    gains.apply(frames[1], FrameTag(1))
    gains.set(1, 1.0)
    assert len(gains) == 1  # kept until its ramp back up is sent
    back, ducked = gains.apply(frames[2], FrameTag(1))
    assert not ducked and len(gains) == 0
    ramp = 0.5 + 0.5 * np.arange(1, RAMP_SAMPLES + 1) / RAMP_SAMPLES
    assert np.array_equal(back[:RAMP_SAMPLES],
                          np.rint(frames[2][:RAMP_SAMPLES] * ramp).astype(np.int16))
    assert np.array_equal(back[RAMP_SAMPLES:], frames[2][RAMP_SAMPLES:])
    after, _ = gains.apply(frames[3], FrameTag(1))
    assert after is frames[3]
    # a second duck from a ducked gain ramps from where it stood, not from 1
    gains.set(1, 0.5)
    gains.apply(frames[0], FrameTag(1))
    gains.set(1, 0.2)
    step, _ = gains.apply(frames[1], FrameTag(1))
    assert np.array_equal(step[:RAMP_SAMPLES], np.rint(frames[1][:RAMP_SAMPLES] * (
        0.5 - 0.3 * np.arange(1, RAMP_SAMPLES + 1) / RAMP_SAMPLES)).astype(np.int16))


def test_a_duck_is_kept_for_its_turn_until_its_end_bounded() -> None:
    from omnicall.media.paced_track import MAX_DUCKED_TURNS, ReplyGains

    gains = ReplyGains()
    frame = _voice(1)[0]
    gains.set(7, 0.3)  # before any of reply 7 was sent
    assert gains.gain(7) == 0.3 and gains.gain(8) == 1.0
    _, ducked = gains.apply(frame, FrameTag(7, last=True))  # its only frame: its end
    assert ducked and len(gains) == 0  # forgotten with its end
    gains.set(9, 1.0)  # restoring what was never ducked keeps nothing
    gains.set(10, 0.5)
    gains.set(10, 1.0)  # restored before any of it left: forgotten, nothing to ramp
    assert len(gains) == 0
    for turn in range(20, 20 + MAX_DUCKED_TURNS + 3):
        gains.set(turn, 0.5)
    assert len(gains) == MAX_DUCKED_TURNS and gains.forgotten_turns == 3
    assert gains.gain(20) == 1.0 and gains.gain(20 + MAX_DUCKED_TURNS + 2) == 0.5
    gains.forget(20 + MAX_DUCKED_TURNS + 2)  # stopped
    assert len(gains) == MAX_DUCKED_TURNS - 1


def test_ducking_rounds_and_checks_its_gain() -> None:
    from omnicall.media.paced_track import ReplyGains

    gains = ReplyGains(ramp_samples=1)
    gains.set(1, 0.5)
    loud = np.array([-32768, 32767, 3, -3] * 240, dtype=np.int16)
    out, _ = gains.apply(loud, FrameTag(1))  # a one-sample ramp ends at its first sample
    assert out.dtype == np.int16
    assert out[:4].tolist() == [-16384, 16384, 2, -2]  # rounded (half to even), in range
    for bad in (-0.01, -0.5, 1.5, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            gains.set(1, bad)
    with pytest.raises(ValueError):
        ReplyGains(max_turns=0)
    with pytest.raises(ValueError):
        ReplyGains(ramp_samples=961)


async def test_the_track_sends_ducked_frames_and_meters_when_the_duck_was_heard() -> None:
    clock = ManualClock()
    meter = PlayoutMeter(clock)
    queue = PlayoutQueue(target_frames=1)
    track = PacedAudioTrack(queue, clock, meter=meter, max_slip_s=0)
    frames = _voice(6)
    for frame in frames[:3]:
        queue.push(frame, FrameTag(1))
    for frame in frames[3:]:
        queue.push(frame, FrameTag(2))
    sent = []
    at = []
    for i in range(6):
        if i == 1:
            track.duck(1, 0.25)  # while reply 1 plays
            track.duck(2, 0.5)  # reply 2 has not started: its first frame is ducked
        pending = asyncio.ensure_future(track.next_samples())
        await clock.advance(0.02)
        samples, _ = await asyncio.wait_for(pending, 1)
        sent.append(samples)
        at.append(clock.now())
    assert np.array_equal(sent[0], frames[0])  # sent before the duck
    assert _rms(sent[2]) == pytest.approx(0.25 * _rms(frames[2]), rel=1e-3)
    assert _rms(sent[4]) == pytest.approx(0.5 * _rms(frames[4]), rel=1e-3)
    one, two = meter.reply(1), meter.reply(2)
    assert one is not None and two is not None
    assert one.ducked_at_s == at[1] and one.ducked_samples == 2 * 960
    assert two.ducked_at_s == at[3] == two.first_sent_at_s and two.ducked_samples == 3 * 960
    track.stop()


# -- holding (--duck pause): a ducked reply waits, silent, and resumes where it stopped ----
def test_a_hold_fades_out_over_one_frame_then_holds_and_resumes_ramped() -> None:
    from omnicall.media.paced_track import HELD, RAMP_SAMPLES, ReplyGains

    gains = ReplyGains()
    frames = _voice(3)
    gains.set(1, HELD)
    assert not gains.held(1)  # not faded out yet: its next frame fades
    faded, ducked = gains.apply(frames[0], FrameTag(1))
    fade = 1 - np.arange(1, 961) / 960  # over the whole frame, down to silence
    assert ducked and np.array_equal(faded, np.rint(frames[0] * fade).astype(np.int16))
    assert faded[-1] == 0 and gains.held(1) and not gains.held(2)
    gains.set(1, 1.0)  # lifted: the next frame ramps up from silence
    assert not gains.held(1)
    back, ducked = gains.apply(frames[1], FrameTag(1))
    assert not ducked and len(gains) == 0
    ramp = np.arange(1, RAMP_SAMPLES + 1) / RAMP_SAMPLES
    assert np.array_equal(back[:RAMP_SAMPLES],
                          np.rint(frames[1][:RAMP_SAMPLES] * ramp).astype(np.int16))
    assert np.array_equal(back[RAMP_SAMPLES:], frames[1][RAMP_SAMPLES:])
    gains.set(2, HELD)
    gains.forget(2)  # stopped while held: nothing of it is held any more
    assert not gains.held(2) and len(gains) == 0


async def _sent(track: PacedAudioTrack, clock: ManualClock, n: int) -> list[np.ndarray]:
    """``n`` ticks; each a hair over 20 ms, so that no tick is due a rounding error after
    the clock (the schedule is a float sum)."""
    out = []
    for _ in range(n):
        pending = asyncio.ensure_future(track.next_samples())
        await clock.advance(0.02 + 1e-9)
        samples, _ = await asyncio.wait_for(pending, 1)
        out.append(samples)
    return out


async def test_a_held_reply_waits_in_the_queue_and_resumes_at_the_frame_after_the_fade(
        ) -> None:
    clock = ManualClock()
    meter = PlayoutMeter(clock)
    queue = PlayoutQueue(target_frames=1)
    track = PacedAudioTrack(queue, clock, meter=meter, max_slip_s=0, hold_ducked=True)
    frames = _voice(8)
    for frame in frames:
        queue.push(frame, FrameTag(1))
    sent = await _sent(track, clock, 2)
    track.duck(1, 0.3)  # a duck below 1 holds the reply
    sent += await _sent(track, clock, 1)  # frame 2, faded out
    faded_at = clock.now()
    sent += await _sent(track, clock, 10)  # held: silence, the queue waits
    assert len(queue) == 5 and track.held_frames == 10
    assert all(not s.any() for s in sent[3:])
    track.duck(1, 1.0)
    sent += await _sent(track, clock, 5)
    assert [np.array_equal(a, b) for a, b in zip(sent[:2], frames[:2], strict=True)] == \
        [True, True]
    assert _rms(sent[2]) < 0.7 * _rms(frames[2]) and sent[2][-1] == 0
    # the resume: frame 3, the one after the fade, ramped in; then the rest untouched
    from omnicall.media.paced_track import RAMP_SAMPLES
    assert np.array_equal(sent[13][RAMP_SAMPLES:], frames[3][RAMP_SAMPLES:])
    assert abs(int(sent[13][0])) <= abs(int(frames[3][0])) // RAMP_SAMPLES + 1
    assert all(np.array_equal(a, b) for a, b in zip(sent[14:], frames[4:], strict=True))
    reply = meter.reply(1)
    assert reply is not None and reply.ducked_at_s == faded_at
    assert reply.sent_samples == 8 * 960 and reply.ducked_samples == 960  # the fade only
    track.stop()


async def test_a_hold_no_one_lifts_is_lifted_by_the_track() -> None:
    clock = ManualClock()
    queue = PlayoutQueue(target_frames=1)
    track = PacedAudioTrack(queue, clock, max_slip_s=0, hold_ducked=True, max_hold_s=0.1)
    frames = _voice(4)
    for frame in frames:
        queue.push(frame, FrameTag(1))
    track.duck(1, 0.5)
    sent = await _sent(track, clock, 9)  # fade, 5 held (0.1 s), then the rest
    assert track.held_frames == 5 and track.released_holds == 1
    assert all(not s.any() for s in sent[1:6])
    assert np.array_equal(sent[7], frames[2]) and np.array_equal(sent[8], frames[3])
    track.stop()
