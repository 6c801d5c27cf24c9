"""Incremental Thinker prefill (text, audio, video) equals one-shot prefill; bounded window."""

from __future__ import annotations

import numpy as np
import torch

from omnicall.engine.qwen_omni import prompt
from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.video_patches import patchify, video_segment_ids
from tests.qwen_fixtures import frames, noise, system_ids, user_turn_parts


def test_incremental_prefill_equals_one_shot(omni: OmniModel) -> None:
    m = omni
    audio = [m.audio_features(noise(1.0, seed=s)) for s in (1, 2)]
    clip = patchify(m, frames(2), fps=2.0)
    _before, after = user_turn_parts(m, "Describe it.")
    segments: list[tuple[list[int], dict]] = [
        ([*system_ids(m), m.im_start_id, m.user_id, *m.encode("\n")], {}),
        (video_segment_ids(m, clip), {"kind": "video", "pixel_values_videos": clip.pixel_values,
                                      "video_grid_thw": clip.grid_thw,
                                      "video_second_per_grid": clip.second_per_grid}),
        ([m.audio_start_id], {}),
        ([m.audio_id] * m.audio_tokens(audio[0].shape[-1]),
         {"kind": "audio", "input_features": audio[0]}),
        ([m.audio_id] * m.audio_tokens(audio[1].shape[-1]),
         {"kind": "audio", "input_features": audio[1]}),
        (after, {}),
    ]
    state = th.ThinkerState()
    positions = []
    with torch.inference_mode():
        for ids, kwargs in segments:
            kind = kwargs.pop("kind", "text")
            start = state.next_pos
            th.append(m, state, ids, kind, **kwargs)
            positions.append(state.segments[-1].positions(m.device) + start)
        ids = torch.tensor([state.ids])
        # one shot: the library's own position rule over the whole prompt
        features = torch.cat(audio, dim=-1)
        full_pos, _ = m.thinker.get_rope_index(
            ids, None, clip.grid_thw, torch.ones_like(ids), False,
            torch.tensor([features.shape[-1]]), clip.second_per_grid)
        assert torch.equal(torch.cat(positions, dim=1), full_pos[:, 0].long())
        # the two 1 s audio chunks are encoded separately, exactly as appended
        audio_embeds = torch.cat([m.thinker.get_audio_features(
            f, torch.ones(1, f.shape[-1], dtype=torch.long)).last_hidden_state for f in audio])
        embeds = m.thinker.get_input_embeddings()(ids)
        audio_mask = (ids == m.audio_id).unsqueeze(-1)
        embeds = embeds.masked_scatter(audio_mask, audio_embeds)
        out = m.thinker(input_ids=ids, inputs_embeds=embeds, position_ids=full_pos.long(),
                        pixel_values_videos=clip.pixel_values, video_grid_thw=clip.grid_thw,
                        use_cache=True)
    assert features.shape[-1] == 200
    assert state.last_logits is not None
    assert torch.allclose(out.logits[0, -1], state.last_logits, atol=1e-4)
    assert int(out.logits[0, -1].argmax()) == int(state.last_logits.argmax())
    assert state.cache_length() == len(state.ids) == out.cache.get_seq_length()


def test_video_positions_are_per_segment_not_module_global(omni: OmniModel) -> None:
    """Two sessions with different media: positions come from each session's own state."""
    m = omni
    a, b = th.ThinkerState(), th.ThinkerState()
    clip = patchify(m, frames(2), fps=2.0)
    with torch.inference_mode():
        th.append(m, a, system_ids(m))
        th.append(m, a, video_segment_ids(m, clip), "video", pixel_values_videos=clip.pixel_values,
                  video_grid_thw=clip.grid_thw, video_second_per_grid=clip.second_per_grid)
        th.append(m, b, system_ids(m) + system_ids(m))
    assert a.next_pos < len(a.ids)  # video tokens share temporal/spatial positions
    assert b.next_pos == len(b.ids)


def test_sliding_window_bounds_the_cache(omni: OmniModel) -> None:
    m = omni
    state = th.ThinkerState()
    with torch.inference_mode():
        th.append(m, state, system_ids(m))
        lengths = []
        for turn in range(8):
            before, after = user_turn_parts(m, f"turn {turn}")
            th.append(m, state, before)
            for second in range(3):
                features = m.audio_features(noise(1.0, seed=turn * 10 + second))
                th.append(m, state, [m.audio_id] * m.audio_tokens(features.shape[-1]), "audio",
                          input_features=features, media_s=1.0)
            th.append(m, state, [*after, m.im_end_id, *m.encode("\n")])
            th.evict(state, window_s=6.0, protect_from=state.length)
            lengths.append(state.cache_length())
            assert state.cache_length() == state.length == len(state.ids)
            assert sum(len(e) for e in state.embeds) == state.length
            assert state.media_s() <= 6.0
    # media stop growing: only the (short) text grows
    assert lengths[-1] - lengths[3] < 4 * 40
    assert state.evicted_tokens >= 13 * 3 * 5
    # the evicted cache still decodes
    with torch.inference_mode():
        th.step(m, state, m.encode("a")[0])
    assert state.cache_length() == state.length


def test_truncate_only_trailing_text(omni: OmniModel) -> None:
    m = omni
    state = th.ThinkerState()
    with torch.inference_mode():
        th.append(m, state, system_ids(m))
        n = state.length
        th.truncate(state, n - 3)
    assert state.length == state.cache_length() == n - 3
    assert state.next_pos == n - 3


def test_frames_appended_through_speech_equal_one_shot(omni: OmniModel) -> None:
    """A user turn as the session builds it while the user speaks: camera frames appended as
    video segments between runs of speech (each frame repeated to the temporal patch), the
    turn's end frame before the reply, the audio bracket closed and reopened around each
    frame. The Thinker's state equals a one-shot prefill of the same prompt (the library's
    positions over all of it, the same audio chunks and frames)."""
    m = omni
    long_side, max_pixels = 448, 896 * 672
    scenes = frames(4, width=448, height=336, seed=5) + frames(1, width=320, height=240, seed=6)
    audio = [noise(1.0, seed=s) for s in range(4)]
    state = th.ThinkerState()
    # frame, 1 s, frame, 1 s, 1 s, frame, frame, 1 s, end frame (another size), close
    plan: list[tuple[str, int]] = [("frame", 0), ("audio", 0), ("frame", 1), ("audio", 1),
                                   ("audio", 2), ("frame", 2), ("frame", 3), ("audio", 3),
                                   ("frame", 4)]
    with torch.inference_mode():
        prompt.append_ids(m, state, [*system_ids(m), *prompt.user_open_ids(m)])
        for kind, index in plan:
            if kind == "frame":
                prompt.append_frame(m, state, scenes[index], long_side, max_pixels, index + 1)
            else:
                prompt.append_audio(m, state, (audio[index] * 32767).astype(np.int16))
        prompt.close_user_turn(m, state)
    assert [s.image_id for s in state.segments if s.kind == "video"] == [1, 2, 3, 4, 5]
    assert state.ids.count(m.audio_start_id) == state.ids.count(m.audio_end_id) == 3
    assert state.ids[-len(prompt.user_close_ids(m)) + 1:] == prompt.user_close_ids(m)[1:]

    # one shot: the same ids, the library's positions, audio per bracket, frames in order
    clips = [patchify(m, [f, f], prompt.FRAME_FPS, max_pixels, long_side) for f in scenes]
    assert clips[0].grid_thw[0].tolist() == [1, 20, 28]  # 448 x 320 px: 140 tokens
    ids = torch.tensor([state.ids])
    grids = torch.cat([c.grid_thw for c in clips])
    per_grid = torch.cat([c.second_per_grid for c in clips])
    feats = [m.audio_features((a * 32767).astype(np.int16)) for a in audio]
    bracket_frames = torch.tensor([feats[0].shape[-1], feats[1].shape[-1] + feats[2].shape[-1],
                                   feats[3].shape[-1]])
    with torch.inference_mode():
        full_pos, _ = m.thinker.get_rope_index(ids, None, grids, torch.ones_like(ids), False,
                                               bracket_frames, per_grid)
        positions = torch.cat([seg.positions(m.device) + start for seg, start in
                               zip(state.segments, _starts(state), strict=True)], dim=1)
        assert torch.equal(positions, full_pos[:, 0].long())
        audio_embeds = torch.cat([m.thinker.get_audio_features(
            f, torch.ones(1, f.shape[-1], dtype=torch.long)).last_hidden_state for f in feats])
        embeds = m.thinker.get_input_embeddings()(ids)
        embeds = embeds.masked_scatter((ids == m.audio_id).unsqueeze(-1), audio_embeds)
        out = m.thinker(input_ids=ids, inputs_embeds=embeds, position_ids=full_pos.long(),
                        pixel_values_videos=torch.cat([c.pixel_values for c in clips]),
                        video_grid_thw=grids, use_cache=True, output_hidden_states=True)
    assert state.last_logits is not None
    assert torch.allclose(out.logits[0, -1], state.last_logits, atol=1e-4)
    assert int(out.logits[0, -1].argmax()) == int(state.last_logits.argmax())
    assert state.cache_length() == len(state.ids) == out.cache.get_seq_length()
    # the whole state, not only the last logits: what the Talker reads and the cache
    accept = torch.cat(state.accept)
    assert torch.allclose(accept, out.hidden_states[m.accept_hidden_layer][0], atol=1e-4)
    for mine, theirs in zip(state.cache.layers, out.cache.layers, strict=True):  # type: ignore[union-attr]
        assert torch.allclose(mine.keys, theirs.keys, atol=1e-4)
        assert torch.allclose(mine.values, theirs.values, atol=1e-4)


def _starts(state: th.ThinkerState) -> list[int]:
    """Each segment's first position (the largest before it + 1), recomputed."""
    starts, next_pos = [], 0
    for seg in state.segments:
        starts.append(next_pos)
        next_pos = int(seg.positions(torch.device("cpu")).max()) + next_pos + 1
    return starts


def test_frames_past_max_images_leave_the_cache_before_the_turn_heard(omni: OmniModel) -> None:
    m = omni
    state = th.ThinkerState()
    with torch.inference_mode():
        prompt.append_ids(m, state, [*system_ids(m), *prompt.user_open_ids(m)])
        for index, scene in enumerate(frames(5, width=96, height=64, seed=9)):
            prompt.append_frame(m, state, scene, 448, 896 * 672, index + 1)
            prompt.append_audio(m, state, (noise(1.0, seed=index) * 32767).astype(np.int16))
        prompt.close_user_turn(m, state)
        protect = state.length
        prompt.close_reply(m, state, state.length, [], 0, 30.0, None, max_images=2)
        kept = [s.image_id for s in state.segments if s.image_id is not None]
        assert kept == [4, 5]
        assert state.cache_length() == state.length == sum(s.length for s in state.segments)
        assert state.length < protect + 3
        th.step(m, state, m.encode("a")[0])  # the cache still decodes
    assert state.cache_length() == state.length
