"""Loading a Qwen3-Omni directory: real from_pretrained, clear errors, text-only mode."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from omnicall.engine.errors import EngineLoadError
from omnicall.engine.qwen_omni.model import LoadOptions, OmniModel, load_omni
from omnicall.engine.qwen_omni.video_patches import fit_size, patchify
from tests.qwen_fixtures import frames


def test_round_trip_keeps_real_ids_and_geometry(omni: OmniModel) -> None:
    assert omni.has_talker and omni.samples_per_frame == 1920
    assert omni.num_code_groups == 16 and omni.codec_eos_id == 2150
    assert (omni.im_start_id, omni.im_end_id, omni.audio_id) == (151644, 151645, 151675)
    assert omni.encode("<|im_start|>") == [151644]
    assert omni.decode(omni.encode("hello there")) == "hello there"
    assert omni.dtype == torch.float32 and omni.device.type == "cpu"
    assert omni.audio_tokens(100) == 13  # one second of 10 ms mel frames


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EngineLoadError, match="does not exist"):
        load_omni(tmp_path / "nope")


def test_incomplete_directory_names_what_is_missing(omni_dir: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(omni_dir / "config.json", partial / "config.json")
    with pytest.raises(EngineLoadError, match=r"safetensors.*tokenizer"):
        load_omni(partial)


def test_wrong_model_type_is_rejected(omni_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(omni_dir, other)
    (other / "config.json").write_text('{"model_type": "llama"}')
    with pytest.raises(EngineLoadError, match="not qwen3_omni_moe"):
        load_omni(other)


def test_text_only_mode_drops_the_talker(omni_dir: Path) -> None:
    m = load_omni(omni_dir, LoadOptions(text_only=True))
    assert not m.has_talker and m.talker is None and m.code2wav is None
    assert not hasattr(m.model, "talker")


def test_four_bit_needs_bitsandbytes(omni_dir: Path) -> None:
    pytest.importorskip("torch")
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is not None:
        pytest.skip("bitsandbytes installed: 4-bit loading is exercised on GPU runs")
    with pytest.raises(EngineLoadError, match="bitsandbytes"):
        load_omni(omni_dir, LoadOptions(load_in_4bit=True))


def test_patchify_geometry(omni: OmniModel) -> None:
    clip = patchify(omni, frames(3, width=100, height=70), fps=2.0, max_pixels=64 * 64)
    t, h, w = clip.grid_thw[0].tolist()
    assert t == 2  # 3 frames padded to 4, temporal patch 2
    assert clip.pixel_values.shape == (t * h * w, 3 * 2 * 16 * 16)
    assert clip.tokens == t * h * w // 4
    assert fit_size(640, 480, 224 * 224, 32) == (256, 192)


def test_tiny_talker_experts_are_drawn_not_left_uninitialized(tmp_path: Path) -> None:
    """transformers leaves the Talker's fused expert weights as torch.empty (whatever was in
    memory, sometimes NaN); the tiny builder draws them, so two builds are identical."""
    import torch
    from safetensors.torch import load_file

    from omnicall.engine.qwen_omni.tiny import build_tiny

    garbage = torch.full((4_000_000,), float("nan"))  # leave NaN in freed memory
    del garbage
    weights = []
    for name in ("a", "b"):
        folder = build_tiny(tmp_path / name)
        tensors: dict[str, torch.Tensor] = {}
        for file in sorted(folder.glob("*.safetensors")):
            tensors.update(load_file(str(file)))
        weights.append(tensors)
    experts = [k for k in weights[0] if k.startswith("talker.") and ".experts." in k]
    assert experts
    for key in experts:
        assert torch.isfinite(weights[0][key]).all(), key
        assert 0.005 < float(weights[0][key].std()) < 0.1, key
        assert torch.equal(weights[0][key], weights[1][key]), key
