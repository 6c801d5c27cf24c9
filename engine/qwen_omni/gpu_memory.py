"""Expected GPU memory of a Qwen3-Omni call: weights + KV cache (exact, from the config) +
the seed reference line.

KV bytes per token = layers x 2 (K and V) x kv_heads x head_dim x bytes. Media arrive at
``audio_tokens_per_s`` (13 for the audio encoder) plus video tokens (one per 32x32 px per 2
frames). With the sliding window (``window_s``) the media part stops growing. The seed figure
``0.92 GB/s x duration + 12.3 GB`` (BF16, 120 s-class video, no window, generate()) is
printed beside it as the reference point.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

SEED_GB_PER_S = 0.92
SEED_BASE_GB = 12.3
AUDIO_TOKENS_PER_S = 13.0
BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "int4": 0.5}


def _get(config: Any, name: str) -> Any:
    return config[name] if isinstance(config, dict) else getattr(config, name)


def kv_bytes_per_token(text_config: Any, dtype_bytes: float) -> int:
    heads = _get(text_config, "num_attention_heads")
    hidden = _get(text_config, "hidden_size")
    head_dim = (text_config.get("head_dim") if isinstance(text_config, dict)
                else getattr(text_config, "head_dim", None)) or hidden // heads
    kv_heads = _get(text_config, "num_key_value_heads")
    layers = _get(text_config, "num_hidden_layers")
    return int(layers * 2 * kv_heads * head_dim * dtype_bytes)


def video_tokens_per_s(fps: float, width: int, height: int) -> float:
    """One token per 32x32 px per 2 frames (patch 16, temporal 2, 2x2 merge)."""
    return (width // 32) * (height // 32) * fps / 2


@dataclass(frozen=True)
class MemoryEstimate:
    weights_gb: float
    thinker_kv_per_token: int
    talker_kv_per_token: int
    tokens: int
    kv_gb: float
    total_gb: float
    seed_gb: float


def count_parameters(config_dict: dict[str, Any]) -> int:
    """Parameter count of the whole model, instantiated on the meta device (no memory)."""
    import torch
    from transformers import Qwen3OmniMoeConfig, Qwen3OmniMoeForConditionalGeneration

    with torch.device("meta"):
        model = Qwen3OmniMoeForConditionalGeneration(Qwen3OmniMoeConfig(**config_dict))
    return sum(p.numel() for p in model.parameters())


def estimate(config_dict: dict[str, Any], duration_s: float, dtype: str = "bfloat16",
             window_s: float | None = 30.0, video_fps: float = 2.0,
             video_size: tuple[int, int] = (448, 336), text_tokens: int = 2048,
             parameters: int | None = None) -> MemoryEstimate:
    size = BYTES[dtype]
    kv_size = 2 if dtype == "int4" else size  # 4-bit weights keep a bf16 cache
    thinker_kv = kv_bytes_per_token(config_dict["thinker_config"]["text_config"], kv_size)
    talker_kv = kv_bytes_per_token(config_dict["talker_config"]["text_config"], kv_size)
    media_s = duration_s if window_s is None else min(duration_s, window_s)
    rate = AUDIO_TOKENS_PER_S + video_tokens_per_s(video_fps, *video_size)
    tokens = int(media_s * rate) + text_tokens
    params = parameters if parameters is not None else count_parameters(config_dict)
    weights = params * size / 1e9
    # the Talker re-reads the user side of the conversation each reply: same token count
    kv = tokens * (thinker_kv + talker_kv) / 1e9
    return MemoryEstimate(weights, thinker_kv, talker_kv, tokens, kv, weights + kv,
                          SEED_GB_PER_S * duration_s + SEED_BASE_GB)


def main(argv: list[str] | None = None) -> int:
    from omnicall.engine.qwen_omni.tiny import real_size_config_dict, tiny_config_dict

    parser = argparse.ArgumentParser(prog="omnicall memory",
                                     description="expected GPU memory of one Qwen3-Omni call")
    parser.add_argument("--model", default="real", help="'real' (30B-A3B dims), 'tiny', or a "
                        "checkpoint directory with config.json")
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(BYTES))
    parser.add_argument("--duration", type=float, nargs="*", default=[30, 60, 120, 300, 600])
    parser.add_argument("--window", type=float, default=30.0, help="media window in seconds "
                        "(0 = none, as generate())")
    parser.add_argument("--video-fps", type=float, default=2.0)
    parser.add_argument("--video-size", default="448x336")
    args = parser.parse_args(argv)
    if args.model == "real":
        config = real_size_config_dict()
    elif args.model == "tiny":
        config = tiny_config_dict()
    else:
        import json
        from pathlib import Path

        config = json.loads((Path(args.model) / "config.json").read_text())
    width, height = (int(v) for v in args.video_size.split("x"))
    params = count_parameters(config)
    window = args.window or None
    print(f"model {args.model}: {params / 1e9:.2f} B parameters, {args.dtype}; "
          f"media window {'none' if window is None else f'{window:.0f} s'}; "
          f"video {args.video_fps} fps {width}x{height}")
    print(f"{'call s':>7} {'tokens':>8} {'weights GB':>11} {'KV GB':>7} {'total GB':>9} "
          f"{'no-window GB':>13} {'seed GB':>8}")
    for duration in args.duration:
        e = estimate(config, duration, args.dtype, window, args.video_fps, (width, height),
                     parameters=params)
        unbounded = estimate(config, duration, args.dtype, None, args.video_fps,
                             (width, height), parameters=params)
        print(f"{duration:>7.0f} {e.tokens:>8} {e.weights_gb:>11.2f} {e.kv_gb:>7.2f} "
              f"{e.total_gb:>9.2f} {unbounded.total_gb:>13.2f} {e.seed_gb:>8.2f}")
    e = estimate(config, 1, args.dtype, window, parameters=params)
    print(f"KV per token: thinker {e.thinker_kv_per_token / 1024:.0f} KiB, talker "
          f"{e.talker_kv_per_token / 1024:.0f} KiB")
    return 0
