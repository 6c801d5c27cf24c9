"""The adaptive reorder buffer: no wait in order, a bounded adaptive wait on a gap, seeded
networks on an injected clock (nothing here depends on how fast the machine is)."""

from __future__ import annotations

import random

import pytest

from omnicall.media.audio_reorder import AdaptiveReorderBuffer, ReorderSettings

PACKET_S = 0.02
TS = 960  # RTP timestamp units per 20 ms packet at 48 kHz


def run(arrivals: list[tuple[float, int]], buffer: AdaptiveReorderBuffer[int]
        ) -> list[tuple[float, int]]:
    """Feed (arrival time, seq) events in time order, polling at every deadline between
    them as the shell's timer does; returns (release time, seq)."""
    out: list[tuple[float, int]] = []
    for at, seq in sorted(arrivals):
        while (due := buffer.deadline()) is not None and due <= at:
            out += [(due, s) for s in buffer.poll(due)]
        out += [(at, s) for s in buffer.push(seq % 65536, seq * TS, seq, at)]
    while (due := buffer.deadline()) is not None:
        out += [(due, s) for s in buffer.poll(due)]
    return out


def jittered(n: int, delay_s: float, jitter_s: float, seed: int, start: int = 0,
             t0: float = 0.0, loss: float = 0.0) -> list[tuple[float, int]]:
    """Packets sent every 20 ms, each delayed delay +- uniform jitter (so reordered), like
    bench/impair.py's jitter."""
    rng = random.Random(seed)
    arrivals = []
    for k in range(n):
        d = delay_s + rng.uniform(-jitter_s, jitter_s)
        if rng.random() >= loss:
            arrivals.append((t0 + k * PACKET_S + max(0.0, d), start + k))
    return arrivals


def test_in_order_packets_pass_at_once_and_nothing_is_held() -> None:
    buffer: AdaptiveReorderBuffer[int] = AdaptiveReorderBuffer()
    for k in range(10):
        assert buffer.push(100 + k, k * TS, k, k * PACKET_S + 0.03) == [k]
        assert buffer.deadline() is None
    assert buffer.target_s < 1e-9 and buffer.released == 10


def test_a_reordered_packet_is_used_in_order() -> None:
    buffer: AdaptiveReorderBuffer[str] = AdaptiveReorderBuffer(ReorderSettings(min_s=0.05))
    assert buffer.push(0, 0, "a", 0.0) == ["a"]
    assert buffer.push(2, 2 * TS, "c", 0.04) == []  # 1 is missing: c waits
    assert buffer.deadline() == pytest.approx(0.04 + buffer.target_s)
    assert buffer.push(1, TS, "b", 0.06) == ["b", "c"]
    assert buffer.reordered == 1 and buffer.skipped == 0 and buffer.late == 0


def test_a_lost_packet_is_given_up_on_at_the_deadline_and_a_late_one_dropped() -> None:
    buffer: AdaptiveReorderBuffer[int] = AdaptiveReorderBuffer(ReorderSettings(min_s=0.05))
    buffer.push(0, 0, 0, 0.0)
    assert buffer.push(2, 2 * TS, 2, 0.04) == []
    assert buffer.push(3, 3 * TS, 3, 0.06) == []
    due = buffer.deadline()
    assert due is not None
    assert buffer.poll(due - 0.001) == []
    assert buffer.poll(due) == [2, 3] and buffer.skipped == 1
    assert buffer.push(1, TS, 1, due + 0.01) == [] and buffer.late == 1
    assert buffer.push(3, 3 * TS, 3, due + 0.02) == [] and buffer.late == 2
    assert buffer.push(4, 4 * TS, 4, due + 0.03) == [4]


def test_duplicates_wraparound_and_resync() -> None:
    buffer: AdaptiveReorderBuffer[int] = AdaptiveReorderBuffer(ReorderSettings(min_s=0.05))
    assert buffer.push(65534, 0, 1, 0.0) == [1]
    assert buffer.push(0, 2 * TS, 3, 0.04) == []  # 65535 missing across the wrap
    assert buffer.push(0, 2 * TS, 3, 0.041) == [] and buffer.duplicates == 1
    assert buffer.push(65535, TS, 2, 0.042) == [2, 3]
    assert buffer.push(1, 3 * TS, 4, 0.06) == [4]
    # a jump of thousands is a new stream: what was held goes out, then it starts over
    assert buffer.push(3, 5 * TS, 5, 0.10) == []
    assert buffer.push(30000, 7_000_000, 6, 0.12) == [5, 6] and buffer.resyncs == 1
    assert buffer.push(30001, 7_000_960, 7, 0.14) == [7]


def test_a_full_buffer_gives_up_on_its_oldest_gap() -> None:
    buffer: AdaptiveReorderBuffer[int] = AdaptiveReorderBuffer(
        ReorderSettings(min_s=0.5, max_s=0.5, capacity=3))
    buffer.push(0, 0, 0, 0.0)
    assert [buffer.push(k, k * TS, k, 0.01 * k) for k in (2, 3, 4)] == [[], [], []]
    assert buffer.push(5, 5 * TS, 5, 0.05) == [2, 3, 4, 5]
    assert buffer.overflows == 1 and buffer.skipped == 1 and buffer.held == 0


def test_under_heavy_jitter_almost_every_packet_is_used_and_the_wait_stays_bounded() -> None:
    # bench/network.py's jitter80: 90 +- 80 ms, each packet on its own (reordered)
    arrivals = jittered(1500, 0.09, 0.08, seed=24)
    buffer: AdaptiveReorderBuffer[int] = AdaptiveReorderBuffer()
    out = run(arrivals, buffer)
    seqs = [s for _, s in out]
    assert seqs == sorted(seqs)  # always in order
    assert len(seqs) >= 0.985 * 1500  # the immediate buffer used ~40 % of them (below)
    assert 0.10 <= buffer.target_s <= 0.12
    # what the immediate (drop-late) buffer would have used
    highest, used = -1, 0
    for _, seq in sorted(arrivals):
        if seq > highest:
            highest, used = seq, used + 1
    assert used < 0.6 * 1500
    # never held longer than the bound past its own arrival
    arrived = {s: at for at, s in arrivals}
    assert max(at - arrived[s] for at, s in out) <= 0.12 + 1e-9


def test_the_wait_grows_with_jitter_and_shrinks_back_when_the_network_calms() -> None:
    buffer: AdaptiveReorderBuffer[int] = AdaptiveReorderBuffer()
    calm = jittered(250, 0.04, 0.0, seed=1)  # 5 s, no jitter
    rough = jittered(250, 0.04, 0.03, seed=2, start=250, t0=5.0)  # 5 s of 40 +- 30 ms
    after = jittered(500, 0.04, 0.0, seed=3, start=500, t0=10.0)  # 10 s calm again
    run(calm, buffer)
    assert buffer.target_s < 0.001
    run(rough, buffer)
    assert 0.04 <= buffer.target_s <= 0.06  # ~the 95th percentile of a 60 ms spread
    first = after[:100]  # the first 2 s after: still remembered
    run(first, buffer)
    assert buffer.target_s > 0.01
    run(after[100:], buffer)
    assert buffer.target_s < 0.001
    assert buffer.late <= 1  # the one rough packet the first calm one overtook


def test_on_a_clean_network_a_loss_costs_almost_no_wait() -> None:
    arrivals = jittered(500, 0.02, 0.001, seed=5, loss=0.05)
    buffer: AdaptiveReorderBuffer[int] = AdaptiveReorderBuffer()
    out = run(arrivals, buffer)
    arrived = {s: at for at, s in arrivals}
    assert max(at - arrived[s] for at, s in out) <= 0.003
    assert buffer.skipped == 500 - len(arrivals) - (499 - max(arrived))


@pytest.mark.parametrize("kwargs", [{"min_s": 0.2, "max_s": 0.1}, {"max_s": 2.0},
                                    {"window_packets": 1}, {"capacity": 0},
                                    {"quantile": 0.0}, {"shrink_s_per_s": -1.0}])
def test_settings_are_checked(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ReorderSettings(**kwargs)  # type: ignore[arg-type]
