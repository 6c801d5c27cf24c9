"""A tiny random-weight Qwen3-Omni the tests build, save and reload (real classes and ids)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.model import OmniModel, load_omni
from omnicall.engine.qwen_omni.tiny import build_tiny


@pytest.fixture(scope="session")
def omni_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny(tmp_path_factory.mktemp("qwen3-omni-tiny"))


@pytest.fixture(scope="session")
def omni(omni_dir: Path) -> OmniModel:
    torch.manual_seed(0)
    return load_omni(omni_dir)


def noise(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(seconds * 16_000)) * 0.1).astype(np.float32)


def frames(count: int = 2, width: int = 96, height: int = 64, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 255, (height, width, 3), dtype=np.uint8) for _ in range(count)]


def user_turn_parts(m: OmniModel, text: str) -> tuple[list[int], list[int]]:
    """ids before and after the audio of a user turn, ending with the assistant prefix."""
    before = [m.im_start_id, m.user_id, *m.encode("\n"), m.audio_start_id]
    after = [m.audio_end_id, *m.encode(text), m.im_end_id, *m.encode("\n")]
    after += [m.im_start_id, m.assistant_id, *m.encode("\n")]
    return before, after


def system_ids(m: OmniModel) -> list[int]:
    return [m.im_start_id, *m.encode("system\nYou are helpful."), m.im_end_id, *m.encode("\n")]


def prefill_audio_turn(m: OmniModel, state: th.ThinkerState, audio: np.ndarray,
                       text: str = "What is this?") -> torch.Tensor:
    """Append a user turn with ``audio`` as one audio segment; returns the features."""
    before, after = user_turn_parts(m, text)
    features = m.audio_features(audio)
    with torch.inference_mode():
        th.append(m, state, before)
        th.append(m, state, [m.audio_id] * m.audio_tokens(features.shape[-1]), "audio",
                  input_features=features, media_s=len(audio) / 16_000)
        th.append(m, state, after)
    return features
