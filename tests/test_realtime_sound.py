"""A reply's sound on a Realtime connection: the reply gate writes its audio into the
handle, which sends the response's audio deltas at once (opening the response first when the
turn's start has not gone yet); a stopped reply sends nothing more."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from omnicall.app.realtime.replies import RealtimeReplies
from omnicall.app.realtime.sound import START_WAIT_S, RealtimePlayout
from omnicall.engine import realtime as rt
from omnicall.engine.conversation.reply_gate import ReplyGate
from omnicall.engine.events import AssistantAudio, AssistantText, EngineEvent, TurnEvent
from omnicall.media.clock import ManualClock
from tests.utils import UnplayedSound


class Wire:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def __call__(self, events: list[dict[str, Any]]) -> None:
        for fields in events:  # each a valid server event of the openai package
            rt.SERVER_EVENTS.validate_python({"event_id": rt.new_id("event"), **fields})
        self.sent.extend(events)

    def kinds(self) -> list[str]:
        return [fields["type"] for fields in self.sent]


async def test_the_gate_writes_audio_deltas_and_the_events_carry_the_rest() -> None:
    wire, queued = Wire(), list[EngineEvent]()

    async def emit(event: EngineEvent) -> None:  # the session's event queue
        queued.append(event)

    replies = RealtimeReplies()
    playout = RealtimePlayout(replies, wire)
    playout.started(5)  # its turn's start went out (the event pump)
    gate = ReplyGate(5, emit, ManualClock(), playout=playout)
    await gate.out(AssistantText("Hello", 5))
    await gate.out(AssistantAudio(np.full(2400, 500, np.int16), 24_000, 0, 5))
    await gate.out(AssistantAudio(np.full(2400, 500, np.int16), 24_000, 2400, 5))
    assert wire.kinds() == ["response.created", "response.output_item.added",
                            "response.output_audio.delta", "response.output_audio.delta"]
    assert sum(len(rt.decode_pcm16(f["delta"])) for f in wire.sent[2:]) == 4800
    assert not any(isinstance(e, AssistantAudio) for e in queued)  # never queued
    assert [type(e).__name__ for e in queued] == ["AssistantText", "StageTiming"]
    assert gate.sound.playout() is None and not gate.sound.measured  # the client truncates


async def test_a_stopped_reply_sends_nothing_more() -> None:
    wire = Wire()
    playout = RealtimePlayout(RealtimeReplies(), wire)
    playout.started(3)
    sound = playout.open(3, UnplayedSound(3))
    await sound.write(np.ones(480, np.int16), 24_000)
    sound.duck(0.3)  # the client plays it: nothing to do here
    sound.stop()
    await sound.write(np.ones(480, np.int16), 24_000)
    sound.end()
    assert wire.kinds().count("response.output_audio.delta") == 1
    assert playout.reply(3) is None


async def test_a_cut_gate_stops_its_realtime_sound() -> None:
    wire = Wire()

    async def emit(event: EngineEvent) -> None:
        return None

    playout = RealtimePlayout(RealtimeReplies(), wire)
    playout.started(7)
    gate = ReplyGate(7, emit, ManualClock(), playout=playout)
    await gate.out(AssistantAudio(np.ones(480, np.int16), 24_000, 0, 7))
    gate.cancel()  # a barge-in or response.cancel
    await gate.sound.write(np.ones(480, np.int16), 24_000)  # late: refused by the handle
    await gate.out(TurnEvent("assistant", "end", 7))
    assert wire.kinds().count("response.output_audio.delta") == 1


async def test_a_replys_first_sound_waits_for_its_turns_start_to_go_out() -> None:
    """The caller's turn and the previous response's end are queued before the reply's start:
    its sound goes out only after the event pump sent the start (bounded)."""
    wire = Wire()
    replies = RealtimeReplies()
    playout = RealtimePlayout(replies, wire)
    sound = playout.open(9, UnplayedSound(9))
    writing = asyncio.ensure_future(sound.write(np.ones(480, np.int16), 24_000))
    await asyncio.sleep(0.05)
    assert wire.sent == [] and not writing.done()
    await wire(replies.server_events(TurnEvent("user", "end", 9), 0.0, 1000.0))  # the pump
    await wire(replies.server_events(TurnEvent("assistant", "start", 9), 0.0, 1000.0))
    playout.started(9)
    await asyncio.wait_for(writing, 1)
    assert wire.kinds() == ["input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
                            "response.created", "response.output_item.added",
                            "response.output_audio.delta"]
    late = playout.open(10, UnplayedSound(10))  # a start that never comes: at most the wait
    await asyncio.wait_for(late.write(np.ones(480, np.int16), 24_000), START_WAIT_S + 1)
    assert wire.kinds()[-1] == "response.output_audio.delta"


async def test_a_client_gone_stops_the_sound() -> None:
    async def gone(events: list[dict[str, Any]]) -> None:
        raise ConnectionResetError("Cannot write to closing transport")

    playout = RealtimePlayout(RealtimeReplies(), gone)
    playout.started(2)
    sound = playout.open(2, UnplayedSound(2))
    await sound.write(np.ones(480, np.int16), 24_000)  # no error reaches the reply's maker
    assert sound.stopped  # type: ignore[attr-defined]
