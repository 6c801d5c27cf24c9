"""A loaded cascade engine shared by the cascade tests (models load in ~2 s)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest

from omnicall.engine.base import EngineEvent, SessionOptions
from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.settings import CascadeSettings


@pytest.fixture(scope="session")
def cascade_engine() -> Iterator[CascadeEngine]:
    # the fixed hangover: these tests place pauses by the millisecond (the end-of-turn model,
    # whose verdicts depend on how the synthetic speech sounds, has tests of its own)
    engine = CascadeEngine(CascadeSettings(turn_model="fixed"), progress=None)
    engine._load()  # synchronous: the same path start() runs on its worker
    yield engine
    for worker in engine.workers():
        worker.close()
    engine.listening.close()


class Recorder:
    """Collects a session's events in the background."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.events: list[EngineEvent] = []
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        async for event in self.session.events():
            self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    async def wait(self, predicate: Any, timeout_s: float = 20) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not predicate(self):
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out; events: {self.summary()}")
            await asyncio.sleep(0.02)

    def summary(self) -> list[str]:
        return [type(e).__name__ + ("" if not hasattr(e, "stage") else f":{e.stage}")
                for e in self.events if type(e).__name__ != "AssistantAudio"]

    async def close(self) -> None:
        await self.session.close()
        await asyncio.wait_for(self._task, 5)


def open_session(engine: CascadeEngine) -> tuple[Any, Recorder]:
    session = engine.open_session("test", SessionOptions())
    return session, Recorder(session)


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def wer(reference: str, hypothesis: str) -> float:
    return edit_distance(words(reference), words(hypothesis)) / max(1, len(words(reference)))


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Word-level Levenshtein distance (substitutions, insertions, deletions)."""
    d = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, d[0] = d[0], i
        for j, h in enumerate(hyp, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r != h))
    return d[len(hyp)]
