"""A call's conversation in the Thinker: the chat template's pieces and what is kept of a reply.

Pure and synchronous (no I/O, no event loop): each function works on one
:class:`~omnicall.engine.qwen_omni.thinker.ThinkerState`; the session runs them in order on
the model worker (:mod:`omnicall.engine.qwen_omni.session`) and the engine's warm-up runs the
same ones. The template is Qwen3-Omni's: ``<|im_start|>system\\n...<|im_end|>\\n``, then per
user turn ``<|im_start|>user\\n<|audio_start|>`` + audio (and video) segments +
``<|audio_end|><|im_end|>\\n``, then ``<|im_start|>assistant\\n`` + the reply + ``<|im_end|>\\n``.
"""

from __future__ import annotations

import numpy as np
import torch

from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.vision import patchify, video_segment_ids
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ, OUTPUT_RATE_HZ

#: audio shorter than this (20 ms) is not worth an audio-encoder pass
MIN_AUDIO_SAMPLES = INPUT_RATE_HZ // 50


def system_ids(m: OmniModel, persona: str) -> list[int]:
    return [m.im_start_id, *m.encode(f"system\n{persona}"), m.im_end_id, *m.encode("\n")]


def user_open_ids(m: OmniModel) -> list[int]:
    """The start of a user turn (its audio segment opens separately, after any video)."""
    return [m.im_start_id, m.user_id, *m.encode("\n")]


def user_close_ids(m: OmniModel) -> list[int]:
    """The end of the user turn and the assistant prefix a reply streams from."""
    return [m.audio_end_id, m.im_end_id, *m.encode("\n"), m.im_start_id, m.assistant_id,
            *m.encode("\n")]


def append_ids(m: OmniModel, state: th.ThinkerState, ids: list[int]) -> None:
    with torch.inference_mode():
        th.append(m, state, ids)


def append_audio(m: OmniModel, state: th.ThinkerState, samples: Int16Array) -> None:
    """One run of the caller's speech (16 kHz) as an audio segment."""
    if len(samples) < MIN_AUDIO_SAMPLES:
        return
    with torch.inference_mode():
        features = m.audio_features(samples)
        th.append(m, state, [m.audio_id] * m.audio_tokens(features.shape[-1]), "audio",
                  input_features=features, media_s=len(samples) / INPUT_RATE_HZ)


def append_video(m: OmniModel, state: th.ThinkerState, frames: list[np.ndarray], fps: float,
                 max_pixels: int) -> None:
    """Sampled RGB frames as one video segment."""
    with torch.inference_mode():
        clip = patchify(m, frames, fps, max_pixels)
        th.append(m, state, video_segment_ids(m, clip), "video",
                  pixel_values_videos=clip.pixel_values, video_grid_thw=clip.grid_thw,
                  video_second_per_grid=clip.second_per_grid, media_s=len(frames) / fps)


def rollback(state: th.ThinkerState, mark: int) -> None:
    """Back to ``mark`` tokens (a cancelled speculation: before the user turn was closed)."""
    with torch.inference_mode():
        th.truncate(state, mark)


def heard_tokens(frames_at: list[tuple[int, int]], heard_ms: int, generated: int) -> int:
    """Reply tokens the caller heard: those the Talker had voiced by the last chunk of sound
    that played out within ``heard_ms``. ``frames_at``: per chunk, in order, (samples of the
    reply's sound at 24 kHz out after it, reply tokens the Talker had consumed by then)."""
    tokens = 0
    for samples, fed in frames_at:
        if samples * 1000 <= heard_ms * OUTPUT_RATE_HZ:
            tokens = fed
    return min(tokens, generated)


def close_reply(m: OmniModel, state: th.ThinkerState, prompt_length: int, reply: list[int],
                keep: int, window_s: float, protect_from: int | None) -> None:
    """Keep the first ``keep`` of the ``reply`` tokens after ``prompt_length`` and close the
    assistant message; then evict media beyond ``window_s``, never at or after token
    ``protect_from`` (the turn being heard; None: none)."""
    with torch.inference_mode():
        forwarded = state.length - prompt_length
        kept = min(keep, forwarded)
        th.truncate(state, prompt_length + kept)
        # the final token is never forwarded: voiced, it is appended here
        tail = [t for t in reply[kept:keep] if t != m.im_end_id]
        th.append(m, state, [*tail, m.im_end_id, *m.encode("\n")])
        th.evict(state, window_s, state.length if protect_from is None else protect_from)
