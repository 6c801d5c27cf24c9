"""A loaded cascade engine shared by the cascade tests (models load in ~2 s), and a runtime
of stand-in models for the tests of the session's own logic (no model loads)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from omnicall.engine.base import SessionOptions
from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.history import Conversation
from omnicall.engine.cascade.language_model import ToolRequest
from omnicall.engine.cascade.runtime import CascadeRuntime, PartialTranscriber
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.cascade.tool_format import tool_prompt, tool_shots
from omnicall.engine.conversation.listener import ListenRuntime
from omnicall.engine.conversation.settings import TurnSettings
from omnicall.engine.degrade import Level
from omnicall.engine.events import EngineEvent, TurnEvent
from omnicall.engine.tools import ToolSpec
from omnicall.engine.worker import ModelWorker
from omnicall.media.clock import Clock


@contextmanager
def loaded_cascade(**settings: Any) -> Iterator[CascadeEngine]:
    """A cascade engine with its models loaded (synchronously: the same path start() runs
    on its worker, a speech server's startup check included), its workers closed after.
    The fixed hangover: these tests place pauses by the millisecond (the end-of-turn model,
    whose verdicts depend on how the synthetic speech sounds, has tests of its own)."""
    engine = CascadeEngine(CascadeSettings(turns=TurnSettings(turn_model="fixed"), **settings),
                           progress=None)
    try:
        engine._load()
        yield engine
    finally:
        for worker in engine.workers():
            worker.close()
        engine.listening.close()


@pytest.fixture(scope="session")
def cascade_engine() -> Iterator[CascadeEngine]:
    with loaded_cascade() as engine:
        yield engine


def assistant_ends(rec: Recorder) -> list[TurnEvent]:
    """The assistant's reply ends the recorder has seen, in order."""
    return [e for e in rec.of(TurnEvent) if e.role == "assistant" and e.phase == "end"]


class FakeLlm:
    """A language model that says ``reply`` (or asks for ``tool`` first), and notes prompts."""

    name = "fake"
    prompt_tools = True
    can_warm = False
    sees = False
    hears = False
    speaks = False

    def __init__(self, reply: str = "Hello there. How can I help?", can_prefill: bool = False,
                 tool: ToolRequest | None = None) -> None:
        self.reply = reply
        self.can_prefill = can_prefill
        self.tool = tool
        self.prefilled: list[list[dict[str, Any]]] = []
        self.prompts: list[list[dict[str, Any]]] = []
        self.warmed: list[list[dict[str, Any]]] = []
        self.cruised = 0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def tool_result_messages(self, request: ToolRequest, output: str) -> list[dict[str, Any]]:
        return [{"role": "system", "content": f"Facts for your answer: {output}"}]

    def prefill(self, messages: list[dict[str, Any]]) -> int:
        self.prefilled.append(messages)
        return 1

    def cruise(self) -> None:
        self.cruised += 1

    async def aclose(self) -> None:
        """Nothing held open."""

    async def warm(self, messages: list[dict[str, Any]]) -> bool:
        self.warmed.append(messages)
        return True

    def stream(self, messages: list[dict[str, Any]], cancel: threading.Event,
               max_tokens: int | None = None, tools: list[ToolSpec] | None = None,
               greedy: bool = False) -> Iterator[str | ToolRequest]:
        self.prompts.append(list(messages))
        if tools and self.tool is not None:
            yield self.tool
            return
        for word in self.reply.split(" "):
            if cancel.is_set():
                return
            yield word + " "


class FakeAsr:
    """A speech recognizer that hears ``text`` in any audio (in English)."""

    def __init__(self, text: str = "") -> None:
        self.text = text

    def transcribe(self, samples: Any) -> str:
        return self.text

    def transcribe_turn(self, samples: Any) -> tuple[str, str]:
        return self.text, "en"


def fake_runtime(clock: Clock, llm: FakeLlm | None = None,
                 settings: CascadeSettings | None = None,
                 asr: FakeAsr | None = None) -> CascadeRuntime:
    """A cascade runtime of real workers and stand-in models: no vision or voice (the
    replies are text only); close it with :func:`close_runtime`."""
    settings = settings or CascadeSettings(turns=TurnSettings(turn_model="fixed"))
    think = ModelWorker("think")
    asr = asr or FakeAsr()

    def new_conversation(tools: list[ToolSpec] | None) -> Conversation:
        return Conversation(tools=tool_prompt(tools) if tools else "",
                            shots=tool_shots(tools) if tools else [])

    return CascadeRuntime(
        settings=settings, clock=clock, listening=ListenRuntime(settings.turns, clock),
        think_worker=think, talk_worker=ModelWorker("talk"),
        asr=asr, partial=PartialTranscriber(think, asr),  # type: ignore[arg-type]
        llm=llm or FakeLlm(), vision=None,  # type: ignore[arg-type]
        voice=lambda: None, new_conversation=new_conversation, level=lambda: Level.NORMAL)


def close_runtime(runtime: CascadeRuntime) -> None:
    for worker in {id(w): w for w in (runtime.think_worker, runtime.talk_worker,
                                      runtime.partial.worker)}.values():
        worker.close()
    runtime.listening.close()


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

    async def wait(self, predicate: Any, timeout_s: float = 60) -> None:
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
