"""One barge-in over a real call, measured at both ends (tests/test_barge_in_server.py and
bench/barge_in.py).

A real aiortc client asks a question that gets a long answer, waits until it has heard
``after_s`` of the answer, and speaks over it. The engine stops the reply and says, in its
interrupted end event (``heard_ms``), how much of it the caller heard: that is what it kept
(its memory, the server's truncation). The client's side is found in the audio it decoded
(:mod:`tests.reply_span`), against the reply as the engine made it, taken at the server's
egress. The two should agree: the truncation error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from omnicall.app.app_state import CALLS_KEY
from omnicall.client import Microphone, connect
from tests.reply_span import received_interval_ms, reference_48k, truncation_error_ms
from tests.utils import piper_speech, wait_for

STORY = "Please tell me a long story about a dragon and a brave knight."
INTERRUPTION = "Wait, stop please."
LOUD = 800
# after the cut, this many more frames reach the client before it is measured: the server
# sends a frame (silence, or the next reply) every 20 ms, and aiortc's receiver holds the
# last 4 it got until 4 later ones arrive, so what was sent before the cut is decoded by
# then. Counted, not slept: a loaded machine delays the frames, never their order.
SETTLE_FRAMES = 40
SETTLE_TIMEOUT_S = 15.0


@dataclass
class ReplyTap:
    """The engine audio a call's egress was given, per reply (``turn_id``), in order."""

    chunks: dict[int | None, list[tuple[np.ndarray, int]]] = field(default_factory=dict)

    def attach(self, session: Any) -> None:
        egress = session.output.egress
        write = egress.write

        async def tapped(samples: np.ndarray, rate_hz: int, turn_id: int | None = None) -> None:
            self.chunks.setdefault(turn_id, []).append((samples.copy(), rate_hz))
            await write(samples, rate_hz, turn_id=turn_id)

        egress.write = tapped


@dataclass(frozen=True)
class BargeIn:
    after_s: float
    heard_ms: int  # what the engine kept of the reply
    received_ms: tuple[float, float] | None  # what the client received of it (lo, hi)
    reply_ms: float  # the reply as the engine had made it

    @property
    def error_ms(self) -> float:
        if self.received_ms is None:
            return float("inf")
        return truncation_error_ms(self.heard_ms, self.received_ms)


def _interrupted_end(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((m for m in messages if m.get("type") == "turn" and m.get("role") == "assistant"
                 and m.get("phase") == "end" and m.get("interrupted")), None)


async def barge_in(url: str, app: Any, after_s: float, question: str = STORY,
                   timeout_s: float = 60.0) -> BargeIn:
    """Ask ``question`` on a new call to the server at ``url`` (running in this process as
    ``app``), speak over the answer ``after_s`` after its first sound reached the client,
    and measure."""
    mouth = Microphone(loud=LOUD)
    call = await connect(url, mouth)
    tap = ReplyTap()
    try:
        sessions = app[CALLS_KEY].sessions
        await wait_for(lambda: call.session_id in sessions, timeout_s=10)
        tap.attach(sessions[call.session_id])
        await asyncio.sleep(0.5)
        mouth.say(piper_speech(question, rate=48_000, lead_s=0.2, tail_s=0.0))
        await wait_for(lambda: mouth.speech_end_at is not None, timeout_s=30)
        asked = len(call.received)
        await wait_for(lambda: any(int(np.abs(f).max()) > LOUD for f in call.received[asked:]),
                       timeout_s=timeout_s)
        await asyncio.sleep(after_s)
        mouth.say(piper_speech(INTERRUPTION, rate=48_000, lead_s=0.0, tail_s=0.0))
        await wait_for(lambda: _interrupted_end(call.messages) is not None, timeout_s=20)
        settled = len(call.received) + SETTLE_FRAMES
        await wait_for(lambda: len(call.received) >= settled, timeout_s=SETTLE_TIMEOUT_S)
        received = call.received_audio()
        end = _interrupted_end(call.messages)
    finally:
        await call.close()
    assert end is not None
    if end.get("heard_ms") is None:
        raise AssertionError(f"the engine did not say what it kept: {end}")
    reference = reference_48k(tap.chunks.get(end["turn"], []))
    return BargeIn(after_s, int(end["heard_ms"]), received_interval_ms(received, reference),
                   len(reference) * 1000 / 48_000)
