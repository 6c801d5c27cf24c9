"""The client-side measure of a reply (tests/reply_span.py) on a known case: the bundled voice
through the server's own Opus encoder and a real decoder, delayed, stretched by an underrun,
and cut at a known sample."""

from __future__ import annotations

import av
import numpy as np
import pytest

from omnicall.media.opus_encoder import SpeechOpusEncoder
from tests.reply_span import RATE_HZ, received_interval_ms, reference_48k, truncation_error_ms
from tests.utils import piper_speech

BLOCK = 960
CODEC_TAIL_MS = 8


def through_opus(signal: np.ndarray) -> np.ndarray:
    encoder = SpeechOpusEncoder()
    decoder = av.CodecContext.create("libopus", "r")
    decoder.sample_rate, decoder.layout = RATE_HZ, "mono"
    padded = np.concatenate([signal, np.zeros(-len(signal) % BLOCK, np.int16)])
    out = [frame.to_ndarray().reshape(-1)
           for k in range(len(padded) // BLOCK)
           for frame in decoder.decode(encoder.encode(padded[k * BLOCK:(k + 1) * BLOCK],
                                                      k * BLOCK))]
    return np.concatenate(out).astype(np.int16)


@pytest.fixture(scope="module")
def reply() -> np.ndarray:
    speech = piper_speech("Once upon a time a brave knight rode out to find the dragon that "
                          "had burned the village.", rate=24_000, lead_s=0.0, tail_s=0.0)
    return reference_48k([(speech[i:i + 1920], 24_000) for i in range(0, len(speech), 1920)])


def client_stream(reference: np.ndarray, cut: int, gap_at: int, gap: int) -> np.ndarray:
    """What the paced track sends: silence, the reply up to ``cut`` with ``gap`` samples of
    underrun at ``gap_at``, then silence; through Opus."""
    sent = np.concatenate([np.zeros(12 * BLOCK, np.int16), reference[:gap_at],
                           np.zeros(gap, np.int16), reference[gap_at:cut],
                           np.zeros(100 * BLOCK, np.int16)])
    return through_opus(sent)


@pytest.mark.parametrize(("cut_ms", "gap_at_blocks", "gap_blocks"),
                         [(900, 30, 7), (1460, 30, 60), (2230, 30, 7), (1500, 5, 3)])
def test_the_interval_holds_the_cut_and_follows_an_underrun(reply: np.ndarray, cut_ms: int,
                                                            gap_at_blocks: int,
                                                            gap_blocks: int) -> None:
    # an underrun of 140 ms or of 1.2 s, 0.6 s into the reply; or of 60 ms inside its first
    # 0.3 s of sound (where the reply's start is looked for)
    cut = cut_ms * RATE_HZ // 1000
    interval = received_interval_ms(client_stream(reply, cut, gap_at=gap_at_blocks * BLOCK,
                                                  gap=gap_blocks * BLOCK), reply)
    assert interval is not None
    lo, hi = interval
    # Opus's decoder rings on for a few ms after a loud cut (measured: 0-5 ms late)
    assert lo - CODEC_TAIL_MS <= cut_ms <= hi + CODEC_TAIL_MS, interval
    assert truncation_error_ms(cut_ms, interval) <= CODEC_TAIL_MS
    assert truncation_error_ms(cut_ms + 200, interval) > 100  # a wrong count is seen


def test_a_reply_received_in_full_spans_its_length(reply: np.ndarray) -> None:
    interval = received_interval_ms(client_stream(reply, len(reply), 10 * BLOCK, 0), reply)
    assert interval == (len(reply) * 1000 / RATE_HZ,) * 2


def test_a_reply_that_never_arrived_is_not_found(reply: np.ndarray) -> None:
    assert received_interval_ms(np.zeros(RATE_HZ * 4, np.int16), reply) is None


def test_a_cut_in_a_pause_after_a_fade_the_codec_lowered_spans_the_pause(
        reply: np.ndarray) -> None:
    """The reply fades into a pause (the end of a sentence, 160 ms of silence, the next one)
    and is cut inside it; the client's decoder lowered the fade (here: its output at 60 %), so
    the fade drops under LOUD_SAMPLE a little earlier than in the reference. The client still
    received that fade: the interval runs to the end of the pause, not to the reference's
    next loud sample after the last received one."""
    pause = 8 * BLOCK
    two = np.concatenate([reply, np.zeros(pause, np.int16), reply])
    cut = len(reply) + pause // 2
    received = (client_stream(two, cut, gap_at=0, gap=0) * 0.6).astype(np.int16)
    interval = received_interval_ms(received, two)
    assert interval is not None
    lo, hi = interval
    cut_ms = cut * 1000 / RATE_HZ
    assert lo <= cut_ms <= hi, (interval, cut_ms)
    assert hi >= (len(reply) + pause) * 1000 / RATE_HZ, interval  # the whole pause
