"""The transcript store's URL as logs and errors name it, and a real redis-server that asks
for a password (as compose.yaml runs it with REDIS_PASSWORD); the resume path through Redis
is tested in tests/test_remote_engine.py."""

import socket
from pathlib import Path

import pytest

from omnicall.app.storage.store import RedisStore, StoreError, open_store, redacted
from tests.utils import redis_server


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://:s3cret@10.0.0.5:6379/0", "redis://:***@10.0.0.5:6379/0"),
    ("redis://omnicall:s3cret@redis/1", "redis://omnicall:***@redis/1"),
    ("rediss://:p%40ss@[::1]:6380/0", "rediss://:***@[::1]:6380/0"),
    ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
])
def test_the_password_never_shows(url: str, shown: str) -> None:
    assert redacted(url) == shown


async def test_an_unreachable_server_is_named_without_its_password() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = RedisStore(f"redis://:s3cret@127.0.0.1:{port}/0", ttl_s=60, timeout_s=0.5)
    try:
        with pytest.raises(StoreError) as caught:
            await store.ping()
    finally:
        await store.close()
    assert "s3cret" not in str(caught.value)
    assert "redis://:***@127.0.0.1" in str(caught.value)


async def test_a_password_protected_redis_takes_the_password_in_the_url(tmp_path: Path) -> None:
    with redis_server(tmp_path, password="k7-Pq_2x") as url:
        assert url.startswith("redis://:k7-Pq_2x@127.0.0.1:")
        store = open_store(url, ttl_s=60)  # what --store / OMNICALL_STORE builds
        try:
            await store.append("call-1", "user", "hello")
            assert await store.load("call-1") == [("user", "hello")]
            await store.delete("call-1")
            assert await store.load("call-1") == []
        finally:
            await store.close()
        for wrong in (url.replace("k7-Pq_2x", "nope-nope"), url.replace(":k7-Pq_2x@", "")):
            store = RedisStore(wrong, ttl_s=60)
            try:
                with pytest.raises(StoreError) as caught:
                    await store.append("call-1", "user", "hello")
            finally:
                await store.close()
            assert "nope-nope" not in str(caught.value)  # a wrong password is not shown either
