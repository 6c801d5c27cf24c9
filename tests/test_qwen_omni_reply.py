"""Streaming reply vs the library's generate() on the tiny Qwen3-Omni (greedy)."""

from __future__ import annotations

import torch

from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.reply import ReplyOptions, ReplyStream
from tests.qwen_fixtures import noise, prefill_audio_turn, system_ids, user_turn_parts

MAX_TOKENS, MAX_FRAMES = 16, 24


def run_stream(m: OmniModel, state: th.ThinkerState, options: ReplyOptions
               ) -> tuple[list[int], torch.Tensor, list[torch.Tensor], ReplyStream]:
    stream = ReplyStream(m, state, options)
    tokens: list[int] = []
    chunks: list[torch.Tensor] = []
    while not stream.done:
        out = stream.step()
        tokens += out.tokens
        if out.audio is not None and out.audio.numel():
            chunks.append(out.audio)
    wave = torch.cat(chunks) if chunks else torch.zeros(0)
    return tokens, wave, chunks, stream


def generate_reference(m: OmniModel, audio_seconds: float = 2.0) -> tuple[list[int], torch.Tensor]:
    audio = noise(audio_seconds)
    features = m.audio_features(audio)
    before, after = user_turn_parts(m, "What is this?")
    ids = system_ids(m) + before + [m.audio_id] * m.audio_tokens(features.shape[-1]) + after
    input_ids = torch.tensor([ids])
    with torch.inference_mode():
        seq, wav = m.model.generate(
            input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
            input_features=features,
            feature_attention_mask=torch.ones(1, features.shape[-1], dtype=torch.long),
            thinker_max_new_tokens=MAX_TOKENS, talker_max_new_tokens=MAX_FRAMES,
            talker_do_sample=False)
    return seq[0, len(ids):].tolist(), wav.reshape(-1)


def streamed_state(m: OmniModel, audio_seconds: float = 2.0) -> th.ThinkerState:
    state = th.ThinkerState()
    with torch.inference_mode():
        th.append(m, state, system_ids(m))
    prefill_audio_turn(m, state, noise(audio_seconds))
    return state


def test_streaming_equals_generate(omni: OmniModel) -> None:
    ref_tokens, ref_wave = generate_reference(omni)
    tokens, wave, chunks, stream = run_stream(omni, streamed_state(omni),
                                              ReplyOptions(MAX_TOKENS, MAX_FRAMES))
    assert tokens == ref_tokens
    assert stream.frames == MAX_FRAMES - 1 or stream.talker_state is not None
    # the same codec frames: decoding them the library's way gives generate()'s exact samples
    assert ref_wave.shape == wave.shape
    # streamed in small chunks: the same samples up to float rounding (chunked decoding
    # reorders sums; one 16-bit step is 3e-5); the tiny model's speech is audible (std ~0.1)
    assert ref_wave.std() > 0.01
    assert torch.allclose(wave, ref_wave, atol=1e-6, rtol=0)
    # the first audio chunk is one 80 ms frame, long before the reply is complete
    assert chunks[0].shape[-1] <= 1920
    assert len(chunks) > 3


def test_codec_frames_equal_generate(omni: OmniModel) -> None:
    """Bit-identity of the codes: one-shot decode of the streamed frames == generate()."""
    _, ref_wave = generate_reference(omni)
    stream = ReplyStream(omni, streamed_state(omni), ReplyOptions(MAX_TOKENS, MAX_FRAMES))
    codes = []
    original_push = stream.codec.push  # type: ignore[union-attr]

    def keep(state: object, frame: torch.Tensor) -> None:
        codes.append(frame)
        original_push(state, frame)  # type: ignore[arg-type]

    stream.codec.push = keep  # type: ignore[method-assign,union-attr]
    while not stream.done:
        stream.step()
    assert omni.code2wav is not None
    with torch.inference_mode():
        wave = omni.code2wav.chunked_decode(torch.stack(codes, dim=-1).unsqueeze(0),
                                            chunk_size=300, left_context_size=25)
    assert torch.equal(wave.reshape(-1).float(), ref_wave)


def test_two_sessions_interleaved_equal_alone(omni: OmniModel) -> None:
    options = ReplyOptions(12, 10)
    alone_a = run_stream(omni, streamed_state(omni, 2.0), options)
    alone_b = run_stream(omni, streamed_state(omni, 1.3), options)
    a = ReplyStream(omni, streamed_state(omni, 2.0), options)
    b = ReplyStream(omni, streamed_state(omni, 1.3), options)
    got: dict[str, list[int]] = {"a": [], "b": []}
    waves: dict[str, list[torch.Tensor]] = {"a": [], "b": []}
    while not (a.done and b.done):
        for name, stream in (("a", a), ("b", b)):
            if not stream.done:
                out = stream.step()
                got[name] += out.tokens
                if out.audio is not None:
                    waves[name].append(out.audio)
    assert got["a"] == alone_a[0] and got["b"] == alone_b[0]
    assert torch.equal(torch.cat(waves["a"]), alone_a[1])
    assert torch.equal(torch.cat(waves["b"]), alone_b[1])
    assert got["a"] != got["b"]


def test_barge_in_leaves_a_consistent_cache(omni: OmniModel) -> None:
    """Cut a reply after 5 tokens, close it, ask again: same logits as a fresh prefill of
    exactly the kept conversation."""
    state = streamed_state(omni)
    stream = ReplyStream(omni, state, ReplyOptions(40, 40))
    while len(stream.tokens) < 8:
        stream.step()
    keep = 5
    with torch.inference_mode():
        th.truncate(state, stream.prompt_length + keep)
        assert state.cache_length() == state.length == stream.prompt_length + keep
        th.append(omni, state, [omni.im_end_id, *omni.encode("\n")])
        before, after = user_turn_parts(omni, "And now?")
        th.append(omni, state, before + after)
        fresh = th.ThinkerState()
        # a fresh one-shot prefill of the same ids: text segments, with the audio of turn 1
        ids = list(state.ids)
        audio_at = [i for i, t in enumerate(ids) if t == omni.audio_id]
        first, last = audio_at[0], audio_at[-1] + 1
        th.append(omni, fresh, ids[:first])
        th.append(omni, fresh, ids[first:last], "audio",
                  input_features=omni.audio_features(noise(2.0)), media_s=2.0)
        th.append(omni, fresh, ids[last:])
    assert fresh.ids == state.ids
    assert state.last_logits is not None and fresh.last_logits is not None
    assert torch.allclose(state.last_logits, fresh.last_logits, atol=1e-4)
    assert int(state.last_logits.argmax()) == int(fresh.last_logits.argmax())
    assert state.ids[stream.prompt_length:stream.prompt_length + keep] == stream.tokens[:keep]


def test_text_only_reply_has_no_audio(omni: OmniModel) -> None:
    tokens, wave, _, stream = run_stream(omni, streamed_state(omni),
                                         ReplyOptions(6, 6, with_audio=False))
    assert len(tokens) == 6 and wave.numel() == 0 and stream.talker_state is None


def test_batched_steps_across_calls_equal_each_alone(omni: OmniModel) -> None:
    """step_many: one batched code-predictor pass for two calls' frames, same output."""
    from omnicall.engine.qwen_omni.reply import step_many
    from omnicall.engine.qwen_omni.talker import GREEDY, Talker

    talker = Talker(omni, GREEDY)
    options = ReplyOptions(10, 14)
    alone = [run_stream(omni, streamed_state(omni, s), options) for s in (2.0, 1.3, 0.7)]
    streams = [ReplyStream(omni, streamed_state(omni, s), options, talker=talker)
               for s in (2.0, 1.3, 0.7)]
    tokens: list[list[int]] = [[], [], []]
    waves: list[list[torch.Tensor]] = [[], [], []]
    batched_frames = 0
    while not all(s.done for s in streams):
        active = [i for i, s in enumerate(streams) if not s.done]
        outs = step_many([streams[i] for i in active])
        batched_frames = max(batched_frames, sum(o.frames for o in outs))
        for i, out in zip(active, outs, strict=True):
            tokens[i] += out.tokens
            if out.audio is not None:
                waves[i].append(out.audio)
    assert batched_frames == 3  # three calls' frames went through one predictor batch
    for i in range(3):
        assert tokens[i] == alone[i][0]
        assert torch.allclose(torch.cat(waves[i]), alone[i][1], atol=1e-6, rtol=0)


def test_sampled_thinker_is_seeded_and_stays_in_the_top_k(omni: OmniModel) -> None:
    from omnicall.engine.qwen_omni.reply import ThinkerSampling

    sampling = ThinkerSampling(do_sample=True, temperature=0.7, top_p=0.8, top_k=20)
    options = ReplyOptions(6, 6, with_audio=False, thinker_sampling=sampling, seed=7)
    state = streamed_state(omni)
    assert state.last_logits is not None
    top_k = set(torch.topk(state.last_logits, 20).indices.tolist())
    first = run_stream(omni, state, options)[0]
    again = run_stream(omni, streamed_state(omni), options)[0]
    assert first == again and len(first) == 6
    assert first[0] in top_k
