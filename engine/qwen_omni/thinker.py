"""The Thinker's per-session state: a KV cache fed incrementally, in time order.

A session's prompt is a sequence of *segments* appended one at a time while the user talks:
text runs, runs of audio tokens (one per ~77 ms of speech, filled from the audio encoder) and
video segments (``<vision_start> <video_pad> * n <vision_end>``). Each append is one forward
pass over just that segment, on top of the cache, with TM-RoPE position ids computed here for
the session - never through the model's module-level ``rope_deltas``, which is one value for
the whole process.

Position rule (the same as the model's ``get_rope_index`` for a one-shot prompt): every
segment starts at ``next_pos`` (the largest position so far + 1); text and audio advance one
position per token on all three axes; a video segment's positions come from the model's own
``get_rope_index`` applied to that segment alone. Appending segments therefore equals a
one-shot prefill of their concatenation (checked in the tests).

Per retained position the state keeps what the Talker needs later (token id, the Thinker's
input embedding, the hidden state of ``accept_hidden_layer``), so a reply can start from any
point of the conversation. :meth:`ThinkerState.evict` drops old media segments from the cache
and from these records together, which bounds memory on long calls (sliding window);
:func:`drop_frames` drops the oldest camera frames the same way (the frame policy's
``max_images``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from omnicall.engine.qwen_omni.model import OmniModel

logger = logging.getLogger(__name__)

SegmentKind = Literal["text", "audio", "video"]


@dataclass
class Segment:
    kind: SegmentKind
    length: int  # tokens
    media_s: float = 0.0  # seconds of audio/video this segment carries
    #: a video segment's (3, length) positions relative to its start (``get_rope_index``);
    #: text and audio advance one position per token on all three axes
    video_pos: torch.Tensor | None = None
    image_id: int | None = None  # a camera frame's (the frame policy's id), for retention

    def positions(self, device: torch.device) -> torch.Tensor:
        """(3, length) positions relative to the segment start."""
        if self.video_pos is not None:
            return self.video_pos
        return _text_positions(0, self.length, device)


@dataclass
class ThinkerState:
    """Everything one call's Thinker owns. Tensors are on the model's device."""

    cache: DynamicCache | None = None
    next_pos: int = 0
    ids: list[int] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    embeds: list[torch.Tensor] = field(default_factory=list)  # per segment (len, D)
    accept: list[torch.Tensor] = field(default_factory=list)  # per segment (len, D)
    last_logits: torch.Tensor | None = None  # (vocab,) after the last forwarded token
    evicted_tokens: int = 0

    @property
    def length(self) -> int:
        return len(self.ids)

    def cache_length(self) -> int:
        return 0 if self.cache is None else self.cache.get_seq_length()

    def media_s(self) -> float:
        return sum(s.media_s for s in self.segments)


def _text_positions(start: int, length: int, device: torch.device) -> torch.Tensor:
    return (torch.arange(length, device=device) + start).view(1, -1).expand(3, -1)


def append(model: OmniModel, state: ThinkerState, ids: list[int], kind: SegmentKind = "text",
           *, input_features: torch.Tensor | None = None,
           pixel_values_videos: torch.Tensor | None = None,
           video_grid_thw: torch.Tensor | None = None,
           video_second_per_grid: torch.Tensor | None = None,
           media_s: float = 0.0, image_id: int | None = None) -> None:
    """Prefill one segment on top of the cache (audio features / video pixels included)."""
    if not ids:
        return
    device = model.device
    input_ids = torch.tensor([ids], dtype=torch.long, device=device)
    if kind == "video":
        if video_grid_thw is None:
            raise ValueError("a video segment needs video_grid_thw")
        video_grid_thw = video_grid_thw.to(device)
        rel, _ = model.thinker.get_rope_index(
            input_ids, None, video_grid_thw, torch.ones_like(input_ids), False, None,
            video_second_per_grid)
        rel = rel[:, 0].long()
    else:
        rel = _text_positions(0, len(ids), device)
    position_ids = (rel + state.next_pos).unsqueeze(1)  # (3, 1, L)
    kwargs: dict[str, torch.Tensor] = {}
    if input_features is not None:
        kwargs["input_features"] = input_features.to(device, model.dtype)
        kwargs["feature_attention_mask"] = torch.ones(
            input_features.shape[0], input_features.shape[-1], dtype=torch.long, device=device)
    if pixel_values_videos is not None:
        kwargs["pixel_values_videos"] = pixel_values_videos.to(device, model.dtype)
        kwargs["video_grid_thw"] = video_grid_thw  # type: ignore[assignment]
    out = model.thinker(input_ids=input_ids, position_ids=position_ids, cache=state.cache,
                        use_cache=True, output_hidden_states=True, **kwargs)
    state.cache = out.cache
    hidden = out.hidden_states
    state.embeds.append(hidden[0][0])
    state.accept.append(hidden[model.accept_hidden_layer][0])
    state.ids.extend(ids)
    state.segments.append(Segment(kind, len(ids), media_s, rel if kind == "video" else None,
                                  image_id))
    state.next_pos = int(position_ids.max()) + 1
    state.last_logits = out.logits[0, -1]


def step(model: OmniModel, state: ThinkerState, token: int) -> None:
    """Decode one generated token (extends the last text segment)."""
    device = model.device
    input_ids = torch.tensor([[token]], dtype=torch.long, device=device)
    position_ids = torch.full((3, 1, 1), state.next_pos, dtype=torch.long, device=device)
    out = model.thinker(input_ids=input_ids, position_ids=position_ids, cache=state.cache,
                        use_cache=True, output_hidden_states=True)
    state.cache = out.cache
    hidden = out.hidden_states
    last = state.segments[-1] if state.segments else None
    if last is not None and last.kind == "text":
        state.embeds[-1] = torch.cat([state.embeds[-1], hidden[0][0]])
        state.accept[-1] = torch.cat([state.accept[-1], hidden[model.accept_hidden_layer][0]])
        last.length += 1
    else:
        state.embeds.append(hidden[0][0])
        state.accept.append(hidden[model.accept_hidden_layer][0])
        state.segments.append(Segment("text", 1))
    state.ids.append(token)
    state.next_pos += 1
    state.last_logits = out.logits[0, -1]


def truncate(state: ThinkerState, keep_tokens: int) -> None:
    """Drop the last ``length - keep_tokens`` tokens (text only), e.g. the unplayed part of
    an interrupted reply. Leaves cache, ids and records consistent."""
    drop = state.length - keep_tokens
    if drop <= 0:
        return
    last = state.segments[-1]
    if last.kind != "text" or last.length < drop:
        raise ValueError("only the trailing text segment can be truncated")
    if state.cache is not None:
        state.cache.crop(-drop)
    del state.ids[keep_tokens:]
    last.length -= drop
    state.embeds[-1] = state.embeds[-1][:last.length]
    state.accept[-1] = state.accept[-1][:last.length]
    state.next_pos = state.next_pos - drop
    state.last_logits = None
    if last.length == 0:
        state.segments.pop()
        state.embeds.pop()
        state.accept.pop()


def evict(state: ThinkerState, window_s: float, protect_from: int) -> int:
    """Drop the oldest media segments until at most ``window_s`` of media remains.

    Segments starting at or after token ``protect_from`` (the turn being heard) stay. Cached
    keys keep their rotary positions, so removing columns leaves the rest valid. Returns the
    number of tokens evicted."""
    removed = 0
    while state.media_s() > window_s:
        offset = 0
        victim = None
        for index, seg in enumerate(state.segments):
            if seg.kind != "text" and offset + seg.length <= protect_from - removed:
                victim = (index, offset, seg)
                break
            offset += seg.length
        if victim is None:
            break
        index, offset, seg = victim
        _remove(state, index, offset)
        removed += seg.length
    state.evicted_tokens += removed
    return removed


def drop_frames(state: ThinkerState, keep: int, protect_from: int) -> int:
    """Drop the oldest camera frames (video segments with an ``image_id``) until at most
    ``keep`` remain, never at or after token ``protect_from``; as :func:`evict`, the cached
    keys of the rest keep their positions. Returns the number of tokens dropped."""
    frames = sum(seg.image_id is not None for seg in state.segments)
    removed = 0
    index = offset = 0
    while frames > keep and index < len(state.segments):
        seg = state.segments[index]
        if offset + seg.length > protect_from - removed:
            break
        if seg.image_id is None:
            offset += seg.length
            index += 1
            continue
        _remove(state, index, offset)
        removed += seg.length
        frames -= 1
    state.evicted_tokens += removed
    return removed


def _remove(state: ThinkerState, index: int, offset: int) -> None:
    """Remove segment ``index`` (starting at token ``offset``) from the cache and records."""
    seg = state.segments[index]
    if state.cache is not None:
        for layer in state.cache.layers:
            if not isinstance(layer, DynamicLayer):
                raise TypeError(f"cannot evict from a {type(layer).__name__} cache layer")
            keys, values = layer.keys, layer.values
            if keys is None or values is None or keys.numel() == 0:
                continue
            layer.keys = torch.cat([keys[..., :offset, :], keys[..., offset + seg.length:, :]],
                                   dim=-2)
            layer.values = torch.cat([values[..., :offset, :],
                                      values[..., offset + seg.length:, :]], dim=-2)
    del state.ids[offset:offset + seg.length]
    del state.segments[index]
    del state.embeds[index]
    del state.accept[index]


def subset_positions(state: ThinkerState, keep: torch.Tensor) -> torch.Tensor:
    """TM-RoPE positions (3, n) for the kept positions ``keep`` (bool over the first
    ``len(keep)`` tokens) laid out as their own sequence - what ``get_rope_index`` gives for
    the Talker's prompt, which holds the user side of the conversation."""
    device = keep.device
    parts: list[torch.Tensor] = []
    next_pos = 0
    offset = 0
    for seg in state.segments:
        if offset >= keep.shape[0]:
            break
        sel = keep[offset:offset + seg.length]
        count = int(sel.sum())
        if count:
            if seg.video_pos is not None and count == seg.length:
                pos = seg.video_pos.to(device) + next_pos
            else:
                pos = _text_positions(next_pos, count, device)
            parts.append(pos)
            next_pos = int(pos.max()) + 1
        offset += seg.length
    if not parts:
        return torch.zeros((3, 0), dtype=torch.long, device=device)
    return torch.cat(parts, dim=1)
