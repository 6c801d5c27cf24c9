import numpy as np
import pytest

from media.jitter_buffer import JitterBuffer


def frame(value: int = 1) -> np.ndarray:
    return np.full(960, value, np.int16)


def test_prefetches_target_then_plays_in_order() -> None:
    jb = JitterBuffer(target_frames=2)
    jb.push(frame(1))
    assert jb.pop() is None  # not started yet: silence, not an underrun
    jb.push(frame(2))
    got = [jb.pop(), jb.pop()]
    assert [int(g[0]) for g in got if g is not None] == [1, 2]
    assert jb.underruns == 0


def test_underrun_mid_utterance_counts_and_rebuffers() -> None:
    jb = JitterBuffer(target_frames=2)
    for v in (1, 2):
        jb.push(frame(v))
    jb.pop(), jb.pop()
    assert jb.pop() is None and jb.underruns == 1
    jb.push(frame(3))
    assert jb.pop() is None  # re-buffering to target
    jb.push(frame(4))
    popped = jb.pop()
    assert popped is not None and popped[0] == 3


def test_end_of_utterance_plays_short_tail_and_is_not_underrun() -> None:
    jb = JitterBuffer(target_frames=3)
    jb.push(frame(7))
    jb.mark_end()
    popped = jb.pop()
    assert popped is not None and popped[0] == 7
    assert jb.pop() is None and jb.underruns == 0


def test_capacity_back_pressure() -> None:
    jb = JitterBuffer(target_frames=1, capacity_frames=3)
    assert all(jb.push(frame()) for _ in range(3))
    assert not jb.has_space and not jb.push(frame())
    jb.pop()
    assert jb.has_space and jb.push(frame())


def test_live_mode_bounds_latency_by_dropping_oldest() -> None:
    jb = JitterBuffer(target_frames=2, max_latency_frames=4)
    for v in range(10):
        assert jb.push(frame(v))
    assert len(jb) == 4 and jb.dropped_frames == 6
    popped = jb.pop()
    assert popped is not None and popped[0] == 6


def test_live_standing_excess_is_trimmed_after_a_window() -> None:
    jb = JitterBuffer(target_frames=2, max_latency_frames=20, trim_window_frames=8)
    for v in range(6):  # a burst: 4 frames more than one 80 ms block
        jb.push(frame(v))
    played = []
    for block in range(4):  # then blocks of 4 arrive every 4 pops, as from an 80 ms engine
        for _ in range(4):
            f = jb.pop()
            played.append(None if f is None else int(f[0]))
        for v in range(4):
            jb.push(frame(100 * (block + 1) + v))
    # the 2 frames of standing excess were trimmed once; no underrun happened
    assert jb.trimmed_frames == 2 and jb.underruns == 0
    assert len(jb) == 4


def test_generated_ahead_mode_never_trims() -> None:
    jb = JitterBuffer(target_frames=2, trim_window_frames=4)
    for v in range(40):
        jb.push(frame(v))
    got = [jb.pop() for _ in range(20)]
    assert jb.trimmed_frames == 0 and [int(g[0]) for g in got if g is not None] == list(range(20))


def test_starving_and_hooks() -> None:
    calls = {"push": 0, "space": 0}
    jb = JitterBuffer(target_frames=1, capacity_frames=2)
    jb.on_push = lambda: calls.__setitem__("push", calls["push"] + 1)
    jb.on_space = lambda: calls.__setitem__("space", calls["space"] + 1)
    jb.push(frame())
    jb.push(frame())
    assert not jb.push(frame())
    jb.pop()
    assert calls == {"push": 2, "space": 1}
    jb.pop()
    assert jb.starving  # playing, empty, utterance not ended
    jb.mark_end()
    assert not jb.starving


def test_flush_empties_at_once() -> None:
    jb = JitterBuffer(target_frames=1)
    for _ in range(5):
        jb.push(frame())
    assert jb.flush() == 5 and len(jb) == 0 and jb.pop() is None
    assert jb.flushed_frames == 5


def test_validation() -> None:
    with pytest.raises(ValueError):
        JitterBuffer(target_frames=0)
    with pytest.raises(ValueError):
        JitterBuffer(target_frames=2).push(np.zeros(100, np.int16))
