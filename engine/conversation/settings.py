"""The settings every engine's conversation has (kept free of heavy imports): how turns end
(:class:`TurnSettings`), the persona, and which camera frames the model is sent
(:class:`FramePolicySettings`). Each engine's settings dataclass extends
:class:`ConversationSettings`. These defaults are the server's too: ``ServerConfig`` reads
them, so each is written once here: a field with help text in its metadata is a server
flag (``omnicall.app.flags``), named as the field (``--hangover-ms``: ``turns.hangover_ms``;
the camera's with their prefix, ``--camera-size``: ``camera.size``)."""

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

    #: while the caller speaks: what the words refer to, ~200 kbps
    speaking_fps: float = field(default=1.0, metadata={
        "help": "camera frames a second sent to the model while the user speaks (near-"
                "duplicates are skipped; the freshest frame always ends a turn)"})
    #: otherwise: one frame per 10 s keeps the scene current
    quiet_fps: float = field(default=0.1, metadata={
        "help": "camera frames a second sent to the model while the user is quiet"})
    #: mean absolute difference (0..255) of 32 x 32 grayscale thumbnails below which a frame
    #: is a duplicate: sensor noise and exposure drift stay ~1-3, a hand entering is ~8+
    duplicate_mad: float = 4.0
    #: 448 x 336 at 4:3, ~20 KB, 192 vision tokens
    size: int = field(default=448, metadata={
        "help": "long side in pixels of the frames sent to the model (448: ~20 KB, ~192 "
                "vision tokens)"})
    #: ~80 KB, once per turn
    sharp_size: int = field(default=896, metadata={
        "help": "long side of the end-of-turn frame when the words ask to look ('what is "
                "this', 'read this'; never above the camera's own size)"})
    #: text stays legible at the sharp size; ~20% smaller than 80
    jpeg_quality: int = field(default=70, metadata={
        "help": "JPEG quality (1-100) of the frames sent to the model"})
    #: images kept in one conversation's context (<1k tokens)
    max_images: int = field(default=4, metadata={
        "help": "camera images one conversation keeps in the model's context; older ones "
                "are replaced by a short note or deleted from the server's conversation"})

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

    hangover_ms: int = field(default=400, metadata={
        "help": "silence after speech that ends the user's turn (with --turn-model smart: "
                "the fallback when the model cannot judge)"})
    turn_model: str = field(default="fixed", metadata={  # one of :data:`TURN_MODELS`
        "help": "'fixed' (--hangover-ms) or 'smart' (Smart Turn v3.2 judges each pause: a "
                "short wait when the speaker sounds finished, a long one when not; cascade, "
                "qwen-omni, and remote with --turn-mode local; measured in docs/benchmarks.md)"})
    #: the VAD hears the caller's audio as it comes, not in whole 80 ms units (a turn's
    #: pause and end come 0-64 ms sooner; the listener's ``hear_ahead``); off: units only
    listen_ahead: bool = True
    echo_warmup_ms: int = field(default=600, metadata={
        "help": "after the assistant starts speaking, speech heard this long is taken for "
                "its own voice coming back, not a barge-in (every engine's listener)"})


@dataclass(frozen=True)
class ConversationSettings:
    """What every engine's settings have: the turn settings as one object, the persona, the
    camera's frame policy and the caller's language."""

    turns: TurnSettings = field(default_factory=TurnSettings, metadata={"section": {}})
    #: the persona: the system prompt ('' = the engine's own)
    instructions: str = field(default="", metadata={
        "help": "the assistant's persona and instructions (the LLM's system prompt; sent to "
                "remote model servers as the session instructions)"})
    #: which camera frames go to the model (the frame policy's rate, sizes, retention)
    camera: FramePolicySettings = field(default_factory=FramePolicySettings, metadata={
        "section": {"prefix": "camera_"}})
    #: the caller's language: 'auto' (the cascade's Whisper detects it per turn) or a code
    #: ('en', 'de', ...): the cascade's recognition and replies, and which words ask the
    #: camera to look closely (the sharp end-of-turn frame; other languages: never sharp)
    language: str = field(default="en", metadata={
        "help": "cascade: the language spoken: 'auto' (Whisper detects it per turn, when the "
                "ASR model is multilingual) or a code such as en, de, fr, es"})
