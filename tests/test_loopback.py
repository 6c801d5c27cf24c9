import asyncio

import numpy as np

from omnicall.engine.base import SessionOptions
from omnicall.engine.events import AssistantAudio, TurnEvent
from omnicall.engine.loopback import LoopbackEngine
from omnicall.media.aligner import MediaUnit
from tests.utils import tone


async def test_echo_returns_each_frame_at_24k_after_one_frame() -> None:
    engine = LoopbackEngine()
    await engine.start()
    session = engine.open_session("s", SessionOptions())
    audio = tone(500, 0.8)
    for i in range(10):
        assert session.push(MediaUnit(i, audio[i * 1280:(i + 1) * 1280]))
    events = []

    async def collect() -> None:
        async for ev in session.events():
            events.append(ev)
            if sum(isinstance(e, AssistantAudio) for e in events) == 10:
                return

    await asyncio.wait_for(collect(), 5)
    assert isinstance(events[0], TurnEvent)
    out = np.concatenate([e.samples for e in events if isinstance(e, AssistantAudio)])
    assert len(out) == 0.8 * 24_000  # 80 ms in, 80 ms out: nothing held back
    spectrum = np.abs(np.fft.rfft(out.astype(float)))
    assert abs(np.argmax(spectrum) * 24_000 / len(out) - 500) < 5
    await session.close()
    await engine.close()


async def test_full_input_queue_refuses_and_interrupt_flushes() -> None:
    engine = LoopbackEngine()
    session = engine.open_session("s", SessionOptions(input_queue_frames=3))
    frame = np.zeros(1280, np.int16)
    # the processing task has not run yet: the queue fills
    results = [session.push(MediaUnit(i, frame)) for i in range(5)]
    assert results == [True, True, True, False, False]
    session.interrupt()
    assert session.push(MediaUnit(5, frame))
    await session.close()
    assert [e async for e in session.events()] == []  # closed: iteration ends
    await engine.close()
