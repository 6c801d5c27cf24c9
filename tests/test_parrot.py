"""examples/parrot.py: a plug-in engine that gets its turn-taking from the conversation layer
(listener, reply gate) and nothing else, over a real aiortc call."""

from __future__ import annotations

import numpy as np

from examples.parrot import SPEED, ParrotEngine, parrot_voice
from omnicall.app.config import ServerConfig
from omnicall.engine.conversation.settings import TurnSettings
from tests.barge_in import barge_in
from tests.utils import running_server, tone


def test_the_parrot_voice_is_the_turn_played_faster() -> None:
    turn = tone(200, 2.0)
    voice = parrot_voice(turn)
    assert abs(len(voice) - len(turn) / SPEED) <= 1
    spectrum = np.abs(np.fft.rfft(voice.astype(np.float64)))
    peak_hz = np.argmax(spectrum) * 16_000 / len(voice)
    assert abs(peak_hz - 200 * SPEED) < 5  # higher by the same factor
    assert len(parrot_voice(np.zeros(0, np.int16))) == 0


async def test_a_plug_in_engine_takes_turns_and_barge_ins_like_the_built_in_ones() -> None:
    engine = ParrotEngine(TurnSettings(turn_model="fixed"))
    config = ServerConfig(engine="loopback", ice_loopback=True, resume_window_s=0)
    async with running_server(config, engine=engine) as (url, app):
        cut = await barge_in(url, app, after_s=1.2)
    # the parrot repeated the question (~3.5 s at 1.25x) and was stopped 1.2 s into it,
    # keeping what the client had received of it
    assert cut.received_ms is not None and cut.reply_ms > 2500, cut
    assert 1000 < cut.heard_ms < cut.reply_ms - 500, cut
    assert cut.error_ms <= 40, cut
