"""Settings of the native Qwen3-Omni engine (kept free of heavy imports)."""

from __future__ import annotations

from dataclasses import dataclass

from omnicall.engine.conversation.settings import ConversationSettings

DEFAULT_INSTRUCTIONS = ("You are a helpful voice assistant on a video call. Answer briefly, "
                        "in one or two spoken sentences.")


@dataclass(frozen=True)
class OmniSettings(ConversationSettings):
    """The turns, the camera's frame policy (``camera``) and the persona (``instructions``,
    '' = the built-in :data:`DEFAULT_INSTRUCTIONS`) are :class:`ConversationSettings`'."""

    model: str = ""  # checkpoint directory (required)
    device: str = "auto"
    dtype: str = "auto"
    attention: str = "auto"
    load_in_4bit: bool = False
    text_only: bool = False
    speaker: str = "ethan"
    max_new_tokens: int = 200
    max_frames: int = 1500  # 2 minutes of speech per reply
    window_s: float = 30.0  # media kept in the Thinker cache (sliding window)
    #: a cap per camera frame fed to the vision encoder: the frame policy's sizes (``camera``:
    #: ``size``, ``sharp_size``) fit under it, so the policy decides
    video_max_pixels: int = 896 * 672
    max_calls: int = 4
    captions: bool = True  # user captions from the bundled Whisper tiny.en (off the model path)
