"""Loading a Qwen3-Omni checkpoint directory: model parts, tokenizer, audio features, ids.

``load_omni(path, options)`` is the one place that calls ``from_pretrained``: bf16 +
flash_attention_2 on a GPU, fp32 + sdpa on CPU (bf16 matmuls are ~250x slower on this CPU),
optional 4-bit weights (bitsandbytes), and a text-only mode that drops the Talker and
code2wav (``disable_talker``). A missing or incomplete directory is an :class:`EngineLoadError`
that names what is missing.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from omnicall.engine.errors import EngineLoadError

logger = logging.getLogger(__name__)

# The Qwen2-VL/CLIP normalisation the released image and video processors use.
IMAGE_MEAN = (0.48145466, 0.4578275, 0.40821073)
IMAGE_STD = (0.26862954, 0.26130258, 0.27577711)
AUDIO_RATE_HZ = 16_000
OUTPUT_RATE_HZ = 24_000


@dataclass(frozen=True)
class LoadOptions:
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    attention: str = "auto"  # auto | sdpa | eager | flash_attention_2
    load_in_4bit: bool = False
    text_only: bool = False  # disable_talker(): captions only


def _resolve(options: LoadOptions) -> tuple[torch.device, torch.dtype, str]:
    device_name = options.device
    if device_name == "auto":
        device_name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device_name)
    if options.dtype == "auto":
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    else:
        dtype = getattr(torch, options.dtype)
    attention = options.attention
    if attention == "auto":
        attention = "sdpa"
        if device.type == "cuda" and importlib.util.find_spec("flash_attn") is not None:
            attention = "flash_attention_2"
    return device, dtype, attention


REQUIRED_FILES = ("config.json",)


def check_directory(path: Path) -> None:
    if not path.is_dir():
        raise EngineLoadError(f"Qwen3-Omni model directory {path} does not exist; pass --model "
                              "PATH to a local checkpoint (weights are never downloaded)")
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    weights = list(path.glob("*.safetensors")) + list(path.glob("*.bin"))
    if not weights:
        missing.append("*.safetensors weights")
    tokenizer_files = ("tokenizer.json", "vocab.json", "tokenizer_config.json")
    if not any((path / name).is_file() for name in tokenizer_files):
        missing.append("tokenizer (tokenizer.json or vocab.json + merges.txt)")
    if missing:
        raise EngineLoadError(f"Qwen3-Omni model directory {path} is incomplete: missing "
                              f"{', '.join(missing)}")
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EngineLoadError(f"{path / 'config.json'} is unreadable: {exc}") from exc
    if config.get("model_type") != "qwen3_omni_moe":
        raise EngineLoadError(f"{path} holds a {config.get('model_type')!r} model, not "
                              "qwen3_omni_moe")


@dataclass
class OmniModel:
    """A loaded checkpoint and the ids/geometry the streaming code needs."""

    model: Any  # Qwen3OmniMoeForConditionalGeneration
    tokenizer: Any
    feature_extractor: Any  # WhisperFeatureExtractor (128 mel bins)
    device: torch.device
    dtype: torch.dtype
    path: Path | None = None

    def __post_init__(self) -> None:
        config = self.model.config
        thinker_config = config.thinker_config
        self.thinker = self.model.thinker
        self.has_talker = bool(getattr(self.model, "has_talker", False))
        self.talker = self.model.talker if self.has_talker else None
        self.code2wav = self.model.code2wav if self.has_talker else None
        talker_config = config.talker_config
        self.accept_hidden_layer = int(talker_config.accept_hidden_layer)
        self.im_start_id = int(config.im_start_token_id)
        self.im_end_id = int(config.im_end_token_id)
        self.user_id = int(config.user_token_id)
        self.assistant_id = int(config.assistant_token_id)
        self.system_id = int(config.system_token_id)
        self.audio_id = int(thinker_config.audio_token_id)
        self.audio_start_id = int(thinker_config.audio_start_token_id)
        self.audio_end_id = int(thinker_config.audio_end_token_id)
        self.video_id = int(thinker_config.video_token_id)
        self.image_id = int(thinker_config.image_token_id)
        self.vision_start_id = int(thinker_config.vision_start_token_id)
        self.vision_end_id = int(thinker_config.vision_end_token_id)
        self.tts_bos_id = int(config.tts_bos_token_id)
        self.tts_eos_id = int(config.tts_eos_token_id)
        self.tts_pad_id = int(config.tts_pad_token_id)
        self.n_window = int(thinker_config.audio_config.n_window)
        vision = thinker_config.vision_config
        self.patch_size = int(vision.patch_size)
        self.temporal_patch_size = int(vision.temporal_patch_size)
        self.merge_size = int(vision.spatial_merge_size)
        self.position_id_per_seconds = float(thinker_config.position_id_per_seconds)
        if self.has_talker:
            self.num_code_groups = int(talker_config.num_code_groups)
            self.codec_eos_id = int(talker_config.codec_eos_token_id)
            self.samples_per_frame = int(self.model.code2wav.total_upsample)
            self.speakers = {k.lower(): int(v) for k, v in talker_config.speaker_id.items()}

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def audio_tokens(self, mel_frames: int) -> int:
        from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import (
            _get_feat_extract_output_lengths,
        )

        return int(_get_feat_extract_output_lengths(torch.tensor(mel_frames), self.n_window))

    def audio_features(self, samples: np.ndarray) -> torch.Tensor:
        """16 kHz float/int16 mono -> (1, 128, frames) log-mel features."""
        audio = samples.astype(np.float32)
        if samples.dtype == np.int16:
            audio /= 32768.0
        features = self.feature_extractor(audio, sampling_rate=AUDIO_RATE_HZ,
                                          return_tensors="pt", padding=False,
                                          truncation=False).input_features
        return torch.as_tensor(features)


def build_feature_extractor(path: Path | None) -> Any:
    from transformers import WhisperFeatureExtractor

    if path is not None and (path / "preprocessor_config.json").is_file():
        return WhisperFeatureExtractor.from_pretrained(str(path))
    return WhisperFeatureExtractor(feature_size=128, sampling_rate=AUDIO_RATE_HZ)


def load_omni(path: Path, options: LoadOptions | None = None) -> OmniModel:
    options = options or LoadOptions()
    check_directory(path)
    try:
        from transformers import AutoTokenizer, Qwen3OmniMoeForConditionalGeneration
    except ImportError as exc:
        raise EngineLoadError(f"transformers with Qwen3-Omni support is missing ({exc}); "
                              "run `make install`") from exc
    device, dtype, attention = _resolve(options)
    kwargs: dict[str, Any] = {"dtype": dtype, "attn_implementation": attention}
    if options.load_in_4bit:
        if importlib.util.find_spec("bitsandbytes") is None:
            raise EngineLoadError("4-bit loading needs bitsandbytes: pip install bitsandbytes")
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_compute_dtype=dtype, bnb_4bit_quant_type="nf4")
        kwargs["device_map"] = {"": device.index or 0} if device.type == "cuda" else None
    try:
        model = Qwen3OmniMoeForConditionalGeneration.from_pretrained(str(path), **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError, KeyError) as exc:
        raise EngineLoadError(f"could not load Qwen3-Omni from {path}: {exc}") from exc
    if options.text_only and getattr(model, "has_talker", False):
        model.disable_talker()
    if not options.load_in_4bit:
        model = model.to(device)  # type: ignore[arg-type]
    model.eval()
    logger.info("loaded Qwen3-Omni from %s on %s (%s, %s attention%s)", path, device, dtype,
                attention, ", text only" if options.text_only else "")
    return OmniModel(model, tokenizer, build_feature_extractor(path), device, dtype, path)
