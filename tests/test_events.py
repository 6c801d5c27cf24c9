"""Control messages from the page: anything a client sends is parsed safely or ignored."""

from __future__ import annotations

import json

import pytest

from omnicall.app.events import MAX_CONTROL_BYTES, decode_control, event_message
from omnicall.engine.base import TurnEvent


@pytest.mark.parametrize("message", [
    "[" * 1000 + "]" * 1000,  # 2 KB of nested arrays: RecursionError in the decoder (issue #10)
    '{"a":' * 1500 + "1" + "}" * 1500,
    json.dumps({"type": "ping", "pad": "x" * MAX_CONTROL_BYTES}),  # over the size cap
    b"\xff\xfe\x00", "not json", "[]", '{"type": 1}', "", "null", '"ping"',
])
def test_invalid_control_messages_are_none(message: str | bytes) -> None:
    assert decode_control(message) is None


def test_valid_control_message() -> None:
    assert decode_control('{"type": "ping", "t": 5}') == {"type": "ping", "t": 5}
    assert decode_control(b'{"type": "interrupt"}') == {"type": "interrupt"}


def test_an_interrupted_reply_says_what_the_caller_heard() -> None:
    cut = event_message(TurnEvent("assistant", "end", 3, interrupted=True, heard_ms=1220))
    assert cut == {"type": "turn", "role": "assistant", "phase": "end", "turn": 3,
                   "interrupted": True, "heard_ms": 1220}
    assert "heard_ms" not in (event_message(TurnEvent("assistant", "end", 4)) or {})
