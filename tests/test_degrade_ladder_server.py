"""The degrade ladder over a real call: an engine slowed on purpose pushes the server to the
fallback level, the page is told, metrics count it, and it recovers when the engine is fast."""

from __future__ import annotations

import asyncio

import aiohttp

from omnicall.app.config import ServerConfig
from omnicall.client import Microphone, connect
from omnicall.engine.base import EngineSession, SessionOptions
from omnicall.engine.degrade import Level
from omnicall.engine.events import AssistantText, StageTiming, TurnEvent
from omnicall.engine.loopback import LoopbackEngine, LoopbackSession
from tests.utils import running_server, tone, wait_for


class SlowThinkingSession(LoopbackSession):
    """Echo, plus a short assistant turn every few units whose first token takes
    ``engine.delay_s`` after the end of the user's turn."""

    engine: SlowThinkingEngine

    async def process(self) -> None:
        units = 0
        while True:
            await self.state.inputs.get()
            units += 1
            if units % 3:
                continue
            self.state.turn_id += 1
            turn = self.state.turn_id
            start = asyncio.get_running_loop().time()
            await self.emit(StageTiming(turn, "end_of_turn", start))
            await asyncio.sleep(self.engine.delay_s)
            await self.emit(StageTiming(turn, "llm_first_token", start + self.engine.delay_s))
            await self.emit(AssistantText("ok", turn))
            await self.emit(TurnEvent("assistant", "end", turn))


class SlowThinkingEngine(LoopbackEngine):
    def __init__(self) -> None:
        super().__init__()
        self.delay_s = 0.6

    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        session = SlowThinkingSession(session_id, options, self._worker)
        session.engine = self
        return session


async def test_slow_engine_degrades_then_recovers() -> None:
    engine = SlowThinkingEngine()
    config = ServerConfig(engine="loopback", ice_loopback=True, degrade_window_turns=5)
    async with running_server(config, engine=engine) as (url, _), \
            aiohttp.ClientSession() as http:
        call = await connect(url, Microphone(tone(300, 60, rate=48_000)))
        await wait_for(lambda: engine.level == Level.FALLBACK, timeout_s=30)
        await wait_for(lambda: any(m.get("type") == "degrade" and m["level"] == "fallback"
                                   for m in call.messages), timeout_s=5)
        async with http.get(url + "metrics") as resp:
            text = await resp.text()
        assert 'omnicall_degrade_transitions_total{to="fallback"} 1.0' in text
        assert "omnicall_degrade_level 2.0" in text
        engine.delay_s = 0.02  # load falls
        await wait_for(lambda: engine.level == Level.NORMAL, timeout_s=30)
        # the server moved; the page hears of it over the data channel a moment later
        await wait_for(lambda: [m["level"] for m in call.messages
                                if m.get("type") == "degrade"][-1:] == ["normal"], timeout_s=5)
        kinds = [m["level"] for m in call.messages if m.get("type") == "degrade"]
        assert kinds == ["fallback", "text_first", "normal"]
        await call.close()
