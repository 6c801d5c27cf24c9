"""Call transcripts kept outside any one process, so a dropped call resumes anywhere.

Each call's conversation is a short list of ``(role, text)`` items under its session id.
A call that drops and comes back on another ``serve`` worker, or another machine, opens a new
engine session seeded with it. ``--store memory`` (default) keeps them in this process;
``--store redis://HOST:PORT/DB`` in Redis, shared by every worker and front-end that names
the same server. Items are bounded per call (the newest are kept) and expire ``ttl_s`` after
the call's last turn; a hangup deletes them.
"""

from __future__ import annotations

import abc
import json
import logging
import time
from collections import OrderedDict
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

MAX_ITEMS = 40
MAX_TEXT_CHARS = 2000
KEY_PREFIX = "omnicall:transcript:"

Item = tuple[str, str]


class StoreError(RuntimeError):
    """The store could not be reached; the call goes on without a shared transcript."""


class TranscriptStore(abc.ABC):
    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = max(1.0, ttl_s)

    @abc.abstractmethod
    async def append(self, call_id: str, role: str, text: str) -> None: ...

    @abc.abstractmethod
    async def load(self, call_id: str) -> list[Item]: ...

    @abc.abstractmethod
    async def delete(self, call_id: str) -> None: ...

    async def close(self) -> None:
        return None


class MemoryStore(TranscriptStore):
    """This process only (a resume on another worker starts a new conversation)."""

    def __init__(self, ttl_s: float, max_calls: int = 10_000) -> None:
        super().__init__(ttl_s)
        self.max_calls = max_calls
        self._calls: OrderedDict[str, tuple[float, list[Item]]] = OrderedDict()

    def _expire(self, now: float) -> None:
        while self._calls:
            key, (expires, _) = next(iter(self._calls.items()))
            if expires > now and len(self._calls) <= self.max_calls:
                break
            del self._calls[key]

    async def append(self, call_id: str, role: str, text: str) -> None:
        now = time.monotonic()
        _, items = self._calls.pop(call_id, (0.0, []))
        items = [*items, (role, text[:MAX_TEXT_CHARS])][-MAX_ITEMS:]
        self._calls[call_id] = (now + self.ttl_s, items)
        self._expire(now)

    async def load(self, call_id: str) -> list[Item]:
        self._expire(time.monotonic())
        entry = self._calls.get(call_id)
        return list(entry[1]) if entry else []

    async def delete(self, call_id: str) -> None:
        self._calls.pop(call_id, None)


class RedisStore(TranscriptStore):
    """A Redis list per call (RPUSH + LTRIM + EXPIRE in one transaction)."""

    def __init__(self, url: str, ttl_s: float, timeout_s: float = 1.0) -> None:
        super().__init__(ttl_s)
        self.url = redacted(url)  # what logs and errors name: never the password
        self._redis = aioredis.Redis.from_url(url, socket_timeout=timeout_s,
                                              socket_connect_timeout=timeout_s)

    async def append(self, call_id: str, role: str, text: str) -> None:
        key = KEY_PREFIX + call_id
        item = json.dumps([role, text[:MAX_TEXT_CHARS]])
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.rpush(key, item)
                pipe.ltrim(key, -MAX_ITEMS, -1)
                pipe.expire(key, int(self.ttl_s))
                await pipe.execute()
        except (RedisError, OSError) as exc:
            raise StoreError(f"redis {self.url}: {exc}") from exc

    async def load(self, call_id: str) -> list[Item]:
        try:
            raw = await self._redis.lrange(KEY_PREFIX + call_id, 0, -1)
        except (RedisError, OSError) as exc:
            raise StoreError(f"redis {self.url}: {exc}") from exc
        items: list[Item] = []
        for entry in raw:
            try:
                role, text = json.loads(entry)
            except (ValueError, TypeError):
                continue
            if isinstance(role, str) and isinstance(text, str):
                items.append((role, text))
        return items

    async def delete(self, call_id: str) -> None:
        try:
            await self._redis.delete(KEY_PREFIX + call_id)
        except (RedisError, OSError) as exc:
            raise StoreError(f"redis {self.url}: {exc}") from exc

    async def ping(self) -> None:
        try:
            await self._redis.ping()
        except (RedisError, OSError) as exc:
            raise StoreError(f"redis {self.url} cannot be reached: {exc}") from exc

    async def close(self) -> None:
        await self._redis.aclose()


def redacted(url: str) -> str:
    """``url`` with its password (``redis://:secret@host``, ``redis://user:secret@host``)
    replaced by ``***``, for logs and error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit(parts._replace(netloc=netloc))


def open_store(spec: str, ttl_s: float) -> TranscriptStore:
    if spec.startswith(("redis://", "rediss://")):
        return RedisStore(spec, ttl_s)
    return MemoryStore(ttl_s)
