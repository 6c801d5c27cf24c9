"""The transcript store's URL as logs and errors name it (the Redis calls themselves are
tested against a real redis-server in tests/test_remote_engine.py)."""

import socket

import pytest

from omnicall.app.store import RedisStore, StoreError, redacted


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
