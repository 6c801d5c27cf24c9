"""Build and save a tiny random-weight Qwen3-Omni checkpoint (tests, CPU benchmarks).

Real classes, real special-token ids and real codec geometry (16 codebooks x 2048, 1920
samples per 80 ms frame at 24 kHz); a few layers and small widths so it runs on a CPU in
seconds. The tokenizer is a byte-level BPE (no merges) whose vocabulary covers all 152,064
Thinker ids, with Qwen's special tokens at their real ids, so any generated id decodes.
``real_size_config()`` gives the released 30B-A3B dimensions for random-weight GPU runs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import torch

CONFIG_DIR = Path(__file__).parent
SPECIAL_TOKENS = {
    "<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
    "<|vision_start|>": 151652, "<|vision_end|>": 151653, "<|image_pad|>": 151655,
    "<|video_pad|>": 151656, "<|audio_start|>": 151669, "<|audio_end|>": 151670,
    "<tts_pad>": 151671, "<tts_text_bos>": 151672, "<tts_text_eod>": 151673,
    "<|audio_pad|>": 151675,
}
ROLE_WORDS = {"system": 8948, "user": 872, "assistant": 77091}


def tiny_config_dict() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIG_DIR / "tiny_config.json").read_text())
    return data


def real_size_config_dict() -> dict[str, Any]:
    """The tiny config with every size-relevant field replaced by the released 30B-A3B's."""
    config = tiny_config_dict()
    real = json.loads((CONFIG_DIR / "real_dims.json").read_text())

    def merge(into: dict[str, Any], values: dict[str, Any]) -> None:
        for key, value in values.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict) and key not in (
                    "rope_parameters", "speaker_id"):
                merge(into[key], value)
            else:
                into[key] = copy.deepcopy(value)

    merge(config, real)

    def drop_layer_types(node: dict[str, Any]) -> None:  # derived from the layer count
        node.pop("layer_types", None)
        for value in node.values():
            if isinstance(value, dict):
                drop_layer_types(value)

    drop_layer_types(config)
    text = config["thinker_config"]["text_config"]
    text["num_local_experts"] = text.get("num_experts", text.get("num_local_experts"))
    talker_text = config["talker_config"]["text_config"]
    talker_text["num_local_experts"] = talker_text.get("num_experts")
    config["talker_config"]["thinker_hidden_size"] = text["hidden_size"]
    config["dtype"] = "bfloat16"
    return config


def build_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for index, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet())):
        vocab[char] = index
    for word, index in ROLE_WORDS.items():
        vocab[word] = index
    for token, index in SPECIAL_TOKENS.items():
        vocab[token] = index
    used = set(vocab.values())
    for index in range(152_064):
        if index not in used:
            vocab[f"<|t{index}|>"] = index
    bpe = models.BPE(vocab=vocab, merges=[])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS)})
    return fast


def build_tiny(path: Path, seed: int = 0, config: dict[str, Any] | None = None) -> Path:
    """Instantiate (random weights, fixed seed), save model + tokenizer + features config."""
    from transformers import (
        Qwen3OmniMoeConfig,
        Qwen3OmniMoeForConditionalGeneration,
        WhisperFeatureExtractor,
    )

    torch.manual_seed(seed)
    config = config or tiny_config_dict()
    model = Qwen3OmniMoeForConditionalGeneration(Qwen3OmniMoeConfig(**config))
    init_talker_experts(model, seed)
    model.eval()
    if getattr(model, "has_talker", False):
        _audible(model.code2wav)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path))
    build_tokenizer().save_pretrained(str(path))
    WhisperFeatureExtractor(feature_size=128, sampling_rate=16_000).save_pretrained(str(path))
    return path


def init_talker_experts(model: Any, seed: int = 0, std: float = 0.02) -> None:
    """transformers (5.24) leaves the Talker's fused MoE expert weights as ``torch.empty``:
    whatever was in memory, sometimes NaN (the Talker then samples from NaN logits, depending
    on what the process did before). A random model must draw them like every other weight."""
    generator = torch.Generator(device="cpu").manual_seed(seed + 1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.startswith("talker.") and name.endswith(("experts.gate_up_proj",
                                                             "experts.down_proj")):
                values = torch.randn(param.shape, generator=generator, device="cpu") * std
                param.copy_(values.to(device=param.device, dtype=param.dtype))


def _audible(code2wav: Any, target_std: float = 0.1) -> None:
    """Random code2wav weights give a ~1e-8 waveform, which is silence as 16-bit PCM; scale
    the last convolution so the tiny model's speech is audible noise (std ~0.1)."""
    codes = torch.randint(0, 2048, (1, code2wav.config.num_quantizers, 12),
                          generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        std = float(code2wav(codes).std())
        if std > 0:
            last = code2wav.decoder[-1].conv
            last.weight.mul_(target_std / std)
            if last.bias is not None:
                last.bias.mul_(target_std / std)
