"""Per-client offer token buckets (pure, fed a clock value)."""

from __future__ import annotations

from omnicall.app.http.rate_limit import RateLimiter


def test_burst_then_refill() -> None:
    limiter = RateLimiter(per_minute=6, burst=3)
    assert [limiter.allow("a", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = limiter.allow("a", 0.0)
    assert 9.9 < wait <= 10.0  # 6 per minute: one every 10 s
    assert limiter.allow("b", 0.0) == 0.0  # other clients are not affected
    assert limiter.allow("a", 10.0) == 0.0
    assert limiter.allow("a", 10.0) > 0


def test_table_is_bounded() -> None:
    limiter = RateLimiter(per_minute=60, burst=1, max_clients=100)
    for i in range(1000):
        limiter.allow(f"10.0.{i // 256}.{i % 256}", float(i))
    assert len(limiter) == 100


def test_zero_rate_never_refills() -> None:
    limiter = RateLimiter(per_minute=0, burst=1)
    assert limiter.allow("a", 0.0) == 0.0
    assert limiter.allow("a", 1e6) == 60.0
