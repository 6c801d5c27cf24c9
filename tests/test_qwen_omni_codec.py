"""Chunked streaming code2wav: no boundary hole, equal to a one-shot decode."""

from __future__ import annotations

import torch

from omnicall.engine.qwen_omni.codec import CodecState, StreamingCode2Wav
from omnicall.engine.qwen_omni.model import OmniModel


def random_codes(frames: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2048, (16, frames), generator=generator)


def stream_decode(codec: StreamingCode2Wav, codes: torch.Tensor) -> list[torch.Tensor]:
    state = CodecState()
    chunks = []
    for index in range(codes.shape[-1]):
        codec.push(state, codes[:, index])
        final = index == codes.shape[-1] - 1
        if codec.ready(state, final):
            chunks.append(codec.decode(state, final))
    return chunks


def test_streamed_chunks_equal_one_shot_decode(omni: OmniModel) -> None:
    assert omni.code2wav is not None
    # left context >= the decoder's attention window (72 frames) + conv reach: exact
    window = int(omni.code2wav.config.sliding_window)
    codec = StreamingCode2Wav(omni.code2wav, left_context=window + 8, first_chunk=1, chunk=4)
    codes = random_codes(120)
    chunks = stream_decode(codec, codes)
    with torch.inference_mode():
        whole = omni.code2wav(codes.unsqueeze(0))[0, 0]
    streamed = torch.cat(chunks)
    assert streamed.shape == whole.shape  # nothing lost at the 30 chunk boundaries
    assert torch.allclose(streamed, whole, atol=1e-6, rtol=0)
    assert chunks[0].shape[-1] == 1920 - codec.tail  # first audio after one frame
    assert codec.tail > 0


def test_library_chunked_decode_loses_samples_per_boundary(omni: OmniModel) -> None:
    """The pitfall this module exists for: the library's chunks drop ``tail`` samples each."""
    assert omni.code2wav is not None
    codec = StreamingCode2Wav(omni.code2wav)
    codes = random_codes(40, seed=1).unsqueeze(0)
    with torch.inference_mode():
        whole = omni.code2wav(codes)
        library = omni.code2wav.chunked_decode(codes, chunk_size=10, left_context_size=5)
    assert whole.shape[-1] - library.shape[-1] == 3 * codec.tail
    assert torch.cat(stream_decode(codec, codes[0])).shape[-1] == whole.shape[-1]


def test_codec_memory_is_bounded(omni: OmniModel) -> None:
    assert omni.code2wav is not None
    codec = StreamingCode2Wav(omni.code2wav, left_context=8, chunk=4)
    state = CodecState()
    codes = random_codes(100, seed=2)
    for index in range(codes.shape[-1]):
        codec.push(state, codes[:, index])
        if codec.ready(state, False):
            codec.decode(state)
        assert len(state.codes) <= 8 + 4
