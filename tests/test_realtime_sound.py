"""A reply's sound on a Realtime connection: the reply gate writes its audio into the
handle, which sends the response's audio deltas at once (opening the response first when the
turn's start has not gone yet); a stopped reply sends nothing more."""

from __future__ import annotations

from typing import Any

import numpy as np

from omnicall.app.realtime.replies import RealtimeReplies
from omnicall.app.realtime.sound import RealtimePlayout
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
    gate = ReplyGate(5, emit, ManualClock(), playout=RealtimePlayout(replies, wire))
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

    gate = ReplyGate(7, emit, ManualClock(), playout=RealtimePlayout(RealtimeReplies(), wire))
    await gate.out(AssistantAudio(np.ones(480, np.int16), 24_000, 0, 7))
    gate.cancel()  # a barge-in or response.cancel
    await gate.sound.write(np.ones(480, np.int16), 24_000)  # late: refused by the handle
    await gate.out(TurnEvent("assistant", "end", 7))
    assert wire.kinds().count("response.output_audio.delta") == 1
