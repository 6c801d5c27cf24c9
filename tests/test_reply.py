"""A cascade reply (engine/cascade/reply.py): the words in the sound heard, and stopping."""

from __future__ import annotations

import asyncio

import pytest

from omnicall.engine.cascade.reply import Reply
from omnicall.engine.conversation.reply_gate import ReplyGate
from omnicall.engine.events import AssistantText, EngineEvent
from omnicall.media.clock import ManualClock


def reply(committed: bool = True) -> tuple[Reply, list[EngineEvent]]:
    sent: list[EngineEvent] = []

    async def emit(event: EngineEvent) -> None:
        sent.append(event)

    return Reply(1, ReplyGate(1, emit, ManualClock(), committed)), sent


def test_played_text_keeps_the_words_of_the_sound_heard() -> None:
    made, _ = reply()
    made.clause_audio = [("one two three four", 0.0, 2.0), ("five six", 2.0, 1.0),
                         ("seven", 3.0, 0.0)]  # the last clause's sound is still being made
    assert made.played_text(0.0) == ""
    assert made.played_text(1.0) == "one two"
    assert made.played_text(2.5) == "one two three four five"
    assert made.played_text(10.0) == "one two three four five six"
    assert made.llm_may_run.is_set()  # a new reply's LLM may run


async def test_a_stopped_reply_sends_nothing_more() -> None:
    made, sent = reply()
    await made.out(AssistantText("Hello", 1))
    made.stop()
    assert made.done and made.cancel.is_set() and made.gate.cancelled
    with pytest.raises(asyncio.CancelledError):
        await made.out(AssistantText(" there", 1))
    assert sent == [AssistantText("Hello", 1)]


def test_a_failed_reply_stops_but_its_gate_stays_open() -> None:
    made, _ = reply(committed=False)
    made.llm_may_run.clear()
    made.stop(void=False)
    assert made.done and made.cancel.is_set() and made.llm_may_run.is_set()
    assert not made.gate.cancelled  # its error still goes out once the turn is confirmed
