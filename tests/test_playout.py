import numpy as np
import pytest

from omnicall.media.playout import FrameTag, Playout, PlayoutMeter, ReplySound
from omnicall.media.playout_queue import PlayoutQueue
from tests.utils import UnplayedSound


class FakeTime:
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t


def frame() -> np.ndarray:
    return np.ones(960, np.int16)


def test_first_sent_time_counts_and_units() -> None:
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    view: Playout = meter  # engines get this view (a handle per reply, what was heard)
    assert view.reply(3) is None
    for _ in range(5):
        meter.sent(FrameTag(3))
        clock.t += 0.02
    reply = view.reply(3)
    assert reply is not None
    assert reply.first_sent_at_s == 100.0 and reply.last_sent_at_s == pytest.approx(100.08)
    assert reply.sent_samples == 5 * 960 and reply.sent_ms == 100.0 and reply.sent_s == 0.1
    assert not reply.ended and not reply.interrupted and reply.discarded_samples == 0


def test_snapshots_do_not_change() -> None:
    meter = PlayoutMeter(FakeTime())
    meter.sent(FrameTag(1))
    before = meter.reply(1)
    meter.sent(FrameTag(1))
    assert before is not None and before.sent_samples == 960
    after = meter.reply(1)
    assert after is not None and after.sent_samples == 1920


def test_end_is_when_the_last_frame_left() -> None:
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    meter.sent(FrameTag(1))
    clock.t += 0.02
    meter.sent(FrameTag(1, samples=100, last=True))  # a padded last frame: its audio only
    reply = meter.reply(1)
    assert reply is not None and reply.ended_at_s == 100.02 and reply.sent_samples == 1060
    meter.interrupted(1)  # a flush after the end: the reply was heard in full
    reply = meter.reply(1)
    assert reply is not None and not reply.interrupted


def test_ended_with_nothing_queued_dates_the_end_to_the_last_send() -> None:
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    meter.sent(FrameTag(1))
    clock.t += 5
    meter.ended(1)
    reply = meter.reply(1)
    assert reply is not None and reply.ended_at_s == 100.0
    meter.ended(2)  # a reply without audio leaves no record
    assert meter.reply(2) is None and meter.reply(1) is not None and meter.forgotten_replies == 0


def test_a_frame_after_the_end_reopens_the_reply() -> None:
    meter = PlayoutMeter(FakeTime())
    meter.sent(FrameTag(1, last=True))
    meter.sent(FrameTag(1))
    reply = meter.reply(1)
    assert reply is not None and not reply.ended and reply.sent_samples == 1920


def test_interruption_keeps_what_was_sent_by_then() -> None:
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    for _ in range(3):
        meter.sent(FrameTag(4))
    clock.t += 1
    meter.interrupted(4)
    clock.t += 1
    meter.interrupted(4)  # only the first counts
    meter.sent(FrameTag(4))  # an engine that went on with the same turn
    meter.ended(4)
    reply = meter.reply(4)
    assert reply is not None
    assert reply.interrupted_at_s == 101.0 and reply.interrupted_sent_samples == 3 * 960
    assert reply.sent_samples == 4 * 960 and reply.ended_at_s == 102.0


def test_interrupted_before_anything_left() -> None:
    meter = PlayoutMeter(FakeTime())
    meter.interrupted(7)
    meter.ended(7)  # nothing sent since the flush: its end was never played
    reply = meter.reply(7)
    assert reply is not None and reply.interrupted and reply.interrupted_sent_samples == 0
    assert reply.first_sent_at_s is None and reply.sent_samples == 0 and not reply.ended


def test_history_is_bounded_oldest_forgotten() -> None:
    meter = PlayoutMeter(FakeTime(), max_replies=16)
    for turn in range(20):
        meter.sent(FrameTag(turn))
    kept = [turn for turn in range(20) if meter.reply(turn) is not None]
    assert kept == list(range(4, 20)) and meter.forgotten_replies == 4
    meter.sent(FrameTag(10))  # an older reply going on is remembered, none forgotten
    assert meter.reply(10) is not None and meter.forgotten_replies == 4


def test_dropped_and_trimmed_frames_count_only_what_left() -> None:
    """A live stream: the playout queue drops the oldest frames and trims standing excess;
    only the frames the consumer popped (sent) count as sent."""
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    jb = PlayoutQueue(target_frames=2, max_latency_frames=4, trim_window_frames=4, meter=meter)
    for _ in range(10):  # a burst: 6 frames dropped at once
        jb.push(frame(), FrameTag(1))
    sent = 0
    for _ in range(4):  # then one frame in, one frame out: a standing excess is trimmed
        popped = jb.pop_tagged()
        assert popped is not None and popped[1] is not None
        meter.sent(popped[1])
        sent += 1
        jb.push(frame(), FrameTag(1))
    assert jb.dropped_frames == 6 and jb.trimmed_frames > 0
    jb.mark_last(1)
    while (popped := jb.pop_tagged()) is not None:
        assert popped[1] is not None
        meter.sent(popped[1])
        sent += 1
    reply = meter.reply(1)
    assert reply is not None and reply.ended
    assert reply.sent_samples == sent * 960 == jb.played_frames * 960
    assert reply.discarded_samples == (jb.dropped_frames + jb.trimmed_frames) * 960
    assert reply.sent_samples + reply.discarded_samples == 14 * 960


def test_a_dropped_last_frame_ends_the_reply() -> None:
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    meter.sent(FrameTag(1))
    clock.t += 1
    meter.discarded(FrameTag(1, last=True))
    reply = meter.reply(1)
    assert reply is not None and reply.ended_at_s == 101.0 and reply.sent_samples == 960


def test_validation() -> None:
    with pytest.raises(ValueError):
        FrameTag(1, samples=0)
    with pytest.raises(ValueError):
        FrameTag(1, samples=961)
    with pytest.raises(ValueError):
        PlayoutMeter(FakeTime(), max_replies=0)


class Output:
    """Plays a meter's replies: records what the handles send it, cuts as a call output
    does."""

    def __init__(self, meter: PlayoutMeter) -> None:
        self.meter = meter
        self.cuts: list[int | None] = []
        self.ducks: list[tuple[int, float]] = []
        self.written: list[tuple[int | None, int, int]] = []  # turn, samples, rate
        self.ended: list[int] = []

    async def write(self, samples: np.ndarray, rate_hz: int, turn_id: int | None = None
                    ) -> None:
        self.written.append((turn_id, len(samples), rate_hz))

    def end(self, turn_id: int) -> None:
        self.ended.append(turn_id)

    def stop(self, turn_id: int | None = None) -> None:
        self.cuts.append(turn_id)
        if turn_id is not None:
            self.meter.interrupted(turn_id)

    def duck(self, turn_id: int, gain: float) -> None:
        self.ducks.append((turn_id, gain))


def sound(meter: Playout, turn_id: int) -> tuple[ReplySound, UnplayedSound]:
    unplayed = UnplayedSound(turn_id)
    return meter.open(turn_id, unplayed), unplayed


async def test_a_reply_handle_writes_ends_and_stops_at_the_attached_output() -> None:
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    output = Output(meter)
    meter.attach(output)
    three, unplayed = sound(meter, 3)
    assert three.measured and three.turn_id == 3 and three.playout() is None
    await three.write(np.ones(480, np.int16), 24_000)
    three.end()
    assert output.written == [(3, 480, 24_000)] and output.ended == [3]
    meter.sent(FrameTag(3))
    clock.t = 0.7
    three.stop()
    reply = three.playout()
    assert output.cuts == [3] and reply is not None and unplayed.written == []
    assert reply.interrupted_at_s == 0.7 and reply.interrupted_sent_samples == 960
    assert reply.interrupted_sent_s == 960 / 48_000
    meter.sent(FrameTag(3))  # sent after the cut: still counted, the cut's count stays
    after = three.playout()
    assert after is not None and after.sent_samples == 1920
    assert after.interrupted_sent_samples == 960


async def test_a_resumed_call_attaches_its_output_and_a_closed_one_detaches() -> None:
    meter = PlayoutMeter(FakeTime())
    first, second = Output(meter), Output(meter)
    meter.attach(first)
    one, _ = sound(meter, 1)  # opened while the first call played
    meter.attach(second)  # the resumed call's output takes over the parked session's meter
    meter.detach(first)  # the dropped call closing late does not take it back
    await one.write(np.ones(10, np.int16), 24_000)
    one.stop()
    assert first.cuts == [] and first.written == []
    assert second.cuts == [1] and second.written == [(1, 10, 24_000)]
    meter.detach(second)
    two, unplayed = sound(meter, 2)
    await two.write(np.ones(20, np.int16), 24_000)  # parked: the session's events get it
    two.end()
    two.stop()  # nothing plays it: it is only marked
    marked = meter.reply(2)
    assert unplayed.written == [20] and unplayed.ends == unplayed.stops == 1
    assert second.cuts == [1] and marked is not None and marked.interrupted
    assert marked.interrupted_sent_samples == 0


def test_frames_sent_ducked_are_counted_from_the_first_one_sent() -> None:
    clock = FakeTime()
    meter = PlayoutMeter(clock)
    meter.sent(FrameTag(4))
    never = meter.reply(4)
    assert never is not None and never.ducked_at_s is None and never.ducked_samples == 0
    clock.t = 0.04
    meter.sent(FrameTag(4), ducked=True)
    clock.t = 0.06
    meter.sent(FrameTag(4, samples=100, last=True), ducked=True)
    four = meter.reply(4)
    assert four is not None and four.ducked_at_s == 0.04  # the first ducked frame's send
    assert four.ducked_samples == 960 + 100 and four.sent_samples == 2 * 960 + 100
    assert four.ducked_samples == 960 + 100
    meter.sent(FrameTag(5), ducked=True)  # ducked from its first frame
    five = meter.reply(5)
    assert five is not None and five.ducked_at_s == five.first_sent_at_s == 0.06


async def test_duck_goes_to_the_attached_output_and_without_one_does_nothing() -> None:
    meter = PlayoutMeter(FakeTime())
    one, _ = sound(meter, 1)
    one.duck(0.5)  # parked: nothing plays it
    assert meter.reply(1) is None
    output = Output(meter)
    meter.attach(output)
    one.duck(0.3)
    one.duck(1.0)
    assert output.ducks == [(1, 0.3), (1, 1.0)]
    meter.detach(output)
    two, _ = sound(meter, 2)
    two.duck(0.5)
    assert output.ducks == [(1, 0.3), (1, 1.0)] and meter.reply(2) is None
