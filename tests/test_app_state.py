"""The application's state: every key set by create_app (app_state's, and the front end's
own rate-limiter keys)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from omnicall.app import app_state
from omnicall.app.app_state import WORKER_KEY
from omnicall.app.config import ServerConfig
from omnicall.app.http import rate_limit
from omnicall.app.http.server import create_app


def keys() -> dict[str, web.AppKey[Any]]:
    return {name: value for module in (app_state, rate_limit)
            for name, value in vars(module).items() if isinstance(value, web.AppKey)}


def test_keys_have_distinct_names() -> None:
    names = [str(key) for key in keys().values()]
    assert len(names) == len(set(names)) == 17


def test_create_app_sets_every_key_but_the_worker_group() -> None:
    app = create_app(ServerConfig(engine="loopback"))
    missing = [name for name, key in keys().items() if key not in app]
    assert missing == ["WORKER_KEY"] and WORKER_KEY not in app
