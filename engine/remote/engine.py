"""``--engine remote``: calls are answered by model servers over the Realtime protocol.

The front-end keeps the calls (WebRTC, media plane, turn events for the page); the model
servers - vllm-omni, or ``omnicall serve-engine`` hosting omnicall's own engines - do the
model work. Several ``--engine-url`` s form a pool (:mod:`omnicall.engine.remote.pool`).
"""

from __future__ import annotations

import logging

import aiohttp

from omnicall.engine.base import Engine, EngineSession, SessionOptions
from omnicall.engine.conversation.listener import ListenRuntime
from omnicall.engine.remote.pool import EnginePool
from omnicall.engine.remote.runtime import RemoteRuntime
from omnicall.engine.remote.session import RemoteSession
from omnicall.engine.remote.settings import RemoteSettings
from omnicall.media.clock import Clock, MonotonicClock

__all__ = ["RemoteEngine", "RemoteSettings"]  # the settings live in engine.remote.settings

logger = logging.getLogger(__name__)


class RemoteEngine(Engine):
    name = "remote"

    def __init__(self, settings: RemoteSettings | None = None, clock: Clock | None = None
                 ) -> None:
        self.settings = settings or RemoteSettings()
        self.clock = clock or MonotonicClock()
        self.pool = EnginePool(list(self.settings.engine_urls))
        #: local turn mode: the VAD, its worker and the end-of-turn model of the listeners
        #: (in server mode the model server's VAD rules: nothing loads)
        self.listening = ListenRuntime(self.settings.turns, self.clock,
                                       judge=self.settings.turn_mode == "local")
        self._runtime: RemoteRuntime | None = None

    @property
    def runtime(self) -> RemoteRuntime:
        """What each session gets (built when the engine starts)."""
        if self._runtime is None:
            raise RuntimeError("the remote engine was not started")
        return self._runtime

    async def start(self) -> None:
        self._runtime = RemoteRuntime(self.settings, self.clock, self.pool, self.listening,
                                      aiohttp.ClientSession())
        if self.settings.turn_mode == "local":
            await self.listening.worker.run(self.listening.load_vad)
            await self.listening.judge.worker.run(self.listening.judge.load)
        logger.info("remote engine: %d model server(s) %s, turns ended by the %s",
                    len(self.settings.engine_urls), ", ".join(self.settings.engine_urls),
                    "model server" if self.settings.turn_mode == "server" else "front-end")

    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        return RemoteSession(session_id, options, self.runtime)

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
        if self._runtime is not None:
            await self._runtime.http.close()
