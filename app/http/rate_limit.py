"""Per-client token buckets for ``POST /offer`` (pure: the clock is passed in).

Each client key (the peer IP) gets ``burst`` offers at once and ``per_minute`` refill. The
table is bounded: beyond ``max_clients`` the least recently seen client is forgotten.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from aiohttp import web


@dataclass
class _Bucket:
    tokens: float
    at_s: float


class RateLimiter:
    def __init__(self, per_minute: float, burst: int, max_clients: int = 10_000) -> None:
        self.rate_per_s = per_minute / 60.0
        self.burst = burst
        self.max_clients = max_clients
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def allow(self, key: str, now_s: float) -> float:
        """0.0 when allowed (one token spent); otherwise seconds until the next token."""
        bucket = self._buckets.pop(key, None)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now_s)
        bucket.tokens = min(float(self.burst),
                            bucket.tokens + (now_s - bucket.at_s) * self.rate_per_s)
        bucket.at_s = now_s
        self._buckets[key] = bucket
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        if self.rate_per_s <= 0:
            return 60.0
        return (1.0 - bucket.tokens) / self.rate_per_s


#: the front end's limiters (app/http/server.py sets them, the offer route reads them)
LIMITER_KEY = web.AppKey("offer_limiter", RateLimiter)
AUTH_LIMITER_KEY = web.AppKey("auth_limiter", RateLimiter)
