import numpy as np
import pytest

from omnicall.media.clock import ManualClock
from omnicall.media.playout import FrameTag, PlayoutMeter
from omnicall.media.playout_queue import PlayoutQueue
from tests.utils import pop


def frame(value: int = 1) -> np.ndarray:
    return np.full(960, value, np.int16)


def test_prefetches_target_then_plays_in_order() -> None:
    jb = PlayoutQueue(target_frames=2)
    jb.push(frame(1))
    assert pop(jb) is None  # not started yet: silence, not an underrun
    jb.push(frame(2))
    got = [pop(jb), pop(jb)]
    assert [int(g[0]) for g in got if g is not None] == [1, 2]
    assert jb.underruns == 0


def test_underrun_mid_utterance_counts_and_rebuffers() -> None:
    jb = PlayoutQueue(target_frames=2)
    for v in (1, 2):
        jb.push(frame(v))
    pop(jb), pop(jb)
    assert pop(jb) is None and jb.underruns == 1
    jb.push(frame(3))
    assert pop(jb) is None  # re-buffering to target
    jb.push(frame(4))
    popped = pop(jb)
    assert popped is not None and popped[0] == 3


def test_end_of_utterance_plays_short_tail_and_is_not_underrun() -> None:
    jb = PlayoutQueue(target_frames=3)
    jb.push(frame(7))
    jb.mark_end()
    popped = pop(jb)
    assert popped is not None and popped[0] == 7
    assert pop(jb) is None and jb.underruns == 0


def test_capacity_back_pressure() -> None:
    jb = PlayoutQueue(target_frames=1, capacity_frames=3)
    assert all(jb.push(frame()) for _ in range(3))
    assert not jb.has_space and not jb.push(frame())
    pop(jb)
    assert jb.has_space and jb.push(frame())


def test_live_mode_bounds_latency_by_dropping_oldest() -> None:
    jb = PlayoutQueue(target_frames=2, max_latency_frames=4)
    for v in range(10):
        assert jb.push(frame(v))
    assert len(jb) == 4 and jb.dropped_frames == 6
    popped = pop(jb)
    assert popped is not None and popped[0] == 6


def test_live_standing_excess_is_trimmed_after_a_window() -> None:
    jb = PlayoutQueue(target_frames=2, max_latency_frames=20, trim_window_frames=8)
    for v in range(6):  # a burst: 4 frames more than one 80 ms block
        jb.push(frame(v))
    played = []
    for block in range(4):  # then blocks of 4 arrive every 4 pops, as from an 80 ms engine
        for _ in range(4):
            f = pop(jb)
            played.append(None if f is None else int(f[0]))
        for v in range(4):
            jb.push(frame(100 * (block + 1) + v))
    # the 2 frames of standing excess were trimmed once; no underrun happened
    assert jb.trimmed_frames == 2 and jb.underruns == 0
    assert len(jb) == 4


def test_generated_ahead_mode_never_trims() -> None:
    jb = PlayoutQueue(target_frames=2, trim_window_frames=4)
    for v in range(40):
        jb.push(frame(v))
    got = [pop(jb) for _ in range(20)]
    assert jb.trimmed_frames == 0 and [int(g[0]) for g in got if g is not None] == list(range(20))


def test_starving_and_what_each_side_waits_on() -> None:
    jb = PlayoutQueue(target_frames=1, capacity_frames=2)
    assert not jb.arrived.is_set() and not jb.space.is_set()
    jb.push(frame())
    assert jb.arrived.is_set()  # the paced track's slip waits on this
    jb.arrived.clear()
    jb.push(frame())
    assert jb.arrived.is_set()
    assert not jb.push(frame())
    assert not jb.space.is_set()
    pop(jb)
    assert jb.space.is_set()  # the producer waits on this when the queue is full
    jb.space.clear()
    pop(jb)
    assert not jb.space.is_set()  # only a full queue getting room wakes the producer
    assert jb.starving  # playing, empty, utterance not ended
    jb.mark_end()
    assert not jb.starving
    jb.flush()
    assert jb.space.is_set()  # a flush wakes a waiting producer (its audio is stale)


async def test_dates_the_first_frame_of_each_burst_once() -> None:
    clock = ManualClock(1.0)
    jb = PlayoutQueue(target_frames=1, clock=clock)
    jb.push(frame())
    await clock.advance(0.5)
    jb.push(frame())  # not into an empty queue: the same burst
    assert jb.take_burst_start() == 1.0 and jb.take_burst_start() is None
    pop(jb)
    pop(jb)
    await clock.advance(0.5)
    jb.push(frame())
    assert jb.take_burst_start() == 2.0
    assert PlayoutQueue().take_burst_start() is None  # without a clock: not dated


def test_flush_empties_at_once() -> None:
    jb = PlayoutQueue(target_frames=1)
    for _ in range(5):
        jb.push(frame())
    assert jb.flush() == 5 and len(jb) == 0 and pop(jb) is None
    assert jb.flushed_frames == 5


def test_validation() -> None:
    with pytest.raises(ValueError):
        PlayoutQueue(target_frames=0)
    with pytest.raises(ValueError):
        PlayoutQueue(target_frames=2).push(np.zeros(100, np.int16))


def test_tags_travel_with_their_frames() -> None:
    jb = PlayoutQueue(target_frames=1)
    jb.push(frame(1), FrameTag(5))
    jb.push(frame(2))  # untagged: of no reply
    jb.push(frame(3), FrameTag(6, samples=10))
    assert jb.queued_turns() == [5, 6]
    got = [jb.pop_tagged() for _ in range(3)]
    assert [(int(f[0]), t) for f, t in filter(None, got)] == [
        (1, FrameTag(5)), (2, None), (3, FrameTag(6, samples=10))]
    assert jb.pop_tagged() is None and jb.queued_turns() == []


def test_next_tag_names_the_frame_the_next_pop_plays_and_takes_nothing() -> None:
    jb = PlayoutQueue(target_frames=2)
    jb.push(frame(1), FrameTag(5))
    assert jb.next_tag() is None  # not playing yet: the next pop is silence
    jb.push(frame(2))
    assert jb.next_tag() == FrameTag(5) and jb.next_tag() == FrameTag(5) and len(jb) == 2
    jb.pop_tagged()
    assert jb.next_tag() is None and len(jb) == 1  # an untagged frame: of no reply
    jb.pop_tagged()
    assert jb.next_tag() is None and len(jb) == 0


def test_dropped_and_trimmed_tags_are_discarded_not_popped() -> None:
    meter = PlayoutMeter(ManualClock())
    jb = PlayoutQueue(target_frames=2, max_latency_frames=3, trim_window_frames=2, meter=meter)
    for turn in range(5):
        jb.push(frame(turn), FrameTag(turn))
    assert discarded(meter, range(5)) == [0, 1] and jb.dropped_frames == 2
    popped = jb.pop_tagged()
    assert popped is not None and popped[1] == FrameTag(2) and int(popped[0][0]) == 2
    popped = jb.pop_tagged()  # the second pop closes a trim window: 1 frame stood queued
    assert popped is not None and popped[1] == FrameTag(3)
    assert jb.trimmed_frames == 1 and discarded(meter, range(5)) == [0, 1, 4]
    assert len(jb) == 0 and jb.queued_turns() == []


def test_untagged_frames_are_dropped_silently() -> None:
    meter = PlayoutMeter(ManualClock())
    jb = PlayoutQueue(target_frames=1, max_latency_frames=1, meter=meter)
    jb.push(frame(1))
    jb.push(frame(2), FrameTag(1))
    assert jb.dropped_frames == 1 and meter.reply(1) is None


def discarded(meter: PlayoutMeter, turns: range) -> list[int]:
    """The replies the queue told the meter it discarded frames of."""
    return [t for t in turns if (r := meter.reply(t)) is not None and r.discarded_samples]


def test_mark_last_tags_the_newest_frame_of_that_reply_only() -> None:
    jb = PlayoutQueue(target_frames=1)
    assert not jb.mark_last(1)  # nothing queued
    jb.push(frame(), FrameTag(1))
    jb.push(frame(), FrameTag(1))
    assert not jb.mark_last(2) and jb.mark_last(1)
    first, second = jb.pop_tagged(), jb.pop_tagged()
    assert first is not None and first[1] == FrameTag(1)
    assert second is not None and second[1] == FrameTag(1, last=True)
    jb.push(frame())
    assert not jb.mark_last(1)  # the newest frame is of no reply


def test_flush_drops_tags_with_their_frames() -> None:
    jb = PlayoutQueue(target_frames=1)
    jb.push(frame(1), FrameTag(1))
    jb.push(frame(2), FrameTag(2))
    assert jb.flush() == 2 and jb.queued_turns() == []
    jb.push(frame(3))
    popped = jb.pop_tagged()
    assert popped is not None and popped[1] is None and int(popped[0][0]) == 3
