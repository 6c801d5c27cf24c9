"""The one event pump: stage bookkeeping (bounded), finished turns reported, events routed
in order."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from omnicall.app.turns.event_pump import EventPump, TurnStages, is_assistant_end
from omnicall.engine.events import AssistantText, CameraSeen, EngineEvent, StageTiming, TurnEvent


def test_stages_keep_the_first_stage_as_origin_and_finish_hands_them_out() -> None:
    stages = TurnStages()
    assert stages.record(StageTiming(1, "end_of_turn", 10.0)) == 10.0
    assert stages.record(StageTiming(1, "llm_first_token", 10.4)) == 10.0
    assert stages.origin_s(1) == 10.0 and stages.origin_s(2) is None
    assert stages.finish(1) == {"end_of_turn": 10.0, "llm_first_token": 10.4}
    assert stages.finish(1) == {} and len(stages) == 0
    assert stages.origin_s(1) == 10.0  # a late timing of the ended turn still has its origin


def test_stages_are_bounded_dropping_the_oldest_turn() -> None:
    stages = TurnStages(max_open_turns=3)
    for turn in range(10):
        stages.record(StageTiming(turn, "speech_end", float(turn)))
    assert len(stages) == 3
    assert stages.origin_s(6) is None and stages.origin_s(7) == 7.0
    assert stages.finish(9) == {"speech_end": 9.0}
    with pytest.raises(ValueError):
        TurnStages(max_open_turns=0)


def test_is_assistant_end() -> None:
    assert is_assistant_end(TurnEvent("assistant", "end", 1))
    assert not is_assistant_end(TurnEvent("assistant", "start", 1))
    assert not is_assistant_end(TurnEvent("user", "end", 1))
    assert not is_assistant_end(AssistantText("hi", 1))


async def test_events_are_booked_then_routed_in_order_and_finished_turns_reported() -> None:
    routed: list[EngineEvent] = []
    turns: list[tuple[dict[str, float], bool]] = []
    origins: list[float | None] = []

    async def route(event: EngineEvent) -> None:
        routed.append(event)
        if isinstance(event, StageTiming):
            origins.append(pump.stages.origin_s(event.turn_id))  # booked before it is routed

    pump = EventPump(route, lambda stages, cut: turns.append((stages, cut)))
    script: list[EngineEvent] = [
        StageTiming(1, "end_of_turn", 5.0), TurnEvent("assistant", "start", 1),
        StageTiming(1, "first_audio", 5.5), AssistantText("hello", 1),
        TurnEvent("assistant", "end", 1), TurnEvent("user", "end", 2),
        TurnEvent("assistant", "end", 2, interrupted=True)]

    async def events() -> AsyncIterator[EngineEvent]:
        for event in script:
            yield event

    await pump.run(events())
    assert routed == script and pump.events_in == len(script)
    assert origins == [5.0, 5.0]
    assert turns == [({"end_of_turn": 5.0, "first_audio": 5.5}, False), ({}, True)]
    assert len(pump.stages) == 0


def test_without_on_turn_the_stages_are_still_released() -> None:
    async def route(event: EngineEvent) -> None:
        return None

    pump = EventPump(route)
    pump.observe(StageTiming(3, "speech_end", 1.0))
    pump.observe(TurnEvent("assistant", "end", 3))
    assert len(pump.stages) == 0


async def test_a_camera_frame_is_counted_and_routed_not_kept() -> None:
    routed: list[EngineEvent] = []

    async def route(event: EngineEvent) -> None:
        routed.append(event)

    pump = EventPump(route)
    seen = CameraSeen(2, 9, b"\xff\xd8\xff\xe0 jpeg", sharp=True)

    async def events() -> AsyncIterator[EngineEvent]:
        yield StageTiming(2, "speech_end", 1.0)
        yield seen
        yield TurnEvent("assistant", "end", 2)

    await pump.run(events())
    assert routed[1] is seen and pump.frames_seen == 1 and pump.events_in == 3
    assert len(pump.stages) == 0  # no stage, no turn of its own
    assert repr(seen.thumb_jpeg) not in repr(vars(pump))  # the pump holds no image
