"""A finished turn: counted, and slow answers move the degrade ladder, which every live call
and the engine hear of."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from omnicall.app.app_state import CALLS_KEY, ENGINE_KEY, LADDER_KEY, METRICS_KEY
from omnicall.app.calls import LiveCalls
from omnicall.app.metrics import Metrics
from omnicall.app.turns.turn_outcome import on_turn
from omnicall.engine.degrade import DegradeLadder, LadderConfig, Level
from omnicall.engine.loopback import LoopbackEngine

IDLE = {"sessions": 0, "max_sessions": 4, "parked": 0, "degrade_level": 0, "tasks": 0,
        "buffers": {}, "workers": {}}


class Call:
    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.sent: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> bool:
        self.sent.append(message)
        return True


def app_with_calls(*calls: Call) -> web.Application:
    app = web.Application()
    app[METRICS_KEY] = Metrics(lambda: IDLE)
    app[LADDER_KEY] = DegradeLadder(LadderConfig(text_first_p95_s=0.3, fallback_p95_s=0.5,
                                                 window_turns=3, min_turns=3))
    app[ENGINE_KEY] = LoopbackEngine()
    app[CALLS_KEY] = LiveCalls(4)
    for call in calls:
        app[CALLS_KEY].add(call)  # type: ignore[arg-type]
    return app


def counted(app: web.Application, outcome: str) -> float:
    text = app[METRICS_KEY].exposition().decode()
    line = f'omnicall_turns_total{{result="{outcome}"}} '
    return float(next(row for row in text.splitlines() if row.startswith(line)).split()[-1])


def test_turns_are_counted_by_outcome() -> None:
    app = app_with_calls()
    on_turn(app, {}, False)
    on_turn(app, {"end_of_turn": 1.0}, True)
    assert counted(app, "answered") == 1 and counted(app, "interrupted") == 1
    assert app[LADDER_KEY].level == Level.NORMAL


def test_slow_answers_degrade_and_every_call_is_told() -> None:
    calls = Call("a"), Call("b")
    app = app_with_calls(*calls)
    for _ in range(3):
        on_turn(app, {"end_of_turn": 10.0, "llm_first_token": 10.9}, False)
    assert app[LADDER_KEY].level == Level.FALLBACK
    assert app[ENGINE_KEY].level == Level.FALLBACK
    assert all(c.sent == [{"type": "degrade", "level": "fallback"}] for c in calls)
