"""The settings every engine's conversation has (kept free of heavy imports): how turns end,
the echo warm-up, the persona, and which camera frames the model is sent. Each engine's
settings dataclass extends this one."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FramePolicySettings:
    """The :mod:`frame policy <omnicall.engine.conversation.frame_policy>`'s knobs (its
    docstring says why these defaults fit a 250 kbps uplink and a model's context)."""

    speaking_fps: float = 1.0  # while the caller speaks: what the words refer to, ~200 kbps
    quiet_fps: float = 0.1  # otherwise: one frame per 10 s keeps the scene current
    #: mean absolute difference (0..255) of 32 x 32 grayscale thumbnails below which a frame
    #: is a duplicate: sensor noise and exposure drift stay ~1-3, a hand entering is ~8+
    duplicate_mad: float = 4.0
    normal_long_side_px: int = 448  # 448 x 336 at 4:3: ~20 KB, 192 vision tokens
    sharp_long_side_px: int = 896  # when words ask to look: ~80 KB, once per turn
    jpeg_quality: int = 70  # text stays legible at the sharp size; ~20% smaller than 80
    max_images: int = 4  # images kept in one conversation's context (<1k tokens)

    def __post_init__(self) -> None:
        if not (0 < self.quiet_fps <= self.speaking_fps <= 30):
            raise ValueError("need 0 < quiet_fps <= speaking_fps <= 30")
        if not 16 <= self.normal_long_side_px <= self.sharp_long_side_px <= 4096:
            raise ValueError("need 16 <= normal_long_side_px <= sharp_long_side_px <= 4096")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError("jpeg_quality must be in [1, 100]")
        if self.max_images < 1 or self.duplicate_mad < 0:
            raise ValueError("max_images must be >= 1 and duplicate_mad >= 0")


@dataclass(frozen=True)
class TurnSettings:
    hangover_ms: int = 400  # the fixed end-of-turn silence (the fallback with 'smart')
    #: 'fixed' (always ``hangover_ms``) or 'smart': Smart Turn v3.2 judges each pause
    turn_model: str = "fixed"
    #: speech that starts this soon after a reply's first sound is taken for its echo
    echo_warmup_ms: int = 600
    instructions: str = ""  # the persona: the system prompt ('' = the engine's own)
    #: which camera frames go to the model (the frame policy's rate, sizes, retention)
    camera: FramePolicySettings = field(default_factory=FramePolicySettings)
