"""Typed server configuration: the server's settings, each engine's settings as a section,
and the checks.

Each setting is declared once, with its help and default, where it is used: the server's
own here, an engine's in that engine's settings dataclass (``CascadeSettings.llm_context``),
the conversation's every engine has in
:class:`~omnicall.engine.conversation.settings.ConversationSettings` (``--hangover-ms`` is
``conversation.turns.hangover_ms``). :mod:`omnicall.app.flags` finds them all: each is one
flag ``--name`` and one variable ``OMNICALL_NAME`` (:mod:`omnicall.app.config_sources` fills
them, :mod:`omnicall.app.config_docs` writes docs/configuration.md from them).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from omnicall.app.access import parse_ice_servers
from omnicall.app.flags import with_settings
from omnicall.engine.base import InterruptBy
from omnicall.engine.bundled_models import BUNDLED_ASR, ModelMissing, whisper_files
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.conversation.settings import (
    ADDRESSEES,
    TURN_MODELS,
    ConversationSettings,
)
from omnicall.engine.qwen_omni.settings import OmniSettings
from omnicall.engine.registry import ENGINE_NAMES, engine_names
from omnicall.engine.remote.settings import RemoteSettings
from omnicall.media.echo_canceller import RoomSettings
from omnicall.media.log_limit import clip

ENV_PREFIX = "OMNICALL_"
ROOM_SWITCHES = ("auto", "on", "off")  # --echo-cancel, --noise-suppression
#: the page modes whose loudspeaker feeds the microphone: auto turns the server's room on
LOUDSPEAKER_PAGES = ("kiosk", "companion")


class ConfigError(ValueError):
    """A setting has an invalid value."""


@dataclass(frozen=True, init=False)
class ServerConfig:
    """The server's settings. Made from flags and variables by
    :mod:`omnicall.app.config_sources`; in Python, ``ServerConfig(port=0, llm_url=...,
    hangover_ms=300)`` takes every setting by its flag name (each put in its section) and the
    sections themselves by field name (``cascade=CascadeSettings(...)``); not validated until
    :meth:`validate`."""

    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on"})
    port: int = field(default=8080, metadata={"help": "TCP port (0 picks a free one)"})
    engine: str = field(default="cascade", metadata={
        "help": f"engine backend: {', '.join(ENGINE_NAMES)}"})
    omni: OmniSettings = field(default_factory=OmniSettings, metadata={
        "section": {"engine": "qwen-omni", "shared": ConversationSettings}})
    remote: RemoteSettings = field(default_factory=RemoteSettings, metadata={
        "section": {"engine": "remote", "shared": ConversationSettings}})
    store: str = field(default="memory", metadata={
        "help": "where call transcripts live for resuming on any worker or machine: "
                "'memory' (this process) or redis://HOST:PORT/DB"})
    served_model_name: str = field(default="omnicall", metadata={
        "help": "serve-engine: the model name clients ask for (?model=)"})
    #: the persona, the language, how turns end (--hangover-ms ...) and the camera's frame
    #: policy (--camera-*): every engine's
    conversation: ConversationSettings = field(default_factory=ConversationSettings,
                                               metadata={"section": {}})
    instructions_file: str = field(default="", metadata={
        "help": "read --instructions from this UTF-8 text file"})
    cascade: CascadeSettings = field(default_factory=CascadeSettings, metadata={
        "section": {"engine": "cascade", "shared": ConversationSettings}})
    addressee: str = field(default="auto", metadata={
        "help": "cascade: who the assistant talks to: 'camera' (the person facing the camera "
                "whose mouth moves while speech is heard: others' speech is no turn and cuts "
                "no reply), 'wake' (--wake-phrase), 'any' (every voice), 'auto' ('camera' on "
                "the kiosk page with a camera, else 'wake' when --wake-phrase is set, else "
                "'any')"})
    tools: str = field(default="", metadata={
        "help": "a Python module (package.module, or a .py file) whose @tool functions the "
                "assistant may call, e.g. examples.tools"})
    tool_timeout_s: float = field(default=5.0, metadata={
        "help": "a tool call that has not returned after this long fails (the assistant "
                "apologizes)"})
    record: str = field(default="", metadata={
        "help": "record each call into this folder ('' = off, the default): one stereo WAV "
                "of both sides on the call's clock (the caller left, the assistant right) and "
                "its transcript with turn timings; the page shows that the call is recorded; "
                "files older than --record-keep-h are deleted (see docs/operations.md, "
                "Privacy)"})
    record_keep_h: float = field(default=72.0, metadata={
        "help": "hours a recording is kept before it is deleted (checked at start and "
                "hourly)"})
    transcripts: str = field(default="", metadata={
        "help": "write one JSON Lines file per call (turns, timings, tool calls) into this "
                "folder ('' = off; transcripts hold what people said: see docs/operations.md, "
                "Privacy)"})
    otel_endpoint: str = field(default="", metadata={
        "help": "send OpenTelemetry traces of every call and turn over OTLP/HTTP to this "
                "receiver (its base URL, e.g. http://localhost:4318; '' = no traces, the "
                "default); see docs/operations.md, Traces"})
    cert: str = field(default="", metadata={"help": "TLS certificate (PEM) for https"})
    key: str = field(default="", metadata={"help": "TLS private key (PEM) for https"})
    token: str = field(default="", metadata={"help": "bearer token required on POST /offer"})
    metrics_listen: str = field(default="", metadata={
        "help": "serve /metrics (and /health) on a listener of their own: PORT (on 127.0.0.1) "
                "or HOST:PORT, plain http; the main port then has no /metrics ('' = /metrics on "
                "the main port: answered to anyone without --token, refused with --token unless "
                "--metrics-token is given)"})
    metrics_token: str = field(default="", metadata={
        "help": "bearer token required on /metrics, on whichever listener serves it (Prometheus: "
                "authorization: credentials)"})
    allowed_origins: str = field(default="", metadata={
        "help": "comma-separated origins allowed to POST /offer ('' = same origin only; "
                "'*' = any)"})
    offer_rate_per_min: float = field(default=30.0, metadata={
        "help": "offers per minute per client IP (burst of 10); 0 = no limit"})
    ice_servers: str = field(default="", metadata={
        "help": "STUN/TURN servers for the page, comma-separated URLs; TURN credentials as "
                "turn:USER:PASS@host:port"})
    resume_window_s: float = field(default=30.0, metadata={
        "help": "a dropped call's conversation is kept this long for the page to resume "
                "(0 = never)"})
    reconnect_give_up_s: float = field(default=30.0, metadata={
        "help": "the page tries this long to get a dropped call back, then says so and shows "
                "a Reconnect button (kiosks keep trying)"})
    kiosk_idle_s: float = field(default=90.0, metadata={
        "help": "kiosk mode: start a fresh conversation after this long without speech"})
    workers: int = field(default=1, metadata={
        "help": "server processes sharing the port (SO_REUSEPORT) so calls use every core; "
                "each has its own engine and --max-sessions; a resumed call may land on another "
                "worker, which continues its conversation from --store redis:// (with the "
                "default memory store it starts a new one)"})
    max_sessions: int = field(default=4, metadata={"help": "concurrent calls accepted"})
    echo_cancel: str = field(default="auto", metadata={
        "help": "the server's echo canceller (WebRTC AEC3, the assistant's sent voice as its "
                "reference) on the caller's audio before the VAD and ASR: 'auto' (on for the "
                "kiosk and companion pages, whose loudspeakers feed the microphone; off for "
                "the call page, whose browser cancels its own echo; on for a client that "
                "does not say its mode, as for a loudspeaker, until its microphone is found "
                "not to hear the assistant), 'on' or 'off' (docs/room.md)"})
    interruptions: str = field(default="auto", metadata={
        "help": "what cuts the assistant's reply: 'sound' (any speech over it), 'words' (its "
                "sound is held at once, and only words that are not a backchannel such as "
                "'mm-hmm' or 'okay' cut it; a cough, a door or its own echo leave it going: "
                "docs/room.md), or 'auto' (words for the kiosk and companion pages, sound "
                "for the call page; for a client that does not say its mode, words until its "
                "microphone is found not to hear the assistant, then sound)"})
    duck: str = field(default="pause", metadata={
        "help": "what the assistant's reply does while the caller's sound over it is heard "
                "for words (--interruptions words): 'pause' (the default: silent from its "
                "next 20 ms frame, and resumed where it stopped when the sound was a "
                "backchannel or no words; it goes quiet about as soon as with "
                "--interruptions sound, and a backchannel costs a gap of about half a "
                "second) or 'lower' (0.3 x, about -10 dB: it goes on under the caller until "
                "words cut it; docs/room.md)"})
    noise_suppression: str = field(default="off", metadata={
        "help": "the server's noise suppressor (WebRTC's) on the caller's audio before the "
                "VAD and ASR: 'off' (the default: measured, no suppressor lowered the ASR's "
                "word errors in babble or street noise, and this one costs words in quiet; "
                "docs/room.md), 'auto' (on for the kiosk and companion pages) or 'on'"})
    jitter_frames: int = field(default=2, metadata={
        "help": "the playout queue's start-up target: the assistant's audio queued before it "
                "starts to play, in 20 ms frames"})
    video: bool = field(default=True, metadata={
        "help": "camera frames from the page reach the engine; off: the page never asks for "
                "the camera and the server refuses any video it is sent (its video section "
                "is answered inactive: nothing is received or decoded)"})
    video_fps: float = field(default=2.0, metadata={"help": "video frames sampled per second"})
    video_width: int = field(default=640, metadata={
        "help": "largest video frame the engine keeps (the page sends 640x480; frames go to "
                "models at --camera-size, or --camera-sharp-size when the words ask to look)"})
    video_height: int = field(default=480, metadata={"help": "largest engine video height"})
    max_body_bytes: int = field(default=65536, metadata={"help": "largest /offer body"})
    degrade_text_first_ms: int = field(default=300, metadata={
        "help": "rolling P95 time to first token above this: answer new turns in text first"})
    degrade_fallback_ms: int = field(default=500, metadata={
        "help": "rolling P95 time to first token above this: the lighter fallback engine"})
    degrade_window_turns: int = field(default=20, metadata={
        "help": "turns in the degrade ladder's rolling window (and needed before it moves)"})
    low_latency_receive: bool = field(default=True, metadata={
        "help": "release received audio packets at once instead of aiortc's 4-frame prefetch"})
    server_ice_servers: str = field(default="", metadata={
        "help": "STUN/TURN servers the server's own peer connections use, same syntax as "
                "--ice-servers ('' = none: host candidates only, no lookups)"})
    header_timeout_s: float = field(default=10.0, metadata={
        "help": "close a connection that sends no complete request within this long (slow "
                "clients, idle keep-alive)"})
    body_timeout_s: float = field(default=10.0, metadata={
        "help": "a POST /offer body must arrive within this long"})
    accept_timeout_s: float = field(default=10.0, metadata={
        "help": "applying an offer and answering it may take this long"})
    connect_timeout_s: float = field(default=30.0, metadata={
        "help": "an answered offer whose connection never comes up is closed after this"})
    media_timeout_s: float = field(default=3.5, metadata={
        "help": "a connected call with no audio packets this long has lost its peer (it is "
                "kept for a resume): above a 3 s network outage (the call rides it out), and "
                "with the watchdog's 1 s tick a vanished client's slot is free within 5 s"})
    reply_timeout_s: float = field(default=20.0, metadata={
        "help": "an engine reply that makes no progress this long is cancelled with an "
                "error to the page"})
    ice_loopback: bool = field(default=False, metadata={
        "help": "offer only 127.0.0.1 ICE candidates (hermetic tests, same-host clients)"})
    shutdown_timeout_s: float = field(default=3.0, metadata={
        "help": "seconds to wait for each call to close at shutdown"})
    log_level: str = field(default="INFO", metadata={"help": "logging level"})

    def __init__(self, **settings: Any) -> None:
        own = {f.name: f for f in fields(type(self))}
        for name, f in own.items():
            if name in settings:
                value = settings[name]
            elif f.default_factory is not MISSING:
                value = f.default_factory()
            else:
                value = f.default
            object.__setattr__(self, name, value)
        flagged = {name: value for name, value in settings.items() if name not in own}
        if flagged:
            try:
                built = with_settings(self, flagged)
            except KeyError as exc:
                raise TypeError(f"ServerConfig got an unknown setting: {exc}") from None
            for name in own:
                object.__setattr__(self, name, getattr(built, name))

    def room_settings(self, page_mode: str | None) -> RoomSettings:
        """What runs on a call's microphone for a page in ``page_mode`` ('call', 'kiosk',
        'companion'; None: a client that did not say): the echo canceller's ``auto`` is on
        for the loudspeaker pages, kiosk and companion, and for a client that did not say
        (its output is used only while the call's microphone may hear the assistant:
        ``media/echo_presence.py``, docs/room.md); the noise suppressor's for the pages."""
        loudspeaker = page_mode in LOUDSPEAKER_PAGES
        return RoomSettings(
            echo_cancellation=self.echo_cancel == "on" or (
                self.echo_cancel == "auto" and (loudspeaker or page_mode is None)),
            noise_suppression=self.noise_suppression == "on" or (
                self.noise_suppression == "auto" and loudspeaker))

    def addressee_for(self, page_mode: str | None) -> str:
        """Who the assistant talks to on a page in ``page_mode`` (``addressee``; ``auto``:
        the camera's engaged person on the kiosk page, where people pass by; elsewhere the
        engine's own rule: the wake phrase when one is set, else any voice)."""
        if self.addressee != "auto":
            return self.addressee
        return "camera" if page_mode == "kiosk" and self.video else "auto"

    def interrupt_by(self, page_mode: str | None) -> InterruptBy | Literal["echo"]:
        """What cuts a reply on a page in ``page_mode`` (``interruptions``; ``auto``: words
        on the loudspeaker pages, kiosk and companion; for a client that did not say its
        mode, 'echo': words until the call's microphone is found not to hear the assistant,
        then sound)."""
        if self.interruptions == "words" or (
                self.interruptions == "auto" and page_mode in LOUDSPEAKER_PAGES):
            return "words"
        if self.interruptions == "auto" and page_mode is None:
            return "echo"
        return "sound"

    def validate(self) -> ServerConfig:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port out of range: {self.port}")
        if self.engine not in ENGINE_NAMES and self.engine not in engine_names():
            raise ConfigError(f"unknown engine {self.engine!r}; one of "
                              f"{', '.join(engine_names())}")
        if not 1 <= self.workers <= 64:
            raise ConfigError("workers must be in [1, 64]")
        if self.max_sessions < 1:
            raise ConfigError("max_sessions must be >= 1")
        if self.interruptions not in ("auto", "words", "sound"):
            raise ConfigError("interruptions must be one of auto, words, sound")
        if self.duck not in ("lower", "pause"):
            raise ConfigError("duck must be one of lower, pause")
        for name in ("echo_cancel", "noise_suppression"):
            if getattr(self, name) not in ROOM_SWITCHES:
                raise ConfigError(f"{name} {clip(getattr(self, name))}: use one of "
                                  f"{', '.join(ROOM_SWITCHES)}")
        if not 1 <= self.jitter_frames <= 50:
            raise ConfigError("jitter_frames must be in [1, 50]")
        if not 0 < self.video_fps <= 30:
            raise ConfigError("video_fps must be in (0, 30]")
        if not (16 <= self.video_width <= 4096 and 16 <= self.video_height <= 4096):
            raise ConfigError("video size must be within 16..4096 pixels")
        remote, cascade, turns = self.remote, self.cascade, self.conversation.turns
        if self.engine == "remote" and not remote.engine_urls:
            raise ConfigError("--engine remote needs --engine-url ws://HOST:PORT/v1/realtime")
        for url in remote.engine_urls:
            if not url.startswith(("ws://", "wss://")):
                raise ConfigError(f"engine_url must be ws:// or wss://, got {clip(url)}")
        if remote.turn_mode not in ("server", "local"):
            raise ConfigError(f"turn_mode must be 'server' or 'local', got "
                              f"{clip(remote.turn_mode)}")
        if self.otel_endpoint and not self.otel_endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"otel_endpoint must be an http:// or https:// URL (OTLP/HTTP), "
                              f"got {clip(self.otel_endpoint)}")
        if self.store != "memory" and not self.store.startswith(("redis://", "rediss://")):
            raise ConfigError(f"store must be 'memory' or redis://..., got {clip(self.store)}")
        self._check_files()
        if len(cascade.wake_phrase) > 60 or not 0 < cascade.wake_open_s <= 600:
            raise ConfigError("wake_phrase must be at most 60 characters and wake_open_s in "
                              "(0, 600]")
        if not 8 <= cascade.max_reply_tokens <= 4096:
            raise ConfigError("max_reply_tokens must be in [8, 4096]")
        if not 512 <= cascade.llm_context <= 131_072:
            raise ConfigError("llm_context must be in [512, 131072]")
        if not 0.0 <= cascade.camera_fact_confidence <= 1.0:
            raise ConfigError("camera_fact_confidence must be in [0, 1]")
        if not 0.1 <= cascade.camera_read_timeout_s <= 30.0:
            raise ConfigError("camera_read_timeout_s must be in [0.1, 30] seconds")
        if self.engine == "qwen-omni" and not self.omni.model:
            raise ConfigError("--engine qwen-omni needs --model PATH (a local checkpoint)")
        if self.omni.dtype not in ("auto", "bfloat16", "float16", "float32"):
            raise ConfigError(f"unknown dtype {clip(self.omni.dtype)}")
        if self.offer_rate_per_min < 0:
            raise ConfigError("offer_rate_per_min must be >= 0")
        for name in ("ice_servers", "server_ice_servers"):
            try:
                parse_ice_servers(getattr(self, name))
            except ValueError as exc:
                raise ConfigError(f"{name}: {exc}") from exc
        for name in ("header_timeout_s", "body_timeout_s", "accept_timeout_s",
                     "connect_timeout_s", "media_timeout_s", "reply_timeout_s"):
            if not 0.1 <= getattr(self, name) <= 3600:
                raise ConfigError(f"{name} must be in [0.1, 3600] seconds")
        if self.metrics_listen:
            self.metrics_address  # noqa: B018 - ConfigError when it is not PORT or HOST:PORT
        if bool(self.cert) != bool(self.key):
            raise ConfigError("TLS needs both --cert and --key")
        if not 100 <= turns.hangover_ms <= 5000:
            raise ConfigError("hangover_ms must be in [100, 5000]")
        if not 0 <= turns.echo_warmup_ms <= 5000:
            raise ConfigError("echo_warmup_ms must be in [0, 5000]")
        if not 3 <= self.degrade_window_turns <= 1000:
            raise ConfigError("degrade_window_turns must be in [3, 1000]")
        if not 0 < self.degrade_text_first_ms <= self.degrade_fallback_ms:
            raise ConfigError("need 0 < degrade_text_first_ms <= degrade_fallback_ms")
        if self.tools and self.engine in ("qwen-omni", "loopback"):
            raise ConfigError(f"tools: the {self.engine} engine cannot call tools (use the "
                              "cascade or remote engine)")
        if not 1 <= cascade.asr_beam_size <= 8:
            raise ConfigError("asr_beam_size must be in [1, 8]")
        if not 0 <= cascade.asr_partial_threads <= 8:
            raise ConfigError("asr_partial_threads must be in [0, 8]")
        if self.addressee not in ADDRESSEES:
            raise ConfigError(f"addressee {clip(self.addressee)}: use one of "
                              f"{', '.join(ADDRESSEES)}")
        if self.addressee == "wake" and not cascade.wake_phrase.strip():
            raise ConfigError("addressee wake needs --wake-phrase")
        if self.addressee == "camera" and not self.video:
            raise ConfigError("addressee camera needs the camera (not with --no-video)")
        if self.addressee in ("camera", "wake") and self.engine != "cascade":
            raise ConfigError(f"addressee {self.addressee}: the cascade engine only")
        if turns.turn_model not in TURN_MODELS:
            raise ConfigError(f"turn_model {clip(turns.turn_model)}: use one of "
                              f"{', '.join(TURN_MODELS)}")
        if turns.turn_model == "smart" and self.engine == "remote" and \
                remote.turn_mode != "local":
            raise ConfigError("turn_model smart with the remote engine needs --turn-mode local "
                              "(in server mode the model server ends the turns)")
        if not 0.1 <= self.tool_timeout_s <= 300:
            raise ConfigError("tool_timeout_s must be in [0.1, 300] seconds")
        if cascade.llm_url and not cascade.llm_url.startswith(("http://", "https://")):
            raise ConfigError(f"llm_url {clip(cascade.llm_url)} must be an http(s):// base URL "
                              "such as http://127.0.0.1:8000/v1")
        for flag in ("llm_vision", "llm_audio_in", "llm_audio_out"):
            if getattr(cascade, flag) and not cascade.llm_url:
                raise ConfigError(f"{flag} needs llm_url: the bundled model reads and "
                                  "writes text only")
        if cascade.llm_url and cascade.llm:
            raise ConfigError("llm_url and llm both name the language model: give one")
        self._check_speech_servers()
        language = self.conversation.language
        if language != "auto" and not (2 <= len(language) <= 3 and language.isalpha()
                                       and language.islower()):
            raise ConfigError(f"language {clip(language)}: use 'auto' or a language "
                              "code such as en, de, fr")
        if not 0 < self.record_keep_h <= 24 * 365:
            raise ConfigError("record_keep_h must be in (0, 8760] hours")
        if self.max_body_bytes < 1024:
            raise ConfigError("max_body_bytes must be >= 1024")
        return self

    def _check_speech_servers(self) -> None:
        """--asr-url / --tts-url: http(s) base URLs, sane time-outs, their options only with
        them."""
        for role in ("asr", "tts"):
            url = getattr(self.cascade, f"{role}_url")
            if url and not url.startswith(("http://", "https://")):
                raise ConfigError(f"{role}_url {clip(url)} must be an http(s):// base URL "
                                  "such as http://127.0.0.1:8000/v1")
            if not 0.1 <= getattr(self.cascade, f"{role}_timeout_s") <= 60:
                raise ConfigError(f"{role}_timeout_s must be in [0.1, 60] seconds")
            for option in ("model", "key"):
                if getattr(self.cascade, f"{role}_{option}") and not url:
                    raise ConfigError(f"{role}_{option} needs {role}_url (it names what to ask "
                                      "that server for)")

    def _check_files(self) -> None:
        """A model or voice path that is wrong is a one-line error naming the flag and the
        file, before anything loads (never a silent fallback)."""
        cascade = self.cascade
        checks = [("--instructions-file", self.instructions_file, "a UTF-8 text file", False)]
        if self.engine == "cascade":
            checks.append(("--llm", cascade.llm, "a GGUF chat model file", False))
            if cascade.asr not in BUNDLED_ASR:
                checks.append(("--asr", cascade.asr, "a CTranslate2 Whisper model folder (with "
                               "model.bin) or a bundled model's name: "
                               + ", ".join(BUNDLED_ASR), True))
            if cascade.voice != "espeak":
                checks.append(("--voice", cascade.voice, "a Piper voice: NAME.onnx with "
                               "NAME.onnx.json beside it", False))
        for flag, value, what, folder in checks:
            path = Path(value)
            if not value:
                continue
            if not (path.is_dir() if folder else path.is_file()):
                raise ConfigError(f"{flag} {value}: no such {'folder' if folder else 'file'} "
                                  f"(expected {what})")
        if self.engine == "cascade" and cascade.voice not in ("", "espeak") and not Path(
                cascade.voice + ".json").is_file():
            raise ConfigError(f"--voice {cascade.voice}: {cascade.voice}.json is missing (a Piper "
                              "voice needs its .onnx.json config beside the .onnx)")
        if self.engine == "cascade" and cascade.asr in BUNDLED_ASR:
            try:
                whisper_files(cascade.asr)
            except ModelMissing as exc:
                raise ConfigError(f"--asr {cascade.asr}: {exc}") from exc
        elif self.engine == "cascade" and cascade.asr and not (
                Path(cascade.asr) / "model.bin").is_file():
            raise ConfigError(f"--asr {cascade.asr}: no model.bin in that folder (expected a "
                              "CTranslate2 Whisper model)")

    @property
    def system_instructions(self) -> str:
        """--instructions, or the text of --instructions-file."""
        if self.instructions_file:
            try:
                return Path(self.instructions_file).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"--instructions-file {self.instructions_file}: {exc}") \
                    from exc
        return self.conversation.instructions.strip()

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """--metrics-listen as (host, port): a bare PORT is on 127.0.0.1; None when unset."""
        spec = self.metrics_listen.strip()
        if not spec:
            return None
        host, colon, port_text = spec.rpartition(":")
        host = host.strip("[]") if colon else "127.0.0.1"
        try:
            port = int(port_text)
        except ValueError:
            port = -1
        if not host or not 0 <= port <= 65535:
            raise ConfigError(f"metrics_listen {clip(spec)}: use PORT (on 127.0.0.1) or "
                              "HOST:PORT, e.g. 9464 or 0.0.0.0:9464")
        return host, port

    @property
    def tls(self) -> bool:
        return bool(self.cert)

    @property
    def url(self) -> str:
        host = "localhost" if self.host in ("127.0.0.1", "0.0.0.0", "::") else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/"
