import pytest

from omnicall.engine.scheduler import DispatchPolicy, Priority, QueueFull


def drain(policy: DispatchPolicy[str], now: float = 0.0) -> list[str]:
    out = []
    while (job := policy.pop(now)) is not None:
        out.append(job)
    return out


def test_priority_before_arrival_order() -> None:
    p: DispatchPolicy[str] = DispatchPolicy()
    p.push("vision-a", "a", Priority.BACKGROUND, 0)
    p.push("partial-b", "b", Priority.LISTEN, 0)
    p.push("reply-c", "c", Priority.REPLY, 0)
    assert drain(p) == ["reply-c", "partial-b", "vision-a"]


def test_sessions_take_turns_within_a_priority() -> None:
    p: DispatchPolicy[str] = DispatchPolicy()
    for i in range(3):
        p.push(f"a{i}", "a", Priority.REPLY, 0)
    p.push("b0", "b", Priority.REPLY, 0)
    p.push("c0", "c", Priority.REPLY, 0)
    assert drain(p) == ["a0", "b0", "c0", "a1", "a2"]


def test_aging_prevents_starvation() -> None:
    p: DispatchPolicy[str] = DispatchPolicy(max_wait_s=1.0)
    p.push("vision", "a", Priority.BACKGROUND, 0.0)
    for i in range(5):  # a stream of urgent work keeps arriving
        p.push(f"reply{i}", "b", Priority.REPLY, 0.5 + i * 0.1)
    assert p.pop(0.6) == "reply0"
    assert p.pop(1.2) == "vision"  # waited 1.2 s >= 1.0: runs before newer urgent jobs
    assert p.aged == 1
    assert drain(p, 1.2)[0] == "reply1"


def test_bounded_with_back_pressure_and_session_drop() -> None:
    p: DispatchPolicy[str] = DispatchPolicy(max_pending=3)
    p.push("a", "s1", Priority.REPLY, 0)
    p.push("b", "s1", Priority.LISTEN, 0)
    p.push("c", "s2", Priority.REPLY, 0)
    with pytest.raises(QueueFull):
        p.push("d", "s2", Priority.REPLY, 0)
    assert p.drop_session("s1") == ["a", "b"] and len(p) == 1
    p.push("d", "s2", Priority.REPLY, 0)
    assert drain(p) == ["c", "d"] and len(p) == 0
