"""The application's state: the live-call registry, and every key set by create_app."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from omnicall.app import app_state
from omnicall.app.app_state import WORKER_KEY
from omnicall.app.calls import LiveCalls
from omnicall.app.config import ServerConfig
from omnicall.app.http.server import create_app


class Call:
    def __init__(self, session_id: str) -> None:
        self.id = session_id


def test_live_calls_count_what_is_open_and_what_ever_opened() -> None:
    calls = LiveCalls(max_sessions=2)
    a, b = Call("a"), Call("b")
    calls.add(a)  # type: ignore[arg-type]
    calls.add(b)  # type: ignore[arg-type]
    assert len(calls) == 2 and calls.sessions["a"] is a
    calls.remove(a)  # type: ignore[arg-type]
    calls.remove(a)  # type: ignore[arg-type]  # twice: no error
    assert len(calls) == 1 and calls.total_opened == 2 and calls.max_sessions == 2


def keys() -> dict[str, web.AppKey[Any]]:
    return {name: value for name, value in vars(app_state).items()
            if isinstance(value, web.AppKey)}


def test_keys_have_distinct_names() -> None:
    names = [str(key) for key in keys().values()]
    assert len(names) == len(set(names)) == 15


def test_create_app_sets_every_key_but_the_worker_group() -> None:
    app = create_app(ServerConfig(engine="loopback"))
    missing = [name for name, key in keys().items() if key not in app]
    assert missing == ["WORKER_KEY"] and WORKER_KEY not in app
