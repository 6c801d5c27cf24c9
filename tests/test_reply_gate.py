"""A reply's way out: held while speculative, released in order at commit, dropped at
cancel, the first sound stamped once; what the caller heard, measured or estimated."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from omnicall.engine.conversation.reply_gate import PLAYOUT_DELAY_S, ReplyGate
from omnicall.engine.events import (
    AssistantAudio,
    AssistantText,
    EngineEvent,
    StageTiming,
    TurnEvent,
)
from omnicall.media.clock import ManualClock
from tests.utils import RecordingPlayout


def audio(turn_id: int, samples: int = 1920) -> AssistantAudio:
    return AssistantAudio(np.zeros(samples, np.int16), 24_000, 0, turn_id)


class Sink:
    def __init__(self) -> None:
        self.events: list[EngineEvent] = []

    async def __call__(self, event: EngineEvent) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.stage if isinstance(e, StageTiming) else type(e).__name__
                for e in self.events]


async def test_a_committed_reply_goes_straight_out_and_stamps_its_first_sound_once() -> None:
    clock, sink = ManualClock(10.0), Sink()
    gate = ReplyGate(1, sink, clock)
    await gate.out(AssistantText("Hi", 1))
    await clock.advance(0.5)
    await gate.out(audio(1))
    await gate.out(audio(1))
    assert sink.kinds() == ["AssistantText", "first_audio_out", "AssistantAudio",
                            "AssistantAudio"]
    assert gate.first_audio_at == 10.5 and sink.events[1].at_s == 10.5  # type: ignore[union-attr]
    assert gate.released_audio_s == 0.16 and gate.released.is_set()


async def test_a_speculative_reply_is_held_then_released_in_order_at_commit() -> None:
    clock, sink = ManualClock(), Sink()
    gate = ReplyGate(2, sink, clock, committed=False)
    await gate.out(AssistantText("The", 2))
    await gate.out(audio(2))
    assert sink.events == [] and gate.speculative and not gate.released.is_set()
    await clock.advance(0.3)  # the hangover confirmed the end of turn
    await gate.commit()
    await gate.out(AssistantText(" end", 2))
    assert sink.kinds() == ["AssistantText", "first_audio_out", "AssistantAudio",
                            "AssistantText"]
    assert gate.first_audio_at == 0.3  # stamped when released, not when made
    assert gate.released.is_set() and gate.decided.is_set() and not gate.speculative


async def test_a_cancelled_reply_leaves_nothing() -> None:
    sink = Sink()
    gate = ReplyGate(3, sink, ManualClock(), committed=False)
    await gate.out(audio(3))
    gate.cancel()
    await gate.out(audio(3))
    await gate.commit()  # too late: nothing comes out
    assert sink.events == [] and gate.held == []
    assert gate.decided.is_set() and not gate.released.is_set()


async def test_heard_is_estimated_from_the_first_sound_and_bounded_by_the_audio() -> None:
    clock = ManualClock(5.0)
    gate = ReplyGate(4, Sink(), clock)
    assert gate.heard_s() == 0.0 and gate.played_out_at() is None
    for _ in range(10):  # 0.8 s of sound released at once
        await gate.out(audio(4))
    await clock.advance(0.5)
    assert abs(gate.heard_s() - (0.5 - PLAYOUT_DELAY_S)) < 1e-9
    await clock.advance(5.0)
    assert abs(gate.heard_s() - 0.8) < 1e-9  # never more than was released
    assert gate.played_out_at() == 5.8


@dataclass(frozen=True)
class Measured:
    sent_samples: int
    interrupted_sent_samples: int | None = None

    @property
    def sent_s(self) -> float:
        return self.sent_samples / 48_000

    @property
    def interrupted_sent_s(self) -> float | None:
        if self.interrupted_sent_samples is None:
            return None
        return self.interrupted_sent_samples / 48_000


async def test_heard_is_what_the_media_plane_sent_when_it_measures() -> None:
    clock, playout = ManualClock(), RecordingPlayout()
    gate = ReplyGate(5, Sink(), clock, playout=playout)  # type: ignore[arg-type]
    for _ in range(10):
        await gate.out(audio(5))
    await clock.advance(2.0)
    assert gate.heard_s() == 0.0  # nothing of it has left yet
    playout.sent[5] = Measured(16_320)
    assert gate.heard_s() == 0.34
    playout.sent[5] = Measured(20_000, interrupted_sent_samples=16_320)  # cut at 0.34 s
    assert gate.heard_s() == 0.34


async def test_cancelling_a_reply_that_sounded_stops_its_playout_at_once() -> None:
    clock, playout = ManualClock(), RecordingPlayout()
    quiet = ReplyGate(6, Sink(), clock, committed=False, playout=playout)  # type: ignore[arg-type]
    await quiet.out(audio(6))
    quiet.cancel()  # speculation overtaken: none of it was released, nothing to stop
    assert playout.stopped == []
    gate = ReplyGate(7, Sink(), clock, playout=playout)  # type: ignore[arg-type]
    await gate.out(audio(7))
    gate.cancel()  # a barge-in: the media plane cuts it now, not when the end event arrives
    assert playout.stopped == [7]


async def test_in_a_call_the_audio_goes_into_its_sound_and_the_end_ends_it() -> None:
    """With the media plane's playout, a reply's audio never enters the session's events:
    it goes into the reply's sound handle; its end (played on) ends the sound first."""
    clock, sink, playout = ManualClock(), Sink(), RecordingPlayout()
    gate = ReplyGate(8, sink, clock, committed=False, playout=playout)  # type: ignore[arg-type]
    await gate.out(AssistantText("Hi", 8))
    await gate.out(audio(8, samples=480))
    assert playout.written == []  # held while speculative
    await gate.commit()
    await gate.out(audio(8, samples=960))
    await gate.out(TurnEvent("assistant", "end", 8))
    assert playout.written == [(8, 480), (8, 960)] and playout.ended == [8]
    assert sink.kinds() == ["AssistantText", "first_audio_out", "TurnEvent"]
    cut = ReplyGate(9, sink, clock, playout=playout)  # type: ignore[arg-type]
    await cut.out(audio(9))
    cut.cancel()
    await cut.out(TurnEvent("assistant", "end", 9, interrupted=True))  # dropped: cancelled
    assert playout.ended == [8] and playout.stopped == [9]


async def test_a_reply_cut_while_its_first_sound_waited_writes_nothing() -> None:
    playout = RecordingPlayout()
    gate: ReplyGate

    async def slow(event: EngineEvent) -> None:  # the event queue was full: a barge-in came
        gate.cancel()

    gate = ReplyGate(10, slow, ManualClock(), playout=playout)  # type: ignore[arg-type]
    await gate.out(audio(10))
    assert playout.written == [] and playout.stopped == [10]


async def test_without_a_media_plane_the_audio_is_the_sessions_events() -> None:
    sink = Sink()
    gate = ReplyGate(11, sink, ManualClock())
    await gate.out(audio(11, samples=480))
    await gate.out(audio(11, samples=960))
    sent = [e for e in sink.events if isinstance(e, AssistantAudio)]
    assert [(len(e.samples), e.pts, e.turn_id) for e in sent] == [(480, 0, 11), (960, 480, 11)]
