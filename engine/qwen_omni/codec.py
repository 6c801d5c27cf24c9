"""code2wav in small causal chunks, without the library's chunk-boundary hole.

The decoder is causal (causal convolutions, causal transposed convolutions, sliding-window
attention), so the samples of frame ``t`` depend only on frames ``<= t``. Decoding frames
``[s - ctx, e)`` and keeping the output from frame ``s`` on gives frame ``s``'s samples, *but*
the last ``tail`` samples (555 for the released geometry) of any decode are incomplete: the
causal transposed convolutions trim them and they are only finished once later frames exist.
The library's ``chunked_decode`` drops ``ctx * 1920`` samples of each new chunk and so loses
those ``tail`` samples at every boundary (a ~23 ms hole). Here each chunk emits everything
except its incomplete tail, and the next chunk starts its output ``tail`` samples earlier.

``tail`` is measured from the model (decode two frames, count the samples short of 3840), not
hard-coded. With ``left_context`` at least the decoder's receptive field (its 72-frame
attention window plus a few frames of convolution) the streamed waveform equals a one-shot
decode up to float rounding; that is the default (80 frames for the released geometry). 25
frames, the released chunked decode's choice, is cheaper but differs slightly from a one-shot
decode after 2 s, as the library's own chunking does. The tests check both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

LIBRARY_LEFT_CONTEXT = 25  # frames (2 s): the released chunked decode's choice
CONV_REACH_FRAMES = 8  # frames the causal convolutions reach back (a few, rounded up)
DEFAULT_FIRST_CHUNK = 1  # frames: the first audio after one 80 ms frame
DEFAULT_CHUNK = 4  # frames per decode after the first


@dataclass
class CodecState:
    codes: list[torch.Tensor] = field(default_factory=list)  # (16,) per frame
    emitted_frames: int = 0  # frames whose complete samples have been emitted


class StreamingCode2Wav:
    def __init__(self, code2wav: torch.nn.Module, left_context: int | None = None,
                 first_chunk: int = DEFAULT_FIRST_CHUNK, chunk: int = DEFAULT_CHUNK) -> None:
        """``left_context`` None: the decoder's attention window + conv reach (exact)."""
        self.code2wav = code2wav
        self.samples_per_frame = int(code2wav.total_upsample)  # type: ignore[arg-type]
        if left_context is None:
            window = getattr(code2wav.config, "sliding_window", None) or LIBRARY_LEFT_CONTEXT
            left_context = int(window) + CONV_REACH_FRAMES
        self.left_context = left_context
        self.first_chunk = first_chunk
        self.chunk = chunk
        self.tail = self._measure_tail()

    def _measure_tail(self) -> int:
        config: Any = self.code2wav.config
        quantizers = int(config.num_quantizers)
        device = next(self.code2wav.parameters()).device
        with torch.no_grad():
            wav = self.code2wav(torch.zeros((1, quantizers, 2), dtype=torch.long, device=device))
        return 2 * self.samples_per_frame - int(wav.shape[-1])

    def ready(self, state: CodecState, final: bool) -> bool:
        pending = len(state.codes) - state.emitted_frames
        if pending <= 0:
            return False
        if final:
            return True
        need = self.first_chunk if state.emitted_frames == 0 else self.chunk
        return pending >= need

    def push(self, state: CodecState, codes: torch.Tensor) -> None:
        state.codes.append(codes)

    def decode(self, state: CodecState, final: bool = False) -> torch.Tensor:
        """Waveform (float32, 24 kHz, 1-D) for the frames pushed since the last call.

        Every decode is short of its last ``tail`` samples (see the module notes); the next
        chunk starts that much earlier, so consecutive chunks join without a gap."""
        total = len(state.codes)
        start = state.emitted_frames
        if total <= start:
            return torch.zeros(0)
        ctx = min(self.left_context, start)
        codes = torch.stack(state.codes[start - ctx:total], dim=-1).unsqueeze(0)  # (1, 16, n)
        with torch.no_grad():
            wav = self.code2wav(codes)[0, 0]
        # samples before this chunk already emitted: all of the context except its tail
        first = ctx * self.samples_per_frame - (self.tail if start > 0 else 0)
        first = max(first, 0)
        out = wav[first:].float()
        state.emitted_frames = total
        if len(state.codes) > self.left_context:
            # keep only what the next chunk's left context needs (bounded memory)
            drop = len(state.codes) - self.left_context
            state.codes = state.codes[drop:]
            state.emitted_frames -= drop
        return out
