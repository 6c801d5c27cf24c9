import numpy as np

from media.egress import AudioEgress
from media.jitter_buffer import JitterBuffer
from tests.utils import tone


async def test_engine_frames_become_wire_frames_streaming_equals_batch() -> None:
    reply = tone(300, 0.8, rate=24_000)
    streamed = AudioEgress(JitterBuffer(target_frames=1))
    for i in range(0, len(reply), 1920):
        await streamed.write(reply[i:i + 1920], 24_000)
    streamed.end_utterance()
    batch = AudioEgress(JitterBuffer(target_frames=1))
    await batch.write(reply, 24_000)
    batch.end_utterance()

    def drain(jb: JitterBuffer) -> np.ndarray:
        out = []
        while (f := jb.pop()) is not None:
            out.append(f)
        return np.concatenate(out)

    a, b = drain(streamed.jitter), drain(batch.jitter)
    assert len(a) == len(b) == 0.8 * 48_000 + 960  # + the resampler's delay, padded
    assert np.array_equal(a, b)
    assert streamed.jitter.underruns == 0


async def test_each_80ms_block_gives_four_frames_at_once() -> None:
    """The resampler's filter delay is paid once as leading silence: no block's last frame
    waits for the next block (that held every reply back by a frame)."""
    egress = AudioEgress(JitterBuffer(target_frames=1))
    reply = tone(300, 0.4, rate=24_000)
    for n, i in enumerate(range(0, len(reply), 1920), start=1):
        await egress.write(reply[i:i + 1920], 24_000)
        assert len(egress.jitter) == 4 * n


async def test_partial_tail_is_padded_on_end() -> None:
    egress = AudioEgress(JitterBuffer(target_frames=5))
    await egress.write(np.ones(100, np.int16) * 1000, 48_000)
    assert len(egress.jitter) == 0
    egress.end_utterance()
    assert len(egress.jitter) == 1
    frame = egress.jitter.pop()
    assert frame is not None and frame[:100].min() == 1000 and not frame[100:].any()


async def test_flush_drops_queued_and_partial() -> None:
    egress = AudioEgress(JitterBuffer(target_frames=1))
    await egress.write(tone(300, 0.5, rate=24_000), 24_000)
    assert egress.flush() > 0
    assert len(egress.jitter) == 0 and egress.jitter.pop() is None
    egress.end_utterance()  # nothing partial left to pad
    assert len(egress.jitter) == 0


async def test_write_waits_while_full() -> None:
    import asyncio
    jb = JitterBuffer(target_frames=1, capacity_frames=2)
    egress = AudioEgress(jb)
    writer = asyncio.ensure_future(egress.write(np.zeros(960 * 4, np.int16), 48_000))
    await asyncio.sleep(0.01)
    assert not writer.done() and len(jb) == 2
    jb.pop()
    jb.pop()
    await asyncio.wait_for(writer, 1)
    assert len(jb) == 2
