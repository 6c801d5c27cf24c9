"""The Realtime protocol helpers: every event omnicall sends is one the openai package's
adapters accept, audio survives the wire format, and bad input is a clear ProtocolError."""

from __future__ import annotations

import json

import numpy as np
import pytest

from omnicall.engine import realtime as rt


def client_events() -> list[object]:
    return [rt.session_update(instructions="be brief", server_vad=True,
                              silence_duration_ms=300),
            rt.session_update(instructions=None, server_vad=False),
            rt.audio_append(np.arange(-100, 100, dtype=np.int16)), rt.commit(),
            rt.response_create(), rt.response_cancel(), rt.truncate("item_1", 1234),
            rt.message_item("user", "hello"), rt.message_item("assistant", "hi there"),
            rt.image_item(b"\xff\xd8jpeg")]


@pytest.mark.parametrize("event", client_events(), ids=lambda e: type(e).__name__)
def test_every_client_event_passes_the_openai_adapter(event: object) -> None:
    text = rt.dump(event)  # type: ignore[arg-type]
    parsed = rt.CLIENT_EVENTS.validate_json(text)
    assert type(parsed) is type(event)
    assert json.loads(text)["type"] == parsed.type


def test_turn_detection_null_is_sent_explicitly() -> None:
    manual = json.loads(rt.dump(rt.session_update(instructions=None, server_vad=False)))
    assert manual["session"]["audio"]["input"]["turn_detection"] is None
    assert manual["session"]["audio"]["input"]["format"] == {"type": "audio/pcm",
                                                             "rate": 24_000}


def test_pcm16_round_trip_and_bad_audio() -> None:
    samples = np.array([0, 1, -1, 32767, -32768], dtype=np.int16)
    assert np.array_equal(rt.decode_pcm16(rt.encode_pcm16(samples)), samples)
    with pytest.raises(rt.ProtocolError, match="base64"):
        rt.decode_pcm16("not base64!!")
    with pytest.raises(rt.ProtocolError, match="even"):
        rt.decode_pcm16("AA==")


@pytest.mark.parametrize("text", [
    "{", "[]", '{"type": "nope"}', '{"type": "input_audio_buffer.append"}',
    '{"type": "session.update", "session": 5}', "[" * 5000 + "]" * 5000,
])
def test_invalid_client_events_are_protocol_errors(text: str) -> None:
    with pytest.raises(rt.ProtocolError):
        rt.parse_client_event(text)


def test_server_events_parse_typed() -> None:
    event = rt.parse_server_event(json.dumps({
        "type": "response.output_audio.delta", "event_id": "e", "response_id": "r",
        "item_id": "i", "output_index": 0, "content_index": 0, "delta": "AAA="}))
    assert event.type == "response.output_audio.delta"
    with pytest.raises(rt.ProtocolError):
        rt.parse_server_event('{"type": "response.output_audio.delta"}')
    assert rt.event_type('{"type": "x"}') == "x" and rt.event_type("[") is None
