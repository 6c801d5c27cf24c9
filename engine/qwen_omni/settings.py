"""Settings of the native Qwen3-Omni engine (kept free of heavy imports)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OmniSettings:
    model: str = ""  # checkpoint directory (required)
    device: str = "auto"
    dtype: str = "auto"
    attention: str = "auto"
    load_in_4bit: bool = False
    text_only: bool = False
    speaker: str = "ethan"
    system_prompt: str = ("You are a helpful voice assistant on a video call. Answer briefly, in "
                          "one or two spoken sentences.")
    max_new_tokens: int = 200
    max_frames: int = 1500  # 2 minutes of speech per reply
    window_s: float = 30.0  # media kept in the Thinker cache (sliding window)
    video_max_pixels: int = 224 * 224  # per sampled frame fed to the vision encoder
    hangover_ms: int = 400
    turn_model: str = "fixed"  # 'smart': Smart Turn v3.2 judges each pause (engine/turn_judge.py)
    echo_warmup_ms: int = 600
    max_calls: int = 4
    captions: bool = True  # user captions from the bundled Whisper tiny.en (off the model path)
