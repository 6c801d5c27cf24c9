"""The cascade's shared runtime (engine/cascade/runtime.py) and its workers' lifecycle: each
worker is closed once, and a closed session is dropped once from each worker it used."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.runtime import PartialTranscriber
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.conversation.settings import TurnSettings
from omnicall.engine.worker import ModelWorker
from omnicall.media.clock import ManualClock
from tests.cascade_fixtures import close_runtime, fake_runtime


def count_calls(monkeypatch: pytest.MonkeyPatch, workers: list[ModelWorker],
                method: str) -> Counter[str]:
    calls: Counter[str] = Counter()
    for worker in workers:
        real = getattr(worker, method)

        def counted(*args: object, _name: str = worker.name, _real: object = real) -> object:
            calls[_name] += 1
            return _real(*args)  # type: ignore[operator]

        monkeypatch.setattr(worker, method, counted)
    return calls


def test_a_session_is_dropped_once_from_each_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = fake_runtime(ManualClock())
    try:
        own_partial = ModelWorker("partial")
        workers = [runtime.think_worker, runtime.talk_worker, own_partial,
                   runtime.listening.worker, runtime.listening.judge.worker]
        drops = count_calls(monkeypatch, workers, "drop_session")
        runtime.drop_session("a")  # partials share the think worker
        assert drops == {"think": 1, "talk": 1, "listen": 1, "turn": 1}
        with_own = replace(runtime, partial=PartialTranscriber(own_partial, runtime.asr))
        with_own.drop_session("b")
        assert drops == {"think": 2, "talk": 2, "listen": 2, "turn": 2, "partial": 1}
        own_partial.close()
    finally:
        close_runtime(runtime)


async def test_the_engine_closes_each_worker_once(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = CascadeEngine(CascadeSettings(turns=TurnSettings(turn_model="fixed")), progress=None)
    workers = [engine.think_worker, engine.talk_worker, engine.partial_worker,
               engine.eyes_worker, engine.watch_worker, engine.listening.worker,
               engine.listening.judge.worker]
    closes = count_calls(monkeypatch, workers, "close")
    assert set(engine.queue_depths()) == {"listen", "think", "talk", "partial", "eyes", "watch"}
    await engine.close()
    assert closes == {"listen": 1, "think": 1, "talk": 1, "partial": 1, "eyes": 1, "watch": 1,
                      "turn": 1}


def test_sessions_need_the_models_loaded() -> None:
    engine = CascadeEngine(CascadeSettings(turns=TurnSettings(turn_model="fixed")), progress=None)
    try:
        with pytest.raises(RuntimeError, match="not loaded"):
            engine.runtime  # noqa: B018
    finally:
        for worker in engine.workers():
            worker.close()
        engine.listening.close()


def test_sessions_reach_the_engine_only_through_the_runtime() -> None:
    """No module a session is made of imports the engine (not even for type checking)."""
    import ast
    from pathlib import Path

    cascade = Path(__file__).resolve().parent.parent / "engine" / "cascade"
    for name in ("session", "answer", "talker", "reply", "runtime", "language_model"):
        tree = ast.parse((cascade / f"{name}.py").read_text())
        imported = {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module}
        assert "omnicall.engine.cascade.engine" not in imported, name
