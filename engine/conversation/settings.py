"""The settings every engine's conversation has (kept free of heavy imports): how turns end
(:class:`TurnSettings`), the persona, and which camera frames the model is sent
(:class:`FramePolicySettings`). Each engine's settings dataclass extends
:class:`ConversationSettings`. These defaults are the server's too: ``ServerConfig`` reads
them, so each is written once here, and each field is named as its flag (``--hangover-ms``:
``turns.hangover_ms``; ``--camera-size``: ``camera.size``)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: the end-of-turn choices: 'fixed' (always ``hangover_ms``) or 'smart' (Smart Turn v3.2
#: judges each pause, ``hangover_ms`` the fallback)
TURN_MODELS = ("fixed", "smart")

#: who the assistant talks to (``--addressee``: :mod:`~omnicall.engine.conversation.addressee`)
ADDRESSEES = ("auto", "any", "camera", "wake")

#: the longest persona an engine takes (a client's ``session.update`` or
#: ``set_instructions``): ~2,000 tokens, longer than any voice assistant's persona needs
MAX_INSTRUCTIONS_CHARS = 8_000


@dataclass(frozen=True)
class FramePolicySettings:
    """The :mod:`frame policy <omnicall.engine.conversation.frame_policy>`'s knobs, the
    ``--camera-*`` flags without their prefix (its docstring says why these defaults fit a
    250 kbps uplink and a model's context)."""

    speaking_fps: float = 1.0  # while the caller speaks: what the words refer to, ~200 kbps
    quiet_fps: float = 0.1  # otherwise: one frame per 10 s keeps the scene current
    #: mean absolute difference (0..255) of 32 x 32 grayscale thumbnails below which a frame
    #: is a duplicate: sensor noise and exposure drift stay ~1-3, a hand entering is ~8+
    duplicate_mad: float = 4.0
    size: int = 448  # long side in pixels: 448 x 336 at 4:3, ~20 KB, 192 vision tokens
    sharp_size: int = 896  # the long side when words ask to look: ~80 KB, once per turn
    jpeg_quality: int = 70  # text stays legible at the sharp size; ~20% smaller than 80
    max_images: int = 4  # images kept in one conversation's context (<1k tokens)

    def __post_init__(self) -> None:
        if not (0 < self.quiet_fps <= self.speaking_fps <= 30):
            raise ValueError("need 0 < quiet_fps <= speaking_fps <= 30")
        if not 16 <= self.size <= self.sharp_size <= 4096:
            raise ValueError("need 16 <= size <= sharp_size <= 4096")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError("jpeg_quality must be in [1, 100]")
        if self.max_images < 1 or self.duplicate_mad < 0:
            raise ValueError("max_images must be >= 1 and duplicate_mad >= 0")


@dataclass(frozen=True)
class TurnSettings:
    """How the caller's turns end: what a :class:`~omnicall.engine.conversation.listener.
    ListenRuntime` is built from."""

    hangover_ms: int = 400  # the fixed end-of-turn silence (the fallback with 'smart')
    turn_model: str = "fixed"  # one of :data:`TURN_MODELS`
    #: speech that starts this soon after a reply's first sound is taken for its echo
    echo_warmup_ms: int = 600


@dataclass(frozen=True)
class ConversationSettings:
    """What every engine's settings have: the turn settings as one object, the persona, the
    camera's frame policy and the caller's language."""

    turns: TurnSettings = field(default_factory=TurnSettings)
    instructions: str = ""  # the persona: the system prompt ('' = the engine's own)
    #: which camera frames go to the model (the frame policy's rate, sizes, retention)
    camera: FramePolicySettings = field(default_factory=FramePolicySettings)
    #: the caller's language: 'auto' (the cascade's Whisper detects it per turn) or a code
    #: ('en', 'de', ...): the cascade's recognition and replies, and which words ask the
    #: camera to look closely (the sharp end-of-turn frame; other languages: never sharp)
    language: str = "en"
