"""Incremental Thinker prefill (text, audio, video) equals one-shot prefill; bounded window."""

from __future__ import annotations

import torch

from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.vision import patchify, video_segment_ids
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
