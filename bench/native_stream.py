"""Streaming Thinker-Talker vs transformers' generate(): time to first audio, RTF, identity.

Usage:
  python bench/native_stream.py                       # tiny random model, CPU (built here)
  python bench/native_stream.py --model PATH          # a real checkpoint directory
  python bench/native_stream.py --config real --layers 1 --device cpu --dtype float32
        # real widths and shapes, one layer per stack (1.7 B params): a CPU smoke test
  python bench/native_stream.py --config real --device cuda --dtype bfloat16
        # full-size Qwen3-Omni-30B-A3B dimensions with random BF16 weights (needs ~75 GB
        # of GPU memory): real-size latency, stage breakdown and memory vs call duration

Both paths get the same prompt (system text, a user turn with ``--audio-s`` of audio, a
question) and greedy decoding. generate() returns audio only when the whole reply is done,
so its time to audio is its total time. The stream's first audio is the first code2wav chunk
(one 80 ms frame). ``identical`` means the same text tokens, bit-identical codec frames
(decoded the library's way they give generate()'s exact samples), and a streamed waveform
within half a 16-bit step (1.5e-5) of generate()'s: chunked decoding reorders float sums.
Last line:
``RESULT stream_first_ms=<> generate_first_ms=<> ratio=<> identical=<yes|no>``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.codec import StreamingCode2Wav
from omnicall.engine.qwen_omni.model import OmniModel, build_feature_extractor, load_omni
from omnicall.engine.qwen_omni.reply import ReplyOptions, ReplyStream
from omnicall.engine.qwen_omni.talker import GREEDY, Talker
from omnicall.engine.qwen_omni.tiny import (
    build_tiny,
    build_tokenizer,
    init_talker_experts,
    real_size_config_dict,
    tiny_config_dict,
)
from omnicall.engine.qwen_omni.video_patches import patchify, video_segment_ids

WAVE_TOLERANCE = 2.0 ** -16  # half a 16-bit step: below what egress can carry


def sync(m: OmniModel) -> None:
    if m.device.type == "cuda":
        torch.cuda.synchronize(m.device)


def shallow(config: dict[str, Any], layers: int) -> dict[str, Any]:
    """The same widths with ``layers`` layers per stack: real-size shapes on a CPU."""
    thinker, talker = config["thinker_config"], config["talker_config"]
    for part in (thinker["text_config"], talker["text_config"],
                 talker["code_predictor_config"], config["code2wav_config"]):
        part["num_hidden_layers"] = layers
        part.pop("layer_types", None)
    thinker["audio_config"]["encoder_layers"] = layers
    thinker["vision_config"]["depth"] = layers
    thinker["vision_config"]["deepstack_visual_indexes"] = [0]
    talker["accept_hidden_layer"] = min(talker["accept_hidden_layer"], layers)
    return config


def random_model(config_name: str, device: str, dtype: str, layers: int = 0) -> OmniModel:
    from transformers import Qwen3OmniMoeConfig, Qwen3OmniMoeForConditionalGeneration

    config = real_size_config_dict() if config_name == "real" else tiny_config_dict()
    if layers:
        config = shallow(config, layers)
    torch_dtype = getattr(torch, dtype)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch_dtype)
    try:
        with torch.device(device):
            torch.manual_seed(0)
            model = Qwen3OmniMoeForConditionalGeneration(Qwen3OmniMoeConfig(**config))
            init_talker_experts(model)
    finally:
        torch.set_default_dtype(previous)
    model.eval()
    return OmniModel(model, build_tokenizer(), build_feature_extractor(None),
                     torch.device(device), torch_dtype)


def prompt(m: OmniModel, audio_s: float) -> tuple[list[int], torch.Tensor, np.ndarray]:
    rng = np.random.default_rng(0)
    audio = (rng.standard_normal(int(audio_s * 16_000)) * 0.1).astype(np.float32)
    features = m.audio_features(audio)
    ids = [m.im_start_id, *m.encode("system\nYou are helpful."), m.im_end_id, *m.encode("\n")]
    ids += [m.im_start_id, m.user_id, *m.encode("\n"), m.audio_start_id]
    ids += [m.audio_id] * m.audio_tokens(features.shape[-1])
    ids += [m.audio_end_id, *m.encode("What do you hear?"), m.im_end_id, *m.encode("\n")]
    ids += [m.im_start_id, m.assistant_id, *m.encode("\n")]
    return ids, features, audio


def run_generate(m: OmniModel, ids: list[int], features: torch.Tensor, tokens: int,
                 frames: int) -> tuple[float, list[int], torch.Tensor]:
    input_ids = torch.tensor([ids], device=m.device)
    sync(m)
    started = time.perf_counter()
    with torch.inference_mode():
        seq, wav = m.model.generate(
            input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
            input_features=features.to(m.device, m.dtype),
            feature_attention_mask=torch.ones(1, features.shape[-1], dtype=torch.long,
                                              device=m.device),
            thinker_max_new_tokens=tokens, talker_max_new_tokens=frames, talker_do_sample=False)
    sync(m)
    return time.perf_counter() - started, seq[0, len(ids):].tolist(), wav.reshape(-1).float().cpu()


def prefill(m: OmniModel, ids: list[int], features: torch.Tensor,
            marks: dict[str, float] | None = None) -> th.ThinkerState:
    """The prompt as the engine feeds it: text, the audio segment, text (the audio step's
    time goes into ``marks`` when given)."""
    audio_at = [i for i, t in enumerate(ids) if t == m.audio_id]
    first, last = audio_at[0], audio_at[-1] + 1
    state = th.ThinkerState()
    with torch.inference_mode():
        th.append(m, state, ids[:first])
        sync(m)
        started = time.perf_counter()
        th.append(m, state, ids[first:last], "audio", input_features=features)
        sync(m)
        if marks is not None:
            marks["encoder_and_audio_prefill"] = time.perf_counter() - started
        th.append(m, state, ids[last:])
    sync(m)
    return state


def run_stream(m: OmniModel, ids: list[int], features: torch.Tensor, tokens: int, frames: int,
               talker: Talker, codec: StreamingCode2Wav) -> dict[str, Any]:
    """Prefill then stream, with stage times."""
    marks: dict[str, float] = {}
    codes: list[torch.Tensor] = []
    sync(m)
    started = time.perf_counter()
    state = prefill(m, ids, features, marks)
    marks["prefill_done"] = time.perf_counter() - started
    stream = ReplyStream(m, state, ReplyOptions(tokens, frames), talker, codec)
    assert stream.codec is not None
    push = stream.codec.push

    def keep(cs: Any, frame: torch.Tensor) -> None:
        codes.append(frame.cpu())
        push(cs, frame)

    stream.codec.push = keep  # type: ignore[method-assign]
    chunks: list[torch.Tensor] = []
    tokens_out: list[int] = []
    while not stream.done:
        out = stream.step()
        sync(m)
        now = time.perf_counter() - started
        tokens_out += out.tokens
        if out.tokens and "thinker_first_token" not in marks:
            marks["thinker_first_token"] = now
        if stream.talker_state is not None and "talker_prefill" not in marks:
            marks["talker_prefill"] = now
        if out.frames and "talker_first_frame" not in marks:
            marks["talker_first_frame"] = now
        if out.audio is not None and out.audio.numel():
            if "first_audio" not in marks:
                marks["first_audio"] = now
            chunks.append(out.audio.cpu())
    marks["total"] = time.perf_counter() - started
    return {"marks": marks, "tokens": tokens_out, "codes": codes,
            "wave": torch.cat(chunks) if chunks else torch.zeros(0)}


def stage_breakdown(m: OmniModel, talker: Talker, ids: list[int],
                    features: torch.Tensor) -> dict[str, float]:
    """One-off timings of the pieces of a Talker step: code predictor and code2wav."""
    state = prefill(m, ids, features)
    assert state.last_logits is not None
    with torch.inference_mode():
        first = torch.tensor([[int(state.last_logits.argmax())]], device=m.device)
        embed = m.thinker.get_input_embeddings()(first)[0]
        ts = talker.start(state, len(state.ids) - 3, embed)
        assert ts.last_hidden is not None
        code0 = talker.next_code(ts)
        c0 = talker.talker.get_input_embeddings()(torch.tensor([[code0]], device=m.device))
        sync(m)
        t0 = time.perf_counter()
        talker._predict_residuals(ts.last_hidden, c0, [None])
        sync(m)
        predictor_s = time.perf_counter() - t0
        codes = torch.randint(0, 2048, (1, m.num_code_groups, 1), device=m.device)
        t0 = time.perf_counter()
        assert m.code2wav is not None
        m.code2wav(codes)
        sync(m)
        code2wav_s = time.perf_counter() - t0
    return {"code_predictor_15_steps": predictor_s, "code2wav_1_frame": code2wav_s}


def batched_vs_sequential(m: OmniModel, ids: list[int], features: torch.Tensor, calls: int,
                          tokens: int, frames: int, talker: Talker,
                          codec: StreamingCode2Wav) -> tuple[float, float]:
    """Wall time to finish ``calls`` replies stepped together (one batched code-predictor
    pass per step) vs one after another."""
    from omnicall.engine.qwen_omni.reply import step_many

    def fresh() -> ReplyStream:
        return ReplyStream(m, prefill(m, ids, features), ReplyOptions(tokens, frames), talker,
                           codec)

    streams = [fresh() for _ in range(calls)]
    sync(m)
    started = time.perf_counter()
    while not all(s.done for s in streams):
        step_many([s for s in streams if not s.done])
    sync(m)
    batched = time.perf_counter() - started
    streams = [fresh() for _ in range(calls)]
    started = time.perf_counter()
    for stream in streams:
        while not stream.done:
            stream.step()
    sync(m)
    return batched, time.perf_counter() - started


def memory_vs_duration(m: OmniModel, durations: list[float], window_s: float | None,
                       video: bool) -> list[tuple[float, float, int]]:
    """Feed a call of each duration (1 s audio segments, a 2-frame video clip per 2 s) into one
    Thinker state; report peak GPU memory (or KV bytes on CPU) and cache length."""
    results = []
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 255, (336, 448, 3), dtype=np.uint8) for _ in range(2)]
    clip = patchify(m, frames, fps=2.0, max_pixels=448 * 336) if video else None
    for duration in durations:
        if m.device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(m.device)
        state = th.ThinkerState()
        with torch.inference_mode():
            th.append(m, state, [m.im_start_id, m.user_id, *m.encode("\n")])
            for second in range(int(duration)):
                audio = (rng.standard_normal(16_000) * 0.1).astype(np.float32)
                features = m.audio_features(audio)
                th.append(m, state, [m.audio_id] * m.audio_tokens(features.shape[-1]), "audio",
                          input_features=features, media_s=1.0)
                if clip is not None and second % 2 == 0:
                    th.append(m, state, video_segment_ids(m, clip), "video",
                              pixel_values_videos=clip.pixel_values,
                              video_grid_thw=clip.grid_thw.to(m.device),
                              video_second_per_grid=clip.second_per_grid, media_s=1.0)
                if window_s is not None:
                    th.evict(state, window_s, state.length)
        if m.device.type == "cuda":
            used = torch.cuda.max_memory_allocated(m.device) / 1e9
        else:
            assert state.cache is not None
            used = sum(layer.keys.numel() * layer.keys.element_size() * 2
                       for layer in state.cache.layers) / 1e9
        results.append((duration, used, state.cache_length()))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="", help="checkpoint directory (default: tiny)")
    parser.add_argument("--config", default="tiny", choices=["tiny", "real"],
                        help="random weights of this config when --model is not given")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="", help="default: bfloat16 on GPU, float32 on CPU")
    parser.add_argument("--audio-s", type=float, default=4.0)
    parser.add_argument("--tokens", type=int, default=32, help="reply tokens (Thinker)")
    parser.add_argument("--frames", type=int, default=64, help="Talker steps (80 ms each)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--memory", default="", help="call durations in s, e.g. 30,60,120")
    parser.add_argument("--layers", type=int, default=0, help="with --config real: this many "
                        "layers per stack (real widths and shapes on a CPU); 0 = all")
    parser.add_argument("--calls", type=int, default=4,
                        help="concurrent replies for the cross-call batching measurement")
    args = parser.parse_args()
    dtype = args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")
    load_started = time.perf_counter()
    if args.model:
        from omnicall.engine.qwen_omni.model import LoadOptions

        m = load_omni(Path(args.model), LoadOptions(device=args.device, dtype=dtype))
        source = args.model
    elif args.config == "tiny" and dtype == "float32" and not args.layers:
        tmp = Path(tempfile.mkdtemp(prefix="omni-tiny-"))
        m = load_omni(build_tiny(tmp), None)
        source = "tiny random (saved and reloaded)"
    else:
        m = random_model(args.config, args.device, dtype, args.layers)
        source = f"{args.config} random {dtype}" + (f", {args.layers} layer(s) per stack"
                                                     if args.layers else "")
    print(f"model: {source} on {m.device} ({m.dtype}); "
          f"{sum(p.numel() for p in m.model.parameters()) / 1e9:.2f} B params; "
          f"loaded in {time.perf_counter() - load_started:.1f} s")
    if m.device.type == "cuda":
        print(f"weights on GPU: {torch.cuda.memory_allocated(m.device) / 1e9:.1f} GB")
    ids, features, _ = prompt(m, args.audio_s)
    talker, codec = Talker(m, GREEDY), StreamingCode2Wav(m.code2wav)
    print(f"prompt: {len(ids)} tokens ({args.audio_s:.1f} s audio); reply {args.tokens} tokens,"
          f" {args.frames} Talker steps; code2wav tail {codec.tail} samples")

    # warm-up of both paths (kernels, allocator)
    run_generate(m, ids, features, 4, 4)
    run_stream(m, ids, features, 4, 4, talker, codec)
    gen_times, stream_runs = [], []
    gen_tokens: list[int] = []
    gen_wave = torch.zeros(0)
    for _ in range(args.runs):
        elapsed, gen_tokens, gen_wave = run_generate(m, ids, features, args.tokens, args.frames)
        gen_times.append(elapsed)
        stream_runs.append(run_stream(m, ids, features, args.tokens, args.frames, talker, codec))
    generate_ms = float(np.median(gen_times)) * 1000
    first_ms = float(np.median([r["marks"]["first_audio"] for r in stream_runs])) * 1000
    last = stream_runs[-1]
    audio_s = len(gen_wave) / 24_000
    stream_total = float(np.median([r["marks"]["total"] for r in stream_runs]))
    with torch.inference_mode():
        assert m.code2wav is not None
        library_decode = m.code2wav.chunked_decode(
            torch.stack(last["codes"], dim=-1).unsqueeze(0).to(m.device), chunk_size=300,
            left_context_size=25).reshape(-1).float().cpu()
    same_tokens = last["tokens"] == gen_tokens
    same_codes = torch.equal(library_decode, gen_wave)
    wave = last["wave"]
    max_diff = float((wave - gen_wave).abs().max()) if wave.shape == gen_wave.shape else 1.0
    same_wave = max_diff <= WAVE_TOLERANCE
    identical = same_tokens and same_codes and same_wave

    print(f"\ngenerate(): time to audio {generate_ms:.1f} ms (median of {args.runs}); "
          f"{audio_s:.2f} s of audio; RTF {np.median(gen_times) / max(audio_s, 1e-9):.3f}")
    print(f"stream:     first audio {first_ms:.1f} ms; total {stream_total * 1000:.1f} ms; "
          f"RTF {stream_total / max(audio_s, 1e-9):.3f}")
    print("stream stages (ms from start of prefill, last run):")
    for name, at in last["marks"].items():
        print(f"  {name:<28} {at * 1000:9.1f}")
    for name, seconds in stage_breakdown(m, talker, ids, features).items():
        print(f"  {name:<28} {seconds * 1000:9.1f} (one call)")
    print(f"identity: text tokens {same_tokens}; codec frames bit-identical {same_codes}; "
          f"streamed waveform max |diff| {max_diff:.2e} (<= {WAVE_TOLERANCE:g}: {same_wave})")
    if args.calls > 1:
        batched, sequential = batched_vs_sequential(m, ids, features, args.calls, args.tokens,
                                                    args.frames, talker, codec)
        print(f"cross-call batching: {args.calls} replies stepped together {batched * 1000:.0f}"
              f" ms vs one after another {sequential * 1000:.0f} ms "
              f"(x{sequential / batched:.2f} throughput)")
    if args.memory:
        durations = [float(d) for d in args.memory.split(",")]
        label = "peak GPU GB" if m.device.type == "cuda" else "KV GB"
        for window in (None, 30.0):
            rows = memory_vs_duration(m, durations, window, video=True)
            print(f"memory vs call duration (window {window}):")
            for duration, used, length in rows:
                seed = 0.92 * duration + 12.3
                print(f"  {duration:6.0f} s  {label} {used:8.2f}  cache {length:7d} tokens  "
                      f"(seed line {seed:.1f} GB)")
    ratio = first_ms / generate_ms
    print(f"RESULT stream_first_ms={first_ms:.1f} generate_first_ms={generate_ms:.1f} "
          f"ratio={ratio:.3f} identical={'yes' if identical else 'no'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
