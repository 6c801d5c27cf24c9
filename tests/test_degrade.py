from omnicall.engine.degrade import DegradeLadder, LadderConfig, Level, p95


def feed(ladder: DegradeLadder, values: list[float]) -> list[Level]:
    return [lvl for v in values if (lvl := ladder.observe(v)) is not None]


def test_escalates_by_p95_and_needs_enough_turns() -> None:
    ladder = DegradeLadder(LadderConfig(min_turns=5))
    assert feed(ladder, [0.35] * 4) == []  # not enough turns yet
    assert feed(ladder, [0.35]) == [Level.TEXT_FIRST]
    assert feed(ladder, [0.2, 0.2, 0.2, 0.2, 0.9]) == [Level.FALLBACK]  # P95 is the 0.9


def test_recovers_one_level_at_a_time_with_hysteresis() -> None:
    ladder = DegradeLadder(LadderConfig(min_turns=5))
    feed(ladder, [0.8] * 5)
    assert ladder.level == Level.FALLBACK
    assert feed(ladder, [0.45] * 10) == []  # below 0.5 but not below 0.8 x 0.5: stay
    # recovery waits until the slow turns have rolled out of the 20-turn window
    assert feed(ladder, [0.3] * 20) == [Level.TEXT_FIRST]
    assert feed(ladder, [0.25] * 5) == []  # not below 0.8 x 0.3
    assert feed(ladder, [0.2] * 20) == [Level.NORMAL]
    assert ladder.transitions == 3


def test_no_flapping_around_a_threshold() -> None:
    ladder = DegradeLadder(LadderConfig(min_turns=5))
    changes = feed(ladder, [0.29, 0.31] * 20)
    assert changes == [Level.TEXT_FIRST]  # escalates once, never recovers at ~0.3


def test_p95() -> None:
    assert p95([0.1] * 18 + [1.0] * 2) == 1.0
    assert p95([0.1] * 19 + [1.0]) == 0.1  # one slow turn in 20 is not the P95
    assert p95(list(range(100))) == 94
