"""Cross-call batching of decode steps in the native engine."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from omnicall.engine.base import SessionOptions
from omnicall.engine.events import AssistantAudio, TurnEvent
from omnicall.engine.qwen_omni.batcher import run_steps
from omnicall.engine.qwen_omni.engine import QwenOmniEngine
from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.reply import ReplyOptions, ReplyStream
from omnicall.engine.qwen_omni.settings import OmniSettings
from omnicall.engine.qwen_omni.talker import GREEDY, Talker
from tests.cascade_fixtures import Recorder
from tests.qwen_fixtures import noise, prefill_audio_turn
from tests.utils import feed_units, piper_speech, wait_for


def test_run_steps_is_fair_and_stops_a_call_at_new_audio(omni: OmniModel) -> None:
    from omnicall.engine.qwen_omni import thinker as th

    talker = Talker(omni, GREEDY)
    streams = []
    for seconds in (1.0, 2.0):
        state = th.ThinkerState()
        prefill_audio_turn(omni, state, noise(seconds))
        streams.append(ReplyStream(omni, state, ReplyOptions(8, 8), talker=talker))
    results = run_steps(streams, steps=4)
    assert [len(r) for r in results] == [2, 2]  # step 1: prefill; step 2: first audio
    assert all(r[-1].audio is not None for r in results)
    assert all(len(r[0].tokens) == 1 for r in results)


async def test_two_calls_answering_at_once_share_decode_batches(omni_dir: Path) -> None:
    engine = QwenOmniEngine(OmniSettings(model=str(omni_dir), max_new_tokens=30, max_frames=30,
                                         captions=False))
    engine._load()
    sessions = [engine.open_session(f"b{i}", SessionOptions()) for i in range(2)]
    try:
        recorders = [Recorder(s) for s in sessions]
        speech = piper_speech("Please describe the weather today.")
        silence = np.zeros(16_000, np.int16)
        await asyncio.gather(*(feed_units(s, np.concatenate([speech, silence]))
                               for s in sessions))
        await wait_for(lambda: all(any(e.role == "assistant" and e.phase == "end"
                                       for e in r.of(TurnEvent)) for r in recorders),
                       timeout_s=90)
        assert all(r.of(AssistantAudio) for r in recorders)
        batcher = engine.batcher
        assert batcher.jobs > 0
        assert batcher.batched_calls > batcher.jobs  # mean batch size above one
    finally:
        for session in sessions:
            await session.close()
        await engine.close()
