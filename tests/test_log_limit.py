from __future__ import annotations

from omnicall.media.log_limit import CLIP_CHARS, LogLimiter, clip, worth_logging


def test_clip_bounds_any_client_value() -> None:
    assert len(clip("x" * 100_000)) <= 2 * CLIP_CHARS + 3
    assert len(clip(["a" * 10_000] * 10_000)) <= 2 * CLIP_CHARS + 3
    nested: list[object] = []
    for _ in range(500):
        nested = [nested]
    assert len(clip(nested)) < 40
    assert clip("ping") == "'ping'"


def test_log_limiter_allows_a_few_per_window_then_counts() -> None:
    limiter = LogLimiter(per_window=3, window_s=60)
    allowed = [limiter.allow("unknown", t * 0.1) for t in range(10)]
    assert allowed == [True] * 3 + [False] * 7
    assert limiter.suppressed == 7
    assert limiter.allow("malformed", 1.0)  # another kind has its own budget
    assert limiter.allow("unknown", 61.0)  # a new window
    for i in range(1000):  # a client inventing kinds cannot grow the table
        limiter.allow(f"k{i}", 2.0)
    assert len(limiter._windows) <= 64


def test_worth_logging_first_few_then_rarely() -> None:
    logged = [n for n in range(1, 5001) if worth_logging(n)]
    assert logged == [1, 2, 3, 1000, 2000, 3000, 4000, 5000]
