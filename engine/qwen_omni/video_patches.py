"""Sampled video frames -> Qwen3-Omni video patches, without torchvision.

The released video processor needs torchvision, which does not import beside the CPU torch
wheel here, so frames are patchified directly in the layout the vision encoder expects
(patch 16, temporal patch 2, 2x2 merge: one token per 32x32 px per 2 frames), normalised with
the Qwen2-VL (CLIP) mean/std.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import torch

from omnicall.engine.conversation.frame_policy import fit_long_side
from omnicall.engine.qwen_omni.model import IMAGE_MEAN, IMAGE_STD, OmniModel


@dataclass(frozen=True)
class VideoClip:
    pixel_values: torch.Tensor  # (patches, 3 * temporal * patch * patch)
    grid_thw: torch.Tensor  # (1, 3)
    second_per_grid: torch.Tensor  # (1,)
    tokens: int


def fit_size(width: int, height: int, max_pixels: int, unit: int) -> tuple[int, int]:
    """Resize target: multiples of ``unit`` with at most ``max_pixels`` pixels."""
    scale = min(1.0, (max_pixels / max(1, width * height)) ** 0.5)
    w = max(unit, round(width * scale / unit) * unit)
    h = max(unit, round(height * scale / unit) * unit)
    while w * h > max_pixels and (w > unit or h > unit):
        if w >= h:
            w -= unit
        else:
            h -= unit
    return w, h


def frame_size(width: int, height: int, max_pixels: int, unit: int,
               long_side: int | None = None) -> tuple[int, int]:
    """What a frame is resized to: the long side at ``long_side`` (the frame policy's size,
    :func:`~omnicall.engine.conversation.frame_policy.fit_long_side`: aspect kept, never
    upscaled; None: the frame's own), then :func:`fit_size` (multiples of ``unit``, the
    vision encoder's patch x merge, and at most ``max_pixels``)."""
    if long_side is not None:
        width, height = fit_long_side(width, height, long_side)
    return fit_size(width, height, max_pixels, unit)


def patchify(model: OmniModel, frames: list[np.ndarray], fps: float,
             max_pixels: int = 224 * 224, long_side: int | None = None) -> VideoClip:
    """RGB uint8 frames (same size) sampled at ``fps`` -> one video clip (``long_side``:
    see :func:`frame_size`)."""
    if not frames:
        raise ValueError("no frames")
    p, tp, merge = model.patch_size, model.temporal_patch_size, model.merge_size
    height, width = frames[0].shape[:2]
    w, h = frame_size(width, height, max_pixels, p * merge, long_side)
    stack = np.stack([cv2.resize(f, (w, h), interpolation=cv2.INTER_AREA) for f in frames])
    if len(stack) % tp:
        stack = np.concatenate([stack, np.repeat(stack[-1:], tp - len(stack) % tp, axis=0)])
    mean, std = np.array(IMAGE_MEAN, np.float32), np.array(IMAGE_STD, np.float32)
    data: np.ndarray = (stack.astype(np.float32) / 255.0 - mean) / std
    data = data.transpose(0, 3, 1, 2)  # T, C, H, W
    grid_t, grid_h, grid_w = len(data) // tp, h // p, w // p
    patches = data.reshape(grid_t, tp, 3, grid_h // merge, merge, p, grid_w // merge, merge, p)
    patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    flat = patches.reshape(grid_t * grid_h * grid_w, 3 * tp * p * p)
    grid = torch.tensor([[grid_t, grid_h, grid_w]], dtype=torch.long)
    return VideoClip(torch.from_numpy(np.ascontiguousarray(flat)), grid,
                     torch.tensor([tp / fps], dtype=torch.float32),
                     grid_t * grid_h * grid_w // (merge * merge))


def video_segment_ids(model: OmniModel, clip: VideoClip) -> list[int]:
    return [model.vision_start_id] + [model.video_id] * clip.tokens + [model.vision_end_id]
