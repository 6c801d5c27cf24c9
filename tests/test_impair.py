"""The impairment core on made-up times: seeded, so every verdict here is fixed."""

import pytest

from bench.impair import BurstLoss, Deliver, Drop, Impairment, ImpairmentCore


def verdicts(core: ImpairmentCore, n: int, every_s: float = 0.02, size: int = 100,
             start_s: float = 0.0) -> list[Deliver | Drop]:
    return [core.decide(size, start_s + i * every_s) for i in range(n)]


def test_a_perfect_link_delivers_everything_at_once() -> None:
    core = ImpairmentCore(Impairment())
    assert verdicts(core, 5) == [Deliver(i * 0.02) for i in range(5)]


def test_random_loss_is_seeded_and_near_its_rate() -> None:
    a = verdicts(ImpairmentCore(Impairment(loss=0.05), seed=7, name="up"), 10_000)
    b = verdicts(ImpairmentCore(Impairment(loss=0.05), seed=7, name="up"), 10_000)
    c = verdicts(ImpairmentCore(Impairment(loss=0.05), seed=8, name="up"), 10_000)
    assert a == b and a != c
    lost = sum(isinstance(v, Drop) for v in a)
    assert 420 < lost < 580


def test_bursty_loss_has_its_mean_rate_in_runs() -> None:
    burst = BurstLoss.with_mean(0.05, mean_burst=4)
    assert burst.mean_loss == pytest.approx(0.05)
    core = ImpairmentCore(Impairment(burst=burst), seed=1)
    lost = [isinstance(v, Drop) for v in verdicts(core, 20_000)]
    assert 0.04 < sum(lost) / len(lost) < 0.06
    runs, run = [], 0
    for dropped in lost:
        if dropped:
            run += 1
        elif run:
            runs.append(run)
            run = 0
    assert 3.0 < sum(runs) / len(runs) < 5.0  # random 5 % loss would give ~1.05


def test_an_outage_drops_everything_in_its_span_only() -> None:
    core = ImpairmentCore(Impairment(outages=((1.0, 0.5),)))
    core.add_outage(3.0, 0.1)
    times = [0.99, 1.0, 1.49, 1.5, 3.05, 3.1]
    got = [core.decide(50, t) for t in times]
    assert got == [Deliver(0.99), Drop("outage"), Drop("outage"), Deliver(1.5),
                   Drop("outage"), Deliver(3.1)]
    assert core.counts["outage"] == 3 and core.loss_fraction == 0.5


def test_delay_and_jitter_stay_in_range_and_reorder() -> None:
    core = ImpairmentCore(Impairment(delay_s=0.05, jitter_s=0.03), seed=3)
    out = verdicts(core, 1000)
    delays = [v.at_s - i * 0.02 for i, v in enumerate(out) if isinstance(v, Deliver)]
    assert len(delays) == 1000
    assert min(delays) >= 0.02 - 1e-9 and max(delays) <= 0.08 + 1e-9
    arrivals = [v.at_s for v in out if isinstance(v, Deliver)]
    assert arrivals != sorted(arrivals)  # 60 ms of spread over 20 ms spacing reorders


def test_keep_order_holds_jittered_packets_in_sequence() -> None:
    core = ImpairmentCore(Impairment(delay_s=0.05, jitter_s=0.03, keep_order=True), seed=3)
    arrivals = [v.at_s for v in verdicts(core, 500) if isinstance(v, Deliver)]
    assert arrivals == sorted(arrivals)


def test_reorder_lets_a_packet_overtake() -> None:
    core = ImpairmentCore(Impairment(delay_s=0.1, reorder=0.2), seed=5)
    out = verdicts(core, 200)
    fast = [v for i, v in enumerate(out) if isinstance(v, Deliver) and v.at_s == i * 0.02]
    assert 20 < len(fast) < 60 and core.counts["reordered"] == len(fast)


def test_a_bandwidth_cap_serializes_and_tail_drops_past_its_queue() -> None:
    # 80 kbps = 10 kB/s: a 1000-byte datagram takes 100 ms; the queue holds 3000 bytes
    core = ImpairmentCore(Impairment(rate_bps=80_000, queue_bytes=3000))
    got = [core.decide(1000, 0.0) for _ in range(5)]
    assert got[:3] == [Deliver(pytest.approx(0.1)), Deliver(pytest.approx(0.2)),
                       Deliver(pytest.approx(0.3))]
    assert got[3:] == [Drop("queue"), Drop("queue")]
    assert core.decide(1000, 0.25) == Deliver(pytest.approx(0.4))  # the queue drained
    assert core.decide(1000, 1.0) == Deliver(pytest.approx(1.1))  # an idle link


def test_under_the_cap_a_stream_passes_without_queueing() -> None:
    core = ImpairmentCore(Impairment(rate_bps=300_000))
    out = verdicts(core, 100, every_s=0.02, size=200)  # 80 kbps
    assert all(isinstance(v, Deliver) and v.at_s - i * 0.02 < 0.006
               for i, v in enumerate(out))


def test_the_same_seed_in_another_direction_draws_other_numbers() -> None:
    up = verdicts(ImpairmentCore(Impairment(loss=0.2), seed=1, name="up"), 200)
    down = verdicts(ImpairmentCore(Impairment(loss=0.2), seed=1, name="down"), 200)
    assert up != down


@pytest.mark.parametrize("bad", [dict(loss=1.5), dict(delay_s=-1), dict(rate_bps=0),
                                 dict(queue_bytes=0), dict(outages=((0.0, -1.0),))])
def test_nonsense_settings_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        Impairment(**bad)
    with pytest.raises(ValueError):
        BurstLoss.with_mean(0.0)
