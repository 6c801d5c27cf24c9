"""A reply's way out: held while speculative, released in order at commit, dropped at
cancel, the first sound stamped once; what the caller heard, measured or estimated."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from omnicall.engine.conversation.reply_gate import PLAYOUT_DELAY_S, ReplyGate
from omnicall.engine.events import AssistantAudio, AssistantText, EngineEvent, StageTiming
from omnicall.media.clock import ManualClock


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


class FakePlayout:
    def __init__(self) -> None:
        self.sent: dict[int, Measured] = {}
        self.stopped: list[int] = []

    def reply(self, turn_id: int) -> Measured | None:
        return self.sent.get(turn_id)

    def stop(self, turn_id: int) -> None:
        self.stopped.append(turn_id)


async def test_heard_is_what_the_media_plane_sent_when_it_measures() -> None:
    clock, playout = ManualClock(), FakePlayout()
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
    clock, playout = ManualClock(), FakePlayout()
    quiet = ReplyGate(6, Sink(), clock, committed=False, playout=playout)  # type: ignore[arg-type]
    await quiet.out(audio(6))
    quiet.cancel()  # speculation overtaken: none of it was released, nothing to stop
    assert playout.stopped == []
    gate = ReplyGate(7, Sink(), clock, playout=playout)  # type: ignore[arg-type]
    await gate.out(audio(7))
    gate.cancel()  # a barge-in: the media plane cuts it now, not when the end event arrives
    assert playout.stopped == [7]
