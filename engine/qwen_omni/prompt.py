"""A call's conversation in the Thinker: the chat template's pieces and what is kept of a reply.

Pure and synchronous (no I/O, no event loop): each function works on one
:class:`~omnicall.engine.qwen_omni.thinker.ThinkerState`; the session runs them in order on
the model worker (:mod:`omnicall.engine.qwen_omni.session`) and the engine's warm-up runs the
same ones. The template is Qwen3-Omni's: ``<|im_start|>system\\n...<|im_end|>\\n``, then per
user turn ``<|im_start|>user\\n`` + its content in time order + ``<|im_end|>\\n``, then
``<|im_start|>assistant\\n`` + the reply + ``<|im_end|>\\n``. A user turn's content is what the
chat template makes of a message with several parts: runs of speech, each
``<|audio_start|>`` + audio segments + ``<|audio_end|>``, and camera frames between them, each
``<|vision_start|>`` + video tokens + ``<|vision_end|>``. The audio bracket opens at the first
audio after the turn's start or a frame and closes before a frame or the turn's end
(:func:`audio_open` reads which from the state, so a rollback needs no bookkeeping).
"""

from __future__ import annotations

import numpy as np
import torch

from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.video_patches import patchify, video_segment_ids
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import INPUT_RATE_HZ, OUTPUT_RATE_HZ

#: audio shorter than this (20 ms) is not worth an audio-encoder pass
MIN_AUDIO_SAMPLES = INPUT_RATE_HZ // 50
#: the nominal rate of a still frame's repeated copies (one temporal patch: its one temporal
#: position is the same at any rate)
FRAME_FPS = 2.0


def system_ids(m: OmniModel, persona: str) -> list[int]:
    return [m.im_start_id, *m.encode(f"system\n{persona}"), m.im_end_id, *m.encode("\n")]


def user_open_ids(m: OmniModel) -> list[int]:
    """The start of a user turn (its audio segment opens separately, after any video)."""
    return [m.im_start_id, m.user_id, *m.encode("\n")]


def user_close_ids(m: OmniModel) -> list[int]:
    """The end of the user turn (its audio bracket open) and the assistant prefix a reply
    streams from."""
    return [m.audio_end_id, m.im_end_id, *m.encode("\n"), m.im_start_id, m.assistant_id,
            *m.encode("\n")]


def audio_open(m: OmniModel, state: th.ThinkerState) -> bool:
    """Whether the conversation ends inside an audio bracket (speech since its start)."""
    return bool(state.ids) and (state.ids[-1] == m.audio_start_id
                                or (bool(state.segments) and state.segments[-1].kind == "audio"))


def close_user_turn(m: OmniModel, state: th.ThinkerState) -> None:
    """Close the user turn (its audio bracket if open) and prefill the assistant prefix."""
    ids = user_close_ids(m)
    append_ids(m, state, ids if audio_open(m, state) else ids[1:])


def append_ids(m: OmniModel, state: th.ThinkerState, ids: list[int]) -> None:
    with torch.inference_mode():
        th.append(m, state, ids)


def append_audio(m: OmniModel, state: th.ThinkerState, samples: Int16Array) -> None:
    """One run of the caller's speech (16 kHz) as an audio segment (opening the audio
    bracket after the turn's start or a frame)."""
    if len(samples) < MIN_AUDIO_SAMPLES:
        return
    with torch.inference_mode():
        if not audio_open(m, state):
            th.append(m, state, [m.audio_start_id])
        features = m.audio_features(samples)
        th.append(m, state, [m.audio_id] * m.audio_tokens(features.shape[-1]), "audio",
                  input_features=features, media_s=len(samples) / INPUT_RATE_HZ)


def append_video(m: OmniModel, state: th.ThinkerState, frames: list[np.ndarray], fps: float,
                 max_pixels: int, long_side: int | None = None, image_id: int | None = None,
                 media_s: float | None = None) -> None:
    """Sampled RGB frames as one video segment (closing an open audio bracket first);
    ``long_side``: :func:`~omnicall.engine.qwen_omni.video_patches.frame_size`; ``media_s``: the
    seconds it counts in the window (default: the frames' span at ``fps``)."""
    with torch.inference_mode():
        if audio_open(m, state):
            th.append(m, state, [m.audio_end_id])
        clip = patchify(m, frames, fps, max_pixels, long_side)
        th.append(m, state, video_segment_ids(m, clip), "video",
                  pixel_values_videos=clip.pixel_values, video_grid_thw=clip.grid_thw,
                  video_second_per_grid=clip.second_per_grid,
                  media_s=len(frames) / fps if media_s is None else media_s, image_id=image_id)


def append_frame(m: OmniModel, state: th.ThinkerState, image: np.ndarray, long_side: int,
                 max_pixels: int, image_id: int) -> None:
    """One camera frame the frame policy picked, at its size, as a video segment of the
    frame repeated to the temporal patch (2 frames: one temporal position). It counts no
    seconds in the media window (the frames are bounded by their own count,
    :func:`close_reply`'s ``max_images``)."""
    append_video(m, state, [image] * m.temporal_patch_size, FRAME_FPS, max_pixels, long_side,
                 image_id, media_s=0.0)


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
                keep: int, window_s: float, protect_from: int | None,
                max_images: int | None = None) -> None:
    """Keep the first ``keep`` of the ``reply`` tokens after ``prompt_length`` and close the
    assistant message; then evict media beyond ``window_s`` and the oldest camera frames
    beyond ``max_images`` (None: no bound), never at or after token ``protect_from`` (the
    turn being heard; None: none)."""
    with torch.inference_mode():
        forwarded = state.length - prompt_length
        kept = min(keep, forwarded)
        th.truncate(state, prompt_length + kept)
        # the final token is never forwarded: voiced, it is appended here
        tail = [t for t in reply[kept:keep] if t != m.im_end_id]
        th.append(m, state, [*tail, m.im_end_id, *m.encode("\n")])
        protect = state.length if protect_from is None else protect_from
        th.evict(state, window_s, protect)
        if max_images is not None:
            th.drop_frames(state, max_images, protect)
