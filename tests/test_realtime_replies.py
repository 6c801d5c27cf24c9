"""Engine events as Realtime server events: every event the core makes is a valid server event
of the openai package, and the ids tie a turn's events together."""

from __future__ import annotations

from typing import Any

import numpy as np

from omnicall.app.realtime.replies import RealtimeReplies
from omnicall.engine import realtime as rt
from omnicall.engine.events import (
    AssistantText,
    EngineError,
    StageTiming,
    ToolCall,
    TurnEvent,
    UserTranscript,
)


def valid(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for fields in events:
        rt.SERVER_EVENTS.validate_python({"event_id": rt.new_id("event"), **fields})
    return events


def test_a_user_turn_places_speech_where_it_ended_in_the_input() -> None:
    replies = RealtimeReplies()
    item = replies.user_item
    started = valid(replies.server_events(TurnEvent("user", "start", 1), 10.0, 1500.0))
    assert started == [{"type": "input_audio_buffer.speech_started", "audio_start_ms": 1500,
                        "item_id": item}]
    assert replies.server_events(StageTiming(1, "speech_end", 12.0), 12.0, 3000.0) == []
    # the end of turn is confirmed 0.5 s after the speech stopped
    stopped, committed = valid(replies.server_events(TurnEvent("user", "end", 1), 12.5,
                                                     3500.0))
    assert stopped["type"] == "input_audio_buffer.speech_stopped"
    assert stopped["audio_end_ms"] == 3000 and stopped["item_id"] == item
    assert committed == {"type": "input_audio_buffer.committed", "item_id": item}
    assert replies.user_item != item and replies.speech_end_at_s is None
    # without the engine's speech end: where the input is now
    _, again = valid(replies.server_events(TurnEvent("user", "end", 2), 13.0, 4000.0))
    assert again["item_id"] != item


def test_transcripts_go_to_the_current_user_item() -> None:
    replies = RealtimeReplies()
    delta, = valid(replies.server_events(UserTranscript("what is", False, 1), 0.0, 0.0))
    done, = valid(replies.server_events(UserTranscript("what is it", True, 1), 0.0, 0.0))
    assert delta["type"] == "conversation.item.input_audio_transcription.delta"
    assert delta["delta"] == "what is" and delta["item_id"] == replies.user_item
    assert done["type"] == "conversation.item.input_audio_transcription.completed"
    assert done["transcript"] == "what is it"


def test_an_assistant_turn_is_one_response_with_its_output() -> None:
    replies = RealtimeReplies()
    assert replies.server_events(AssistantText("lost", 1), 0.0, 0.0) == []  # no response
    created, added = valid(replies.server_events(TurnEvent("assistant", "start", 1), 0, 0))
    response_id = replies.response_id
    assert created["type"] == "response.created" and created["response"]["id"] == response_id
    assert added["item"]["id"] == replies.reply_item
    text, = valid(replies.server_events(AssistantText("Paris", 1), 0.0, 0.0))
    audio, = valid(replies.audio(1, np.full(1600, 1000, np.int16), 16_000))  # its sound
    assert text["delta"] == "Paris" and text["response_id"] == response_id
    assert audio["type"] == "response.output_audio.delta"
    assert 2300 <= len(rt.decode_pcm16(audio["delta"])) <= 2400  # 16 kHz -> 24 kHz
    done, = valid(replies.server_events(TurnEvent("assistant", "end", 1), 0.0, 0.0))
    assert done["response"]["status"] == "completed" and replies.response_id is None
    assert replies.server_events(TurnEvent("assistant", "end", 1), 0.0, 0.0) == []
    assert replies.audio(1, np.ones(480, np.int16), 24_000) == []  # late: its response is done


def test_a_replys_sound_opens_its_response_when_it_comes_before_its_start() -> None:
    """The sound comes straight from the reply's gate, its turn's start through the event
    queue: whichever comes first opens the response, once."""
    replies = RealtimeReplies()
    created, added, audio = valid(replies.audio(2, np.ones(480, np.int16), 24_000))
    assert created["type"] == "response.created" and added["item"]["id"] == replies.reply_item
    assert audio["response_id"] == created["response"]["id"] == replies.response_id
    assert replies.server_events(TurnEvent("assistant", "start", 2), 0.0, 0.0) == []
    more, = valid(replies.audio(2, np.ones(480, np.int16), 24_000))
    assert more["response_id"] == created["response"]["id"]
    assert replies.server_events(TurnEvent("assistant", "end", 1), 0.0, 0.0) == []  # not its
    done, = valid(replies.server_events(TurnEvent("assistant", "end", 2), 0.0, 0.0))
    next_created, _, _ = valid(replies.audio(3, np.ones(480, np.int16), 24_000))
    assert next_created["response"]["id"] not in (None, done["response"]["id"])


def test_a_cut_reply_is_cancelled() -> None:
    replies = RealtimeReplies()
    replies.server_events(TurnEvent("assistant", "start", 4), 0.0, 0.0)
    done, = valid(replies.server_events(TurnEvent("assistant", "end", 4, interrupted=True),
                                        0.0, 0.0))
    assert done["response"]["status"] == "cancelled"
    assert done["response"]["output"][0]["status"] == "incomplete"


def test_errors_and_tool_calls_are_left_to_the_connection() -> None:
    replies = RealtimeReplies()
    assert replies.server_events(EngineError("boom"), 0.0, 0.0) == []
    assert replies.server_events(ToolCall(1, "c", "t", {}, "", "", 1.0), 0.0, 0.0) == []


def test_a_function_call_is_an_output_item_of_the_current_response() -> None:
    replies = RealtimeReplies()
    replies.server_events(TurnEvent("assistant", "start", 1), 0.0, 0.0)
    added, arguments, done = valid(replies.function_call("call_1", "weather", '{"x": 1}'))
    assert {e["response_id"] for e in (added, arguments, done)} == {replies.response_id}
    assert added["item"]["status"] == "in_progress" and done["item"]["status"] == "completed"
    assert arguments["arguments"] == '{"x": 1}' and arguments["item_id"] == added["item"]["id"]
    outside = valid(RealtimeReplies().function_call("call_2", "weather", "{}"))
    assert outside[0]["response_id"].startswith("resp_")
