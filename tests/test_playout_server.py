"""What the caller heard, over a real aiortc call: the playout meter's count of a reply is
what the client received of it, whether the reply played to its end or was interrupted.

The engine speaks one reply of a known length (a 1 kHz tone, so the client can find it in
what it decoded) once the test says so; the client's received span of it is compared with
the meter. Tolerance: :data:`TOLERANCE_SAMPLES`, one 20 ms frame plus Opus's 6.5 ms
algorithmic delay (1272 samples). Measured on the loopback, also with both cores busy: the
client's span is 35 (played out) and 34 (interrupted) samples shorter than the meter's count,
under 1 ms: the resampler's 32-sample delay, which the meter counts as part of the reply's
stream, and the tone's zero crossings at its edges.
"""

from __future__ import annotations

import asyncio

import numpy as np

from omnicall.app.app_state import CALLS_KEY
from omnicall.app.call.session import CallSession
from omnicall.app.config import ServerConfig
from omnicall.client import Call, Microphone, connect
from omnicall.engine.base import EngineSession, SessionOptions
from omnicall.engine.conversation.reply_gate import open_sound
from omnicall.engine.events import TurnEvent
from omnicall.engine.loopback import LoopbackEngine, LoopbackSession
from omnicall.media.clock import MonotonicClock
from omnicall.media.playout import ReplyPlayout
from omnicall.media.resample import StreamConverter
from tests.utils import UnplayedSound, running_server, tone, wait_for

REPLY_TURN = 1
REPLY_HZ = 1000
LOUD = 2000  # the tone's amplitude is ~9800; decoded silence stays far below this
OPUS_DELAY_SAMPLES = 312  # 6.5 ms at 48 kHz
TOLERANCE_SAMPLES = 960 + OPUS_DELAY_SAMPLES
QUIET_AFTER_SAMPLES = 9600  # 200 ms of silence received after the reply: all of it arrived
CONFIG = ServerConfig(engine="loopback", ice_loopback=True, resume_window_s=0)


class ReplySession(LoopbackSession):
    """Says nothing until ``engine.go`` is set, then one reply: ``engine.reply_s`` of the
    tone at 24 kHz in 80 ms chunks, and its end. The caller's audio is consumed unheard."""

    engine: ReplyEngine

    async def process(self) -> None:
        drain = asyncio.ensure_future(self._drain_inputs())
        try:
            await self.engine.go.wait()
            await self.emit(TurnEvent("assistant", "start", REPLY_TURN))
            # the reply's sound handle (the loopback's interrupt stops it)
            self._sound = sound = open_sound(REPLY_TURN, self.emit, self.options.playout)
            reply = tone(REPLY_HZ, self.engine.reply_s, rate=24_000)
            for pts in range(0, len(reply), 1920):
                await sound.write(reply[pts:pts + 1920], 24_000)
            sound.end()
            await self.emit(TurnEvent("assistant", "end", REPLY_TURN))
            await drain
        finally:
            drain.cancel()

    async def _drain_inputs(self) -> None:
        while True:
            await self.state.inputs.get()


class ReplyEngine(LoopbackEngine):
    realtime_output = False  # generated ahead: the whole reply waits in the jitter buffer

    def __init__(self, reply_s: float) -> None:
        super().__init__()
        self.reply_s = reply_s
        self.go = asyncio.Event()

    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        session = ReplySession(session_id, options, self._worker)
        session.engine = self
        return session


def loud_span(call: Call) -> tuple[int, int] | None:
    """(received samples of the reply, received samples after it), or None before it."""
    audio = call.received_audio()
    loud = np.flatnonzero(np.abs(audio.astype(np.int32)) > LOUD)
    if not len(loud):
        return None
    return int(loud[-1] - loud[0] + 1), int(len(audio) - loud[-1] - 1)


def stream_samples(reply_s: float) -> int:
    """The reply's length at 48 kHz as the egress converts it: with the resampler's delay."""
    reply = tone(REPLY_HZ, reply_s, rate=24_000)
    converter = StreamConverter(48_000)
    out = sum(len(converter.convert(reply[i:i + 1920], 24_000))
              for i in range(0, len(reply), 1920))
    return out + len(converter.flush())


def heard_in_full(call: Call) -> bool:
    span = loud_span(call)
    return span is not None and span[1] >= QUIET_AFTER_SAMPLES


async def start_call(url: str, app: object, engine: ReplyEngine) -> tuple[Call,
                                                                          CallSession]:
    call = await connect(url, Microphone())  # the caller stays silent
    registry = app[CALLS_KEY]  # type: ignore[index]
    await wait_for(lambda: call.session_id in registry.sessions)
    session: CallSession = registry.sessions[call.session_id]
    assert session.engine_session.options.playout is session.output.meter  # type: ignore[attr-defined]
    # the server's audio reaches the client before the reply starts: none of it is lost
    await wait_for(lambda: len(call.received) >= 10, timeout_s=15)
    engine.go.set()
    return call, session


def playout(session: CallSession) -> ReplyPlayout:
    reply = session.output.meter.reply(REPLY_TURN)
    assert reply is not None
    return reply


async def test_a_reply_played_to_its_end_is_counted_as_received() -> None:
    engine = ReplyEngine(reply_s=0.99)  # ~47520 samples at 48 kHz: the last frame is padded
    async with running_server(CONFIG, engine=engine) as (url, app):
        call, session = await start_call(url, app, engine)
        await wait_for(lambda: session.output.meter.reply(REPLY_TURN) is not None
                       and playout(session).ended and heard_in_full(call), timeout_s=30)
        reply = playout(session)
        span = loud_span(call)
        await call.close()
    assert span is not None
    assert reply.sent_samples == stream_samples(engine.reply_s) and not reply.interrupted
    assert reply.discarded_samples == 0
    assert reply.first_sent_at_s is not None and reply.ended_at_s is not None
    # the end is dated when the last frame left, not when the engine ended the reply (it was
    # generated ahead: its end came while the first frames were still queued)
    assert reply.ended_at_s == reply.last_sent_at_s > reply.first_sent_at_s
    # measured: the client's span is 35 samples shorter (the resampler's 32-sample delay,
    # sent as leading silence, and a tone's zero crossing under LOUD at each edge)
    assert abs(span[0] - reply.sent_samples) <= TOLERANCE_SAMPLES, (span, reply)


async def test_an_interrupted_reply_counts_what_left_before_the_flush() -> None:
    engine = ReplyEngine(reply_s=3.0)
    async with running_server(CONFIG, engine=engine) as (url, app):
        call, session = await start_call(url, app, engine)
        await wait_for(lambda: session.output.meter.reply(REPLY_TURN) is not None
                       and playout(session).sent_samples >= 24_000, timeout_s=30)
        queued = len(session.output.queue)
        before = playout(session).sent_samples
        session.interrupt()  # what the page's "interrupt" control does
        cut = playout(session)
        await wait_for(lambda: heard_in_full(call), timeout_s=30)
        after = playout(session)
        span = loud_span(call)
        await call.close()
    assert queued > 0  # the reply was generated ahead: the flush cut it mid-way
    assert cut.interrupted and cut.interrupted_sent_samples == before
    assert cut.interrupted_at_s is not None and not cut.ended
    assert after.sent_samples == before < 3 * 48_000  # nothing of it left after the flush
    assert before % 960 == 0  # whole frames only: no padded end was sent
    assert span is not None
    # measured: 34 samples shorter (as above: the cut edge costs no more than the start)
    assert abs(span[0] - before) <= TOLERANCE_SAMPLES, (span, after)


async def test_a_resumed_engine_session_keeps_measuring_into_its_meter() -> None:
    engine = LoopbackEngine()
    first = CallSession("s1", CONFIG, engine, MonotonicClock(), lambda _: None,
                        park=lambda _: True)
    options = first.engine_session.options  # type: ignore[attr-defined]
    assert options.playout is first.output.meter
    second = CallSession("s1", CONFIG, engine, MonotonicClock(), lambda _: None,
                         resume=first.parked())
    assert second.engine_session is first.engine_session
    assert second.output.meter is first.output.meter
    assert second.output.egress.meter is first.output.meter
    await first.close()  # parks the engine session (kept for the second)
    # the engine's barge-in reaches the resumed call's output, not the closed one's
    stops: list[int | None] = []
    second.output.stop = stops.append  # type: ignore[method-assign]
    options.playout.open(7, UnplayedSound(7)).stop()
    assert stops == [7]
    await second.close()
    await engine.close()
