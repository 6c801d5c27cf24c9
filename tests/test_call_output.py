"""A call's media out (:class:`CallOutput`): engine audio to paced, metered frames, and
``stop(turn_id)``, the one way a barge-in reaches the sound."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest

from omnicall.app.call.session import CallSession
from omnicall.app.config import ServerConfig
from omnicall.engine.events import EngineEvent, TurnEvent
from omnicall.engine.loopback import LoopbackEngine
from omnicall.media.call_output import LIVE_SLACK_FRAMES, CallOutput
from omnicall.media.clock import ManualClock
from omnicall.media.playout import PlayoutMeter
from tests.utils import UnplayedSound, tone, wait_for

REPLY = tone(300, 0.2, rate=24_000)  # 200 ms at 24 kHz: ten 20 ms frames at 48 kHz


def output_for(clock: ManualClock, **kwargs: object) -> CallOutput:
    return CallOutput(clock, PlayoutMeter(clock), target_frames=1, **kwargs)  # type: ignore[arg-type]


async def send(output: CallOutput, clock: ManualClock, frames: int) -> list[np.ndarray]:
    """Let the paced track send ``frames`` frames, one 20 ms tick each."""
    sent = []
    for _ in range(frames):
        pending = asyncio.ensure_future(output.paced_track.next_samples())
        await clock.advance(0.02)
        samples, _ = await asyncio.wait_for(pending, 1)
        sent.append(samples)
    return sent


async def test_engine_audio_leaves_paced_and_metered_to_its_end() -> None:
    clock = ManualClock()
    output = output_for(clock)
    await output.write(REPLY, 24_000, turn_id=1)
    output.end(1)
    sent = await send(output, clock, 12)
    loud = [i for i, frame in enumerate(sent) if np.abs(frame).max() > 1000]
    assert loud[0] == 0 and 9 <= loud[-1] <= 10 and not sent[-1].any()  # then silence
    reply = output.meter.reply(1)
    assert reply is not None and reply.ended and not reply.interrupted
    assert reply.first_sent_at_s == pytest.approx(0.02)
    assert output.stats()["sent_frames"] == 12 and output.buffer_frames() == {"jitter_buffer": 0}


async def test_stop_cuts_exactly_that_reply_and_is_idempotent() -> None:
    clock = ManualClock()
    output = output_for(clock)
    await output.write(REPLY, 24_000, turn_id=1)
    await send(output, clock, 3)
    output.stop(1)
    assert len(output.queue) == 0  # its queued audio is gone at once
    cut = output.meter.reply(1)
    assert cut is not None and cut.interrupted and cut.interrupted_sent_samples == 3 * 960
    await output.write(REPLY, 24_000, turn_id=2)  # the next reply plays
    queued = len(output.queue)
    assert queued >= 9 and output.queue.queued_turns() == [2]
    output.stop(1)  # again: nothing more is cut, reply 2 stays queued
    assert len(output.queue) == queued and output.meter.reply(1) == cut
    two = output.meter.reply(2)
    assert two is None or not two.interrupted


async def test_a_reply_heard_in_full_is_not_cut_by_a_late_stop() -> None:
    clock = ManualClock()
    output = output_for(clock)
    await output.write(REPLY[:480], 24_000, turn_id=1)  # one frame's worth
    output.end(1)
    await send(output, clock, 2)
    await output.write(REPLY, 24_000, turn_id=2)
    queued = len(output.queue)
    output.stop(1)  # the engine's stop came after reply 1 had played out
    one = output.meter.reply(1)
    assert one is not None and one.ended and not one.interrupted
    assert len(output.queue) == queued  # reply 2 is untouched


async def test_stop_without_a_reply_cuts_whatever_is_queued_or_written() -> None:
    clock = ManualClock()
    output = output_for(clock)
    await output.write(REPLY, 24_000, turn_id=1)
    output.end(1)
    await output.write(REPLY[:100], 24_000, turn_id=2)  # a partial frame being written
    output.stop()  # the page's stop control: names no reply
    assert len(output.queue) == 0
    one, two = output.meter.reply(1), output.meter.reply(2)
    assert one is not None and one.interrupted and two is not None and two.interrupted


async def test_a_live_queue_drops_its_oldest_beyond_its_slack() -> None:
    clock = ManualClock()
    output = output_for(clock, live=True)
    await output.write(tone(300, 1.0, rate=24_000), 24_000, turn_id=1)
    assert len(output.queue) == 1 + LIVE_SLACK_FRAMES
    reply = output.meter.reply(1)
    assert reply is not None and reply.discarded_samples == (50 - 1 - LIVE_SLACK_FRAMES) * 960


async def test_the_reply_handles_reach_the_output_attached_last() -> None:
    clock = ManualClock()
    meter = PlayoutMeter(clock)
    first = CallOutput(clock, meter, target_frames=1)
    await first.write(REPLY, 24_000, turn_id=1)
    second = CallOutput(clock, meter, target_frames=1)  # a resumed call takes the meter over
    await second.write(REPLY, 24_000, turn_id=2)
    first.close()  # the dropped call closes after: the meter stays with the second
    assert len(first.queue) == 0 and len(second.queue) > 0  # its close dropped its own only
    meter.open(2, UnplayedSound(2)).stop()  # the engine's barge-in (its reply's handle)
    assert len(second.queue) == 0
    second.close()
    unplayed = UnplayedSound(3)
    meter.open(3, unplayed).stop()  # parked: nothing plays it, it is only marked
    three = meter.reply(3)
    assert three is not None and three.interrupted and unplayed.stops == 1


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))


async def test_duck_lowers_that_reply_from_its_next_frame_and_restores_it_ramped() -> None:
    from omnicall.media.paced_track import RAMP_SAMPLES

    clock = ManualClock()
    plain, output = output_for(clock), output_for(clock)
    for out in (plain, output):
        await out.write(REPLY, 24_000, turn_id=1)
        out.end(1)
    reference = await send(plain, clock, 12)
    sent = await send(output, clock, 3)
    output.meter.open(1, UnplayedSound(1)).duck(0.25)  # the conversation's duck: the handle's
    sent += await send(output, clock, 1)
    first_ducked_at = output.meter.reply(1).last_sent_at_s  # type: ignore[union-attr]
    sent += await send(output, clock, 3)
    output.duck(1, 1.0)  # restored
    sent += await send(output, clock, 5)
    assert all(np.array_equal(a, b) for a, b in zip(sent[:3], reference[:3], strict=True))
    assert _rms(sent[3][RAMP_SAMPLES:]) == pytest.approx(
        0.25 * _rms(reference[3][RAMP_SAMPLES:]), rel=1e-3)  # after the ramp
    for i in (4, 5, 6):
        assert _rms(sent[i]) == pytest.approx(0.25 * _rms(reference[i]), rel=1e-3)
    loud = np.abs(reference[7][:RAMP_SAMPLES]) > 1000
    ramp = sent[7][:RAMP_SAMPLES][loud].astype(np.float64) / reference[7][:RAMP_SAMPLES][loud]
    assert ramp[0] < 0.5 < 0.9 < ramp[-1] and np.all(np.diff(ramp) > -0.01)  # rising
    assert np.array_equal(sent[7][RAMP_SAMPLES:], reference[7][RAMP_SAMPLES:])
    assert all(np.array_equal(a, b) for a, b in zip(sent[8:], reference[8:], strict=True))
    reply = output.meter.reply(1)
    assert reply is not None and reply.ended and not reply.interrupted
    assert reply.ducked_at_s == first_ducked_at and reply.ducked_samples == 4 * 960


async def test_a_duck_before_a_replys_first_frame_applies_and_spares_the_others() -> None:
    clock = ManualClock()
    plain, output = output_for(clock), output_for(clock)
    for out in (plain, output):
        await out.write(REPLY[:2400], 24_000, turn_id=1)  # 100 ms: five frames
        await out.write(REPLY, 24_000, turn_id=2)
        out.end(2)
    reference = await send(plain, clock, 20)
    output.duck(2, 0.5)  # reply 2 is only queued: kept for its turn
    sent = await send(output, clock, 20)
    one, two = output.meter.reply(1), output.meter.reply(2)
    assert one is not None and one.ducked_at_s is None and one.ducked_samples == 0
    ones = -(-one.sent_samples // 960)  # reply 1's frames (its last one padded)
    assert 5 <= ones <= 6
    for i in range(ones):  # reply 1's frames: untouched
        assert np.array_equal(sent[i], reference[i])
    for i in range(ones + 1, ones + 9):  # reply 2's, after the ramp in its first
        assert _rms(sent[i]) == pytest.approx(0.5 * _rms(reference[i]), rel=1e-3)
    assert two is not None and two.ended and two.ducked_at_s == two.first_sent_at_s
    assert two.ducked_samples == two.sent_samples
    assert len(output.paced_track.gains) == 0  # forgotten with reply 2's end
    output.duck(3, 0.5)
    output.stop(3)  # a stopped reply's duck is forgotten
    assert len(output.paced_track.gains) == 0


async def test_with_hold_ducked_a_duck_holds_the_reply_and_a_stop_drops_it_held() -> None:
    clock = ManualClock()
    plain, output = output_for(clock), output_for(clock, hold_ducked=True)
    for out in (plain, output):
        await out.write(REPLY, 24_000, turn_id=1)
        out.end(1)
    reference = await send(plain, clock, 12)
    sent = await send(output, clock, 3)
    output.meter.open(1, UnplayedSound(1)).duck(0.3)  # the conversation's duck: a hold here
    sent += await send(output, clock, 2)  # one frame fading out, then held
    waiting = len(output.queue)
    sent += await send(output, clock, 4)
    assert all(not s.any() for s in sent[4:]) and len(output.queue) == waiting > 0
    output.meter.open(1, UnplayedSound(1)).duck(1.0)
    sent += await send(output, clock, waiting + 1)
    # the caller heard every frame but the faded one, in order, the pause between
    assert all(np.array_equal(a, b) for a, b in zip(sent[10:15], reference[5:10], strict=True))
    reply = output.meter.reply(1)
    heard = plain.meter.reply(1)
    assert reply is not None and reply.ended and heard is not None
    assert reply.sent_samples == heard.sent_samples  # all of it, late
    assert output.paced_track.held_frames == 5
    # held, then cut: nothing more of it plays, and nothing stays held
    await output.write(REPLY, 24_000, turn_id=2)
    output.duck(2, 0.3)
    await send(output, clock, 3)
    output.stop(2)
    assert len(output.queue) == 0 and len(output.paced_track.gains) == 0
    # a live output (frames dropped when late) cannot hold: it lowers
    live = output_for(clock, hold_ducked=True, live=True)
    assert not live.paced_track.hold_ducked


async def _events(*events: EngineEvent) -> AsyncIterator[EngineEvent]:
    for event in events:
        yield event


async def test_a_stop_has_one_path_to_the_media_plane(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's barge-in reaches ``CallOutput.stop`` once, through the reply's sound
    handle; the page's stop control is the engine's interrupt (the same handle's stop), then
    one stop of whatever is still queued of replies the engine already ended; an interrupted
    end event is news for the page, not another stop. No other way flushes audio."""
    stops: list[int | None] = []
    stop = CallOutput.stop

    def spy(self: CallOutput, turn_id: int | None = None) -> None:
        stops.append(turn_id)
        stop(self, turn_id)

    monkeypatch.setattr(CallOutput, "stop", spy)
    engine = LoopbackEngine()
    config = ServerConfig(engine="loopback", ice_loopback=True, resume_window_s=0)
    call = CallSession("s1", config, engine, ManualClock(), lambda _: None)
    flushes: list[int] = []  # at each flush of the egress: how many stops had begun
    egress_flush = call.output.egress.flush

    def flush() -> int:
        flushes.append(len(stops))
        return egress_flush()

    call.output.egress.flush = flush  # type: ignore[method-assign]
    try:
        session = call.engine_session
        await wait_for(lambda: session._sound is not None)  # type: ignore[attr-defined]
        call.interrupt()  # the page's stop control (and a stalled reply)
        assert stops == [session.state.turn_id, None]  # type: ignore[attr-defined]
        playout = session.options.playout  # type: ignore[attr-defined]
        sound = playout.open(4, UnplayedSound(4))  # a reply's handle
        await sound.write(REPLY, 24_000)
        assert call.output.queue.queued_turns() == [4]  # straight in: no event queue
        sound.stop()  # the engine's barge-in
        assert len(stops) == 3 and stops[2] == 4
        await call.events.run(_events(TurnEvent("assistant", "end", 4, interrupted=True)))
        assert len(stops) == 3
        assert flushes == [2, 3]  # each flush came from inside a stop
        four = call.output.meter.reply(4)
        assert four is not None and four.interrupted and len(call.output.queue) == 0
    finally:
        await call.close()
        await engine.close()


async def test_every_frame_sent_is_the_echo_cancellers_reference() -> None:
    """With the call's echo canceller, each frame the paced track sends (its silence too)
    reaches it as the far end, with the moment it was sent."""
    from omnicall.media.echo_canceller import EchoCanceller, RoomSettings

    clock = ManualClock()
    room = EchoCanceller(RoomSettings(echo_cancellation=True, noise_suppression=False))
    output = output_for(clock, room=room)
    await output.write(REPLY, 24_000, turn_id=1)
    output.end(1)
    sent = await send(output, clock, 12)
    assert len(room._far) == 2 * len(sent)  # two 10 ms blocks a frame, none lost
    # only noise suppression: no reference is taken
    quiet = EchoCanceller(RoomSettings(echo_cancellation=False, noise_suppression=True))
    await send(output_for(clock, room=quiet), clock, 3)
    assert len(quiet._far) == 0


async def test_a_kiosk_call_with_duck_pause_holds_its_greeting_over_okay_then_plays_all_of_it(
        ) -> None:
    """A real call on the cascade (kiosk page: interruptions by words, the server's echo
    canceller) over a headset, with ``--duck pause`` (the default): "Okay." over the greeting holds
    it silent, the backchannel is recorded in the greeting's turn, and the greeting then
    plays on from where it stopped, to its end, none of it dropped (the hold was lifted by
    the listener, not by the track's bound). (In a loudspeaker room under pytest's load the
    canceller's pairing realigned often, its echo leaked, and the leaks paused the greeting
    too: the room bench measures that case, on its own.)"""
    from omnicall.app.app_state import CALLS_KEY
    from omnicall.app.config import ServerConfig
    from tests.room import (
        KIOSK_GREETING,
        RATE,
        RoomSpec,
        assistant_turns,
        room_call,
        until_heard,
    )
    from tests.utils import piper_speech, running_server, wait_for

    config = ServerConfig(engine="cascade", ice_loopback=True, port=0, resume_window_s=0,
                          greeting=KIOSK_GREETING, duck="pause")
    async with running_server(config) as (url, app):
        mic, client = await room_call(url, RoomSpec.drawn(5, echo_db=None), "kiosk")  # headset
        try:
            # 1.5 s of the greeting heard: past the echo warm-up, well before its end
            await until_heard(client, 1.5)
            mic.say(piper_speech("Okay.", rate=RATE, lead_s=0.0, tail_s=0.2))
            session = app[CALLS_KEY].sessions[client.session_id]
            meter, track = session.output.meter, session.output.paced_track
            greeting = assistant_turns(client.messages)[0]  # its start

            def played_out() -> bool:  # its sound sent to the end, or cut
                played = meter.reply(greeting["turn"])
                return played is not None and (played.ended or played.interrupted)

            await wait_for(played_out, timeout_s=60)
            played = meter.reply(greeting["turn"])
            await wait_for(lambda: len(assistant_turns(client.messages)) >= 2)
            greeting = assistant_turns(client.messages)[1]  # its end
        finally:
            await client.close()
    heard = [m for m in client.messages if m.get("type") == "transcript" and m.get("final")]
    assert [m["turn"] for m in heard] == [greeting["turn"]], heard  # recorded, no turn
    assert not greeting["interrupted"], greeting
    assert track.held_frames > 0 and track.released_holds == 0
    assert played is not None and played.ended and not played.interrupted
    assert played.discarded_samples == 0 and played.ducked_samples >= 960  # faded, not lost
