"""Settings of the native Qwen3-Omni engine (kept free of heavy imports)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omnicall.engine.conversation.settings import ConversationSettings

DEFAULT_INSTRUCTIONS = ("You are a helpful voice assistant on a video call. Answer briefly, "
                        "in one or two spoken sentences.")


@dataclass(frozen=True)
class OmniSettings(ConversationSettings):
    """The turns, the camera's frame policy (``camera``) and the persona (``instructions``,
    '' = the built-in :data:`DEFAULT_INSTRUCTIONS`) are :class:`ConversationSettings`'. A field
    with help text is the server's flag of the same name, declared here only."""

    model: str = field(default="", metadata={  # required
        "help": "local Qwen3-Omni checkpoint directory (from_pretrained)"})
    device: str = field(default="auto", metadata={"help": "auto, cpu, cuda, cuda:N"})
    dtype: str = field(default="auto", metadata={
        "help": "auto (bf16 on GPU, fp32 on CPU), bfloat16, float16, float32"})
    attention: str = field(default="auto", metadata={
        "help": "auto (flash_attention_2 when installed on GPU), sdpa, eager"})
    load_in_4bit: bool = field(default=False, metadata={
        "help": "4-bit weights (needs bitsandbytes and a GPU)"})
    text_only: bool = field(default=False, metadata={
        "help": "disable the Talker (captions only, less memory)"})
    speaker: str = field(default="ethan", metadata={"help": "Talker voice"})
    max_new_tokens: int = 200
    max_frames: int = 1500  # 2 minutes of speech per reply
    window_s: float = field(default=30.0, metadata={  # a sliding window
        "help": "seconds of audio/video kept in the Thinker cache"})
    #: a cap per camera frame fed to the vision encoder: the frame policy's sizes (``camera``:
    #: ``size``, ``sharp_size``) fit under it, so the policy decides
    video_max_pixels: int = 896 * 672
    max_calls: int = 4  # the server's --max-sessions
    captions: bool = True  # user captions from the bundled Whisper tiny.en (off the model path)
