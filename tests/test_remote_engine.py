"""The remote engine against real ``omnicall serve-engine`` processes over real sockets."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from app.config import ServerConfig
from app.server import REGISTRY_KEY
from tests.utils import (
    ServerProcess,
    SignalTrack,
    connect_client,
    running_server,
    start_process,
    tone,
    wait_for,
)


@pytest.fixture
async def echo_engines() -> Any:
    servers = [await start_process("serve-engine", "--engine", "echo") for _ in range(2)]
    yield servers
    for server in servers:
        await server.stop()


def remote_config(*servers: ServerProcess, **settings: Any) -> ServerConfig:
    return ServerConfig(engine="remote", ice_loopback=True,
                        engine_url=",".join(s.ws_url for s in servers), **settings)


async def test_a_call_through_a_model_server_hears_its_echo(
        echo_engines: list[ServerProcess]) -> None:
    async with running_server(remote_config(echo_engines[0])) as (url, app):
        call = await connect_client(url, SignalTrack(tone(440, 4, rate=48_000)))
        await wait_for(lambda: len(call.received) > 100, timeout_s=15)
        await asyncio.sleep(1.5)
        audio = call.received_audio()
        await call.close()
        await wait_for(lambda: len(app[REGISTRY_KEY]) == 0, timeout_s=10)
    loud = np.abs(audio.astype(np.int32)) > 3000
    assert loud.sum() > 48_000 * 0.5, loud.sum()
    spectrum = np.abs(np.fft.rfft(audio[-48_000:].astype(np.float64)))
    assert abs(np.argmax(spectrum) - 440) < 10
