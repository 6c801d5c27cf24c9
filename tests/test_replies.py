"""A reply's life, the same for every engine (engine/conversation/replies.py): started,
held while speculative, committed or cancelled unseen, cut where the caller is (its end
carries heard_ms; the engine remembers what was heard), kept current until played out, and
ended whole. Driven on a manual clock with a recording engine and no media plane."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from omnicall.engine.conversation.replies import DUCK_GAIN, Replies, Reply
from omnicall.engine.events import (
    AssistantAudio,
    AssistantText,
    EngineEvent,
    TurnEvent,
    UserTranscript,
)
from omnicall.media.clock import ManualClock
from tests.utils import RecordingPlayout

RATE = 24_000


class Engine:
    """The engine's part (ReplyMaker) and the session's event queue (EventSink)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.kept: list[tuple[int, str, bool]] = []  # turn, words kept, replacing
        self.events: list[EngineEvent] = []  # delivered in order
        self.queued: list[EngineEvent] = []  # not delivered yet (a flush drops them)

    def stop_reply(self, reply: Reply[str]) -> None:
        self.calls.append(("stop", reply.turn_id))

    def remember_reply(self, reply: Reply[str]) -> None:
        words = reply.text if reply.heard_ms is None else reply.heard_text(reply.heard_ms / 1000)
        self.kept.append((reply.turn_id, words, reply.remembered))

    async def emit(self, event: EngineEvent) -> None:
        self.events.append(event)

    def put_now(self, event: EngineEvent) -> None:
        self.events.append(event)

    def flush_events(self) -> int:
        dropped = len(self.queued)
        self.queued.clear()
        return dropped


def setup() -> tuple[Engine, Replies[str], ManualClock]:
    engine, clock = Engine(), ManualClock(10.0)
    return engine, Replies(engine, engine, clock), clock


def audio(turn_id: int, seconds: float, pts: int = 0) -> AssistantAudio:
    return AssistantAudio(np.zeros(int(seconds * RATE), np.int16), RATE, pts, turn_id)


async def say(reply: Reply[str], text: str, seconds: float) -> None:
    """What an engine does as it makes a reply: text, then its sound, spans kept."""
    await reply.out(AssistantText(text, reply.turn_id))
    reply.spans.append((text, reply.audio_s, seconds))
    reply.text += text
    reply.audio_s += seconds
    await reply.out(audio(reply.turn_id, seconds))


async def settle() -> None:
    """Let a task just created reach its first wait (a sleep on the manual clock)."""
    for _ in range(5):
        await asyncio.sleep(0)


def ends(engine: Engine) -> list[TurnEvent]:
    return [e for e in engine.events if isinstance(e, TurnEvent) and e.phase == "end"]


async def test_a_speculation_is_held_then_committed_in_order() -> None:
    engine, replies, _ = setup()
    reply = replies.new(1, "work", committed=False)
    assert replies.speculating(1) is reply and replies.live() is reply
    await say(reply, "Hello there.", 1.0)
    assert engine.events == []  # held while the turn may go on
    await replies.commit(reply)
    assert [type(e).__name__ for e in engine.events] == ["AssistantText", "StageTiming",
                                                       "AssistantAudio"]  # first_audio_out
    assert replies.speculations == {"committed": 1, "cancelled": 0}
    assert replies.speculating(1) is None and replies.live() is reply


async def test_a_committed_reply_is_pending_until_its_first_sound() -> None:
    """What the listener asks before a reply sounds: a committed reply not yet heard is
    pending (sound then is heard for words, as over its sound); a speculation is not."""
    _, replies, _ = setup()
    speculation = replies.new(1, "work", committed=False)
    assert not replies.pending() and replies.live() is speculation
    assert replies.cancel_speculation() is speculation
    reply = replies.new(2, "work")
    assert replies.pending() and replies.sounding_since() is None
    await say(reply, "Hello there.", 1.0)
    assert not replies.pending() and replies.sounding_since() is not None
    assert await replies.barge_in() and not replies.pending()


async def test_a_cancelled_speculation_is_never_seen_nor_remembered() -> None:
    engine, replies, _ = setup()
    reply = replies.new(1, "work", committed=False)
    await say(reply, "Hello there.", 1.0)
    assert replies.cancel_speculation() is reply
    assert engine.events == [] and engine.kept == [] and replies.current is None
    assert reply.cancel.is_set() and reply.done and ("stop", 1) in engine.calls
    assert not reply.gate.committed  # the engine can tell a void speculation from a cut
    assert replies.cancel_speculation() is None  # nothing left to cancel
    with pytest.raises(asyncio.CancelledError):
        await reply.out(AssistantText("more", 1))


async def test_a_barge_in_cuts_where_the_caller_is_and_keeps_what_was_heard() -> None:
    engine, replies, clock = setup()
    reply = replies.new(2, "work")
    await say(reply, "one two three four", 2.0)
    await say(reply, "five six", 1.0)
    engine.queued.append(audio(2, 0.5))  # made, not yet delivered: void at the cut
    assert replies.sounding_since() == 10.0
    await clock.advance(1.06)  # the estimate: 60 ms to reach the caller, then 1 s heard
    assert await replies.barge_in()
    end = ends(engine)[-1]
    assert end.interrupted and end.heard_ms == 1000 and reply.heard_ms == 1000
    assert engine.kept == [(2, "one two", False)] and engine.queued == []
    assert replies.barge_ins == 1 and replies.live() is None and reply.stopped.is_set()
    assert not await replies.barge_in()  # nothing live: nothing cut
    assert not await replies.end(reply)  # its end went out with the cut
    assert len(ends(engine)) == 1


async def test_heard_is_never_more_than_was_made() -> None:
    engine, replies, clock = setup()
    reply = replies.new(1, "work")
    await say(reply, "short", 0.5)
    await clock.advance(5.0)
    assert replies.interrupt()
    assert ends(engine)[-1].heard_ms == 500


async def test_the_stop_control_spares_a_speculation_unless_told() -> None:
    engine, replies, _ = setup()
    reply = replies.new(1, "work", committed=False)
    assert not replies.interrupt()  # the page's stop: nothing was said yet
    assert replies.live() is reply
    assert replies.interrupt(committed_only=False)
    assert ends(engine)[-1].heard_ms == 0 and reply.done


async def test_a_reply_stays_current_until_played_out_then_ends_whole() -> None:
    engine, replies, clock = setup()
    reply = replies.new(3, "work")
    await say(reply, "A whole answer.", 2.0)
    waiting = asyncio.create_task(replies.play_out(reply))
    await settle()
    await clock.advance(1.0)
    assert not waiting.done() and replies.live() is reply
    await clock.advance(1.1)
    await asyncio.wait_for(waiting, 1.0)
    assert await replies.end(reply)
    assert ends(engine) == [TurnEvent("assistant", "end", 3)]
    assert engine.kept == [(3, "A whole answer.", False)] and replies.live() is None


async def test_a_cut_wakes_the_play_out_wait_at_once() -> None:
    _engine, replies, clock = setup()
    reply = replies.new(1, "work")
    await say(reply, "A long answer.", 30.0)
    waiting = asyncio.create_task(replies.play_out(reply))
    await settle()
    await clock.advance(0.5)
    await replies.barge_in()
    await asyncio.wait_for(waiting, 1.0)  # no 30 s sleep left behind
    assert not await replies.end(reply)


async def test_a_late_truncation_rewrites_what_an_ended_reply_left_in_memory() -> None:
    engine, replies, clock = setup()
    reply = replies.new(4, "work")
    await say(reply, "one two three four", 2.0)
    await clock.advance(2.1)
    assert await replies.end(reply)
    replies.truncate(1000)  # the client says it played only the first second
    assert engine.kept == [(4, "one two three four", False), (4, "one two", True)]
    assert len(ends(engine)) == 1  # no second end for an ended reply


async def test_a_truncation_of_a_live_reply_cuts_it_at_that_point() -> None:
    engine, replies, _ = setup()
    reply = replies.new(5, "work")
    await say(reply, "one two three four", 2.0)
    replies.truncate(1500)
    assert ends(engine)[-1].heard_ms == 1500 and engine.kept == [(5, "one two three", False)]


async def test_a_failed_reply_stops_but_its_gate_stays_open() -> None:
    engine, replies, _ = setup()
    reply = replies.new(1, "work", committed=False)
    replies.fail(reply)
    assert reply.done and reply.cancel.is_set() and not reply.gate.cancelled
    assert engine.kept == []  # nothing of a failed reply is remembered


def test_heard_text_without_spans_lays_the_text_evenly_over_the_sound() -> None:
    _, replies, _ = setup()
    reply = replies.new(1, "work", text="one two three four")
    assert reply.heard_text(1.0) == ""  # no sound made yet
    reply.audio_s = 2.0
    assert reply.heard_text(1.0) == "one two"
    assert reply.heard_text(5.0) == "one two three four"


def test_heard_text_counts_only_pieces_whose_sound_was_made() -> None:
    _, replies, _ = setup()
    reply = replies.new(1, "work")
    reply.spans = [("one two three four", 0.0, 2.0), ("five six", 2.0, 1.0),
                   ("seven", 3.0, 0.0)]  # the last piece's sound is still being made
    assert reply.heard_text(0.0) == ""
    assert reply.heard_text(1.0) == "one two"
    assert reply.heard_text(2.5) == "one two three four five"
    assert reply.heard_text(10.0) == "one two three four five six"


async def test_a_sounding_reply_is_ducked_and_restored_and_a_backchannel_recorded() -> None:
    engine, clock = Engine(), ManualClock(10.0)
    playout = RecordingPlayout()
    replies: Replies[str] = Replies(engine, engine, clock, playout)  # type: ignore[arg-type]
    reply = replies.new(7, "work")
    assert not replies.duck()  # nothing has sounded yet: nothing to lower
    await say(reply, "A long answer.", 3.0)
    assert replies.duck() and reply.ducked and playout.gains == [(7, DUCK_GAIN)]
    await replies.backchannel(" Mm-hmm. ")
    replies.unduck()
    assert playout.gains[-1] == (7, 1.0) and not reply.ducked and replies.live() is reply
    assert engine.events[-1] == UserTranscript("Mm-hmm.", final=True, turn_id=7)
    replies.unduck()  # twice: nothing more
    assert len(playout.gains) == 2 and replies.ducks == 1


async def test_a_ducked_reply_that_is_cut_is_not_raised_again() -> None:
    engine, clock = Engine(), ManualClock(10.0)
    playout = RecordingPlayout()
    replies: Replies[str] = Replies(engine, engine, clock, playout)  # type: ignore[arg-type]
    reply = replies.new(8, "work")
    await say(reply, "A long answer.", 3.0)
    replies.duck()
    await replies.barge_in()  # the words were an interruption
    replies.unduck()
    assert playout.gains == [(8, DUCK_GAIN)] and playout.stopped == [8]
