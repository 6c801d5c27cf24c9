"""The answer path (engine/cascade/answer.py) on stand-in models: what goes out, in which
order, and what the conversation memory keeps."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from omnicall.engine.cascade.answer import Answerer
from omnicall.engine.cascade.clauses import ClauseSplitter
from omnicall.engine.cascade.language_model import ToolRequest
from omnicall.engine.cascade.reply import CascadeReply, ReplyWork
from omnicall.engine.cascade.runtime import CascadeRuntime
from omnicall.engine.events import (
    AssistantText,
    EngineError,
    EngineEvent,
    ToolCall,
    TurnEvent,
    UserTranscript,
)
from omnicall.engine.tasks import TaskOwner
from omnicall.engine.tools import Toolbox, make_tool
from omnicall.media.clock import ManualClock
from tests.cascade_fixtures import FakeAsr, FakeLlm, close_runtime, fake_runtime


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


class Call:
    """An answerer of one call and the events it sent."""

    def __init__(self, runtime: CascadeRuntime, tools: Toolbox | None = None) -> None:
        self.runtime = runtime
        self.events: list[EngineEvent] = []
        self.tasks = TaskOwner("answer-test")
        self.answerer = Answerer(runtime, "call", self.tasks, self, tools, ClauseSplitter)

    async def emit(self, event: EngineEvent) -> None:
        self.events.append(event)

    def put_now(self, event: EngineEvent) -> None:
        self.events.append(event)

    def flush_events(self) -> int:
        return 0

    def reply(self, turn_id: int = 1, committed: bool = True, samples_s: float = 0.0,
              typed: str = "") -> CascadeReply:
        work = ReplyWork(samples=np.zeros(int(samples_s * 16_000), np.int16), typed=typed)
        return self.answerer.replies.new(turn_id, work, committed)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


@pytest.fixture
def runtime(clock: ManualClock) -> Iterator[CascadeRuntime]:
    runtime = fake_runtime(clock, FakeLlm("Paris is the capital of France."),
                           asr=FakeAsr("What is the capital of France?"))
    yield runtime
    close_runtime(runtime)


async def test_a_turn_is_transcribed_answered_and_remembered(runtime: CascadeRuntime) -> None:
    call = Call(runtime)
    reply = call.reply(samples_s=1.0, typed="Quickly, please.")
    await call.answerer.answer(reply)
    heard = "What is the capital of France? Quickly, please."
    assert call.of(UserTranscript) == [UserTranscript(heard, final=True, turn_id=1)]
    assert "".join(e.delta for e in call.of(AssistantText)).strip() == \
        "Paris is the capital of France."
    assert [(e.phase, e.interrupted) for e in call.of(TurnEvent)] == [("start", False),
                                                                      ("end", False)]
    assert call.answerer.conversation.pairs() == [("user", heard),
                                                ("assistant", "Paris is the capital of France.")]
    assert reply.done and call.answerer.last_reply[0] == reply.text
    await call.tasks.close()


async def test_the_assistant_s_own_words_coming_back_are_not_answered(
        runtime: CascadeRuntime) -> None:
    call = Call(runtime)
    call.answerer.last_reply = ("What is the capital of France?", runtime.clock.now())
    reply = call.reply(samples_s=1.0)
    await call.answerer.answer(reply)
    assert call.answerer.echoes_ignored == 1 and reply.done and not call.events
    await call.tasks.close()


async def test_a_tool_s_result_goes_into_the_second_pass(clock: ManualClock) -> None:
    def local_time() -> str:
        return "It is 10:42"

    local_time.__doc__ = "The current local time."
    llm = FakeLlm("It is 10:42 now.", tool=ToolRequest("local_time", {}))
    runtime = fake_runtime(clock, llm)
    try:
        call = Call(runtime, Toolbox([make_tool(local_time)]))
        assert "local_time" in call.answerer.conversation.tools  # the prompt lists it
        await call.answerer.answer(call.reply(typed="Time?"))
        assert [(c.name, c.output, c.error) for c in call.of(ToolCall)] == [
            ("local_time", "It is 10:42", "")]
        assert llm.prompts[-1][-1] == {"role": "system",
                                       "content": "Facts for your answer: It is 10:42"}
        assert "".join(e.delta for e in call.of(AssistantText)).strip() == "It is 10:42 now."
        await call.tasks.close()
    finally:
        close_runtime(runtime)


async def test_a_failing_model_is_reported_and_the_reply_ends(clock: ManualClock) -> None:
    class BrokenLlm(FakeLlm):
        def stream(self, *args: Any, **kwargs: Any) -> Any:
            raise TypeError("llama decode failed")

    runtime = fake_runtime(clock, BrokenLlm())
    try:
        call = Call(runtime)
        reply = call.reply(typed="Hello?")
        await call.answerer.answer(reply)
        assert "failed to answer" in call.of(EngineError)[0].message
        end = call.of(TurnEvent)[-1]
        assert (end.phase, end.interrupted) == ("end", True) and reply.done
        assert not call.answerer.conversation.turns  # nothing of a failed turn is kept
        await call.tasks.close()
    finally:
        close_runtime(runtime)


async def test_the_greeting_is_said_and_remembered(runtime: CascadeRuntime) -> None:
    call = Call(runtime)
    reply = call.reply()
    reply.text = "Hello! I am Ada."
    await asyncio.wait_for(call.answerer.say(reply), 5)
    assert [e.delta for e in call.of(AssistantText)] == ["Hello! I am Ada."]
    assert call.answerer.conversation.pairs() == [("assistant", "Hello! I am Ada.")]
    await call.tasks.close()


def test_instructions_and_the_camera_go_into_the_prompt(runtime: CascadeRuntime) -> None:
    call = Call(runtime)
    call.answerer.set_instructions("Answer like a pirate.")
    call.answerer.camera.facts = "one person is facing the camera."
    messages = call.answerer.prompt("Hi!", "")
    assert messages[0] == {"role": "system", "content": "Answer like a pirate."}
    assert "one person" in messages[-2]["content"] and messages[-1]["content"] == "Hi!"
    call.answerer.set_instructions("")  # back to the engine's own
    assert call.answerer.prompt("Hi!", "")[0]["content"] == \
        runtime.new_conversation(None).system_prompt
