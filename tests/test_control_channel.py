"""The call's data channel: messages wait for it (bounded), a page that does not read is not
buffered for, and every control a client sends is handled or ignored without raising."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from omnicall.app.call.control_channel import (
    EARLY_MESSAGES,
    MAX_CHANNEL_BUFFER_BYTES,
    ControlChannel,
)
from omnicall.app.turns.user_controls import UserControls
from omnicall.media.clock import ManualClock
from tests.test_user_controls import Recorder


class FakeSctp:
    """aiortc's queues of chunks not yet sent and sent but not yet acknowledged."""

    def __init__(self) -> None:
        self._outbound_queue: list[object] = []
        self._sent_queue: list[object] = []


class FakeChannel:
    """What ControlChannel uses of an ``RTCDataChannel``."""

    def __init__(self) -> None:
        self.readyState = "open"
        self.bufferedAmount = 0
        self.transport = FakeSctp()
        self.sent: list[dict[str, Any]] = []
        self.handlers: dict[str, Callable[..., None]] = {}

    def on(self, event: str, handler: Callable[..., None]) -> None:
        self.handlers[event] = handler

    def send(self, text: str) -> None:
        self.sent.append(json.loads(text))


def make(typed: bool = True, manual: bool = True
         ) -> tuple[ControlChannel, FakeChannel, Recorder, list[str]]:
    engine = Recorder(typed=typed, manual=manual)
    hangups: list[str] = []
    control = ControlChannel(ManualClock(), UserControls(engine),
                             lambda: hangups.append("hangup"))
    channel = FakeChannel()
    return control, channel, engine, hangups


def test_messages_wait_for_the_channel_bounded_and_follow_the_hello() -> None:
    control, channel, _, _ = make()
    for n in range(EARLY_MESSAGES + 3):
        assert not control.send({"type": "assistant_text", "delta": str(n)})
    assert control.dropped_messages == 3
    control.open(channel, {"type": "state", "state": "ready"})  # type: ignore[arg-type]
    assert channel.sent[0] == {"type": "state", "state": "ready"}
    assert [m["delta"] for m in channel.sent[1:]] == [str(n) for n in range(3, EARLY_MESSAGES + 3)]
    assert "message" in channel.handlers


def test_a_closing_call_queues_nothing_and_a_full_channel_drops() -> None:
    control, channel, _, _ = make()
    control.closing = True
    assert not control.send({"type": "x"}) and control.dropped_messages == 0
    control.open(channel, {"type": "state"})  # type: ignore[arg-type]
    channel.bufferedAmount = MAX_CHANNEL_BUFFER_BYTES + 1
    assert not control.send({"type": "stats"}) and control.dropped_messages == 1
    channel.bufferedAmount = 0
    channel.readyState = "closing"
    assert not control.send({"type": "stats"})
    assert channel.sent == [{"type": "state"}]


def test_controls_reach_the_engine_and_the_call() -> None:
    control, channel, engine, hangups = make()
    control.open(channel, {"type": "state"})  # type: ignore[arg-type]
    control.on_message('{"type": "interrupt"}')
    control.on_message(b'{"type": "stop"}')
    control.on_message('{"type": "ping", "t": 12.5}')
    control.on_message('{"type": "ping"}')
    control.on_message('{"type": "ping", "t": "soon"}')  # the protocol forbids it: ignored
    control.on_message('{"type": "text", "text": "  hello there "}')
    control.on_message('{"type": "hangup"}')
    assert control.controls.interrupts == 2 and engine.log == ["engine", "engine"]
    assert [m for m in channel.sent if m["type"] == "pong"] == [
        {"type": "pong", "t": 12.5}, {"type": "pong", "t": None}]
    assert engine.sent == ["hello there"] and hangups == ["hangup"]
    assert control.ignored_messages == 1


def test_what_cannot_be_done_is_ignored_or_answered() -> None:
    control, channel, _, _ = make(typed=False)
    control.open(channel, {"type": "state"})  # type: ignore[arg-type]
    for message in ("not json", '{"type": "dance"}', '{"type": "text", "text": ""}',
                    '{"type": "text", "text": ["x"]}'):
        control.on_message(message)
    assert control.ignored_messages == 4
    control.on_message('{"type": "text", "text": "hi"}')  # this engine takes no text
    error = channel.sent[-1]
    assert error["type"] == "error" and error["recoverable"]
    assert "typed messages are not possible here" in error["message"]
    for message in ('{"type": "talk"}', '{"type": "talk", "held": "yes"}'):
        control.on_message(message)
    assert control.ignored_messages == 6


def test_push_to_talk_reaches_the_engine_or_says_why_not() -> None:
    control, channel, engine, _ = make()
    control.open(channel, {"type": "state"})  # type: ignore[arg-type]
    control.on_message('{"type": "talk", "held": true}')
    control.on_message('{"type": "talk", "held": false}')
    assert engine.log == ["auto=False", "engine", "commit", "respond", "auto=True"]
    control, channel, engine, _ = make(manual=False)
    control.open(channel, {"type": "state"})  # type: ignore[arg-type]
    control.on_message('{"type": "talk", "held": true}')
    assert "push-to-talk is not possible here" in channel.sent[-1]["message"]


def test_a_bug_in_handling_does_not_raise_into_aiortc(caplog: pytest.LogCaptureFixture) -> None:
    control, _, _, _ = make()

    def broken() -> None:
        raise RuntimeError("bug")

    control._hangup = broken
    control.on_message('{"type": "hangup"}')  # logged, not raised
    assert any("control message handling failed" in r.getMessage() for r in caplog.records)


def test_a_flood_of_junk_is_logged_a_few_times(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="omnicall.app.call.control_channel")
    control, _, _, _ = make()
    for _ in range(500):
        control.on_message("{{{")
    assert control.ignored_messages == 500
    logged = [r for r in caplog.records if "malformed" in r.getMessage()]
    assert len(logged) == control.log_limit.per_window
    assert "counted, not logged" in logged[-1].getMessage()


async def test_flush_waits_until_the_peer_acknowledged_what_was_sent() -> None:
    loop = asyncio.get_running_loop()
    control, channel, _, _ = make()
    control.open(channel, {"type": "state"})  # type: ignore[arg-type]
    channel.bufferedAmount = 100  # never handed to SCTP: it waits its whole time
    started = loop.time()
    await control.flush(0.2)
    assert loop.time() - started >= 0.2
    channel.bufferedAmount = 0
    channel.transport._sent_queue.append("goodbye")  # sent, not yet acknowledged: waits
    started = loop.time()
    await control.flush(0.2)
    assert loop.time() - started >= 0.2
    channel.transport._sent_queue.clear()  # acknowledged: it returns at once
    started = loop.time()
    await control.flush(10.0)
    assert loop.time() - started < 1.0
