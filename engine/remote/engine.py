"""``--engine remote``: calls are answered by model servers over the Realtime protocol.

The front-end keeps the calls (WebRTC, media plane, turn events for the page); the model
servers - vllm-omni, or ``omnicall serve-engine`` hosting omnicall's own engines - do the
model work. Several ``--engine-url`` s form a pool (:mod:`omnicall.engine.remote.pool`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import aiohttp

from omnicall.engine.base import Engine, EngineSession, SessionOptions
from omnicall.engine.conversation.listener import ListenRuntime
from omnicall.engine.conversation.settings import TurnSettings
from omnicall.engine.remote.pool import EnginePool
from omnicall.engine.remote.session import RemoteSession
from omnicall.media.clock import Clock, MonotonicClock

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RemoteSettings(TurnSettings):
    """The turn settings apply to ``turn_mode="local"`` (in "server" mode the model
    server's VAD ends turns)."""

    urls: tuple[str, ...] = ()
    model: str = ""
    key: str = ""
    turn_mode: str = "server"  # "server": the model server's VAD; "local": ours
    video: bool = True
    max_calls: int = 64


class RemoteEngine(Engine):
    name = "remote"

    def __init__(self, settings: RemoteSettings | None = None, clock: Clock | None = None
                 ) -> None:
        self.settings = settings or RemoteSettings()
        self.clock = clock or MonotonicClock()
        self.pool = EnginePool(list(self.settings.urls))
        #: local turn mode: the VAD, its worker and the end-of-turn model of the listeners
        #: (in server mode the model server's VAD rules: nothing loads)
        self.listening = ListenRuntime(self.settings, self.clock,
                                       judge=self.settings.turn_mode == "local")
        self._http: aiohttp.ClientSession | None = None

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._http is None:
            raise RuntimeError("the remote engine was not started")
        return self._http

    async def start(self) -> None:
        self._http = aiohttp.ClientSession()
        if self.settings.turn_mode == "local":
            await self.listening.worker.run(self.listening.load_vad)
            await self.listening.judge.worker.run(self.listening.judge.load)
        logger.info("remote engine: %d model server(s) %s, turns ended by the %s",
                    len(self.settings.urls), ", ".join(self.settings.urls),
                    "model server" if self.settings.turn_mode == "server" else "front-end")

    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        return RemoteSession(session_id, options, self)

    def admission_problem(self, active_sessions: int) -> str | None:
        if active_sessions >= self.settings.max_calls:
            return "the model servers are at capacity"
        now = self.clock.now()
        if all(s.down_until_s > now for s in self.pool.servers.values()):
            return "no model server is reachable right now"
        return None

    def queue_depths(self) -> dict[str, int]:
        return {"listen": self.listening.worker.pending}

    async def close(self) -> None:
        self.listening.close()
        if self._http is not None:
            await self._http.close()
