"""Typed server configuration: one field per setting, its help, default and checks.

Every field is one flag ``--field-name`` and one variable ``OMNICALL_FIELD_NAME``
(:mod:`omnicall.app.config_sources` fills it from them). A flag that sets an engine's setting
takes its default from that setting (``CascadeSettings.llm_context``,
``TurnSettings.hangover_ms``, ...): each default is written once, on the engine's side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from omnicall.app.access import parse_ice_servers
from omnicall.engine.base import InterruptBy
from omnicall.engine.bundled_models import BUNDLED_ASR, ModelMissing, whisper_files
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.conversation.settings import (
    ADDRESSEES,
    TURN_MODELS,
    ConversationSettings,
    FramePolicySettings,
    TurnSettings,
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


@dataclass(frozen=True)
class ServerConfig:
    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on"})
    port: int = field(default=8080, metadata={"help": "TCP port (0 picks a free one)"})
    engine: str = field(default="cascade", metadata={
        "help": f"engine backend: {', '.join(ENGINE_NAMES)}"})
    model: str = field(default=OmniSettings.model, metadata={
        "help": "qwen-omni: local Qwen3-Omni checkpoint directory (from_pretrained)"})
    device: str = field(default=OmniSettings.device, metadata={
        "help": "qwen-omni: auto, cpu, cuda, cuda:N"})
    dtype: str = field(default=OmniSettings.dtype, metadata={
        "help": "qwen-omni: auto (bf16 on GPU, fp32 on CPU), bfloat16, float16, float32"})
    attention: str = field(default=OmniSettings.attention, metadata={
        "help": "qwen-omni: auto (flash_attention_2 when installed on GPU), sdpa, eager"})
    load_in_4bit: bool = field(default=OmniSettings.load_in_4bit, metadata={
        "help": "qwen-omni: 4-bit weights (needs bitsandbytes and a GPU)"})
    text_only: bool = field(default=OmniSettings.text_only, metadata={
        "help": "qwen-omni: disable the Talker (captions only, less memory)"})
    speaker: str = field(default=OmniSettings.speaker, metadata={"help": "qwen-omni: Talker voice"})
    window_s: float = field(default=OmniSettings.window_s, metadata={
        "help": "qwen-omni: seconds of audio/video kept in the Thinker cache"})
    engine_url: str = field(default="", metadata={
        "append": True,
        "help": "remote: Realtime endpoint(s) ws://HOST:PORT/v1/realtime of model servers "
                "(vllm-omni or omnicall serve-engine); repeat the flag or separate with commas "
                "for a pool"})
    engine_model: str = field(default=RemoteSettings.engine_model, metadata={
        "help": "remote: the model name to ask the servers for (?model=); '' = theirs"})
    engine_key: str = field(default=RemoteSettings.engine_key, metadata={
        "help": "remote: bearer key for the model servers"})
    turn_mode: str = field(default=RemoteSettings.turn_mode, metadata={
        "help": "remote: who ends user turns - 'server' (the model server's VAD, with "
                "barge-in) or 'local' (omnicall's turn detector; commit + response.create)"})
    remote_video: bool = field(default=RemoteSettings.remote_video, metadata={
        "help": "remote: send camera frames as input_image items through each turn, by the "
                "frame policy (--camera-*), deleting old ones past --camera-max-images "
                "(switched off by itself for a server that refuses images; never with "
                "--no-video)"})
    store: str = field(default="memory", metadata={
        "help": "where call transcripts live for resuming on any worker or machine: "
                "'memory' (this process) or redis://HOST:PORT/DB"})
    served_model_name: str = field(default="omnicall", metadata={
        "help": "serve-engine: the model name clients ask for (?model=)"})
    instructions: str = field(default=ConversationSettings.instructions, metadata={
        "help": "the assistant's persona and instructions (the LLM's system prompt; sent to "
                "remote model servers as the session instructions)"})
    instructions_file: str = field(default="", metadata={
        "help": "read --instructions from this UTF-8 text file"})
    greeting: str = field(default=CascadeSettings.greeting, metadata={
        "help": "cascade: the assistant says this first when a call starts (kiosks)"})
    wake_phrase: str = field(default=CascadeSettings.wake_phrase, metadata={
        "help": "cascade: answer a turn only when it begins with this phrase ('hey kiosk'), "
                "or while the conversation is open (--wake-open-s after the assistant spoke "
                "or the phrase was heard): people passing by and chatting get no answer; '' "
                "(the default): every turn"})
    wake_open_s: float = field(default=CascadeSettings.wake_open_s, metadata={
        "help": "cascade, with --wake-phrase: seconds the conversation stays open after the "
                "assistant's last word or the phrase"})
    addressee: str = field(default="auto", metadata={
        "help": "cascade: who the assistant talks to: 'camera' (the person facing the camera "
                "whose mouth moves while speech is heard: others' speech is no turn and cuts "
                "no reply), 'wake' (--wake-phrase), 'any' (every voice), 'auto' ('camera' on "
                "the kiosk page with a camera, else 'wake' when --wake-phrase is set, else "
                "'any')"})
    max_reply_tokens: int = field(default=CascadeSettings.max_reply_tokens, metadata={
        "help": "cascade: longest reply, in LLM tokens"})
    llm_context: int = field(default=CascadeSettings.llm_context, metadata={
        "help": "cascade: the LLM's context window in tokens (the conversation memory keeps "
                "3/8 of it)"})
    llm: str = field(default=CascadeSettings.llm, metadata={
        "help": "cascade: GGUF chat model path ('' = bundled SmolLM2-135M-Instruct)"})
    llm_url: str = field(default=CascadeSettings.llm_url, metadata={
        "help": "cascade: an OpenAI-compatible server's base URL (http://HOST:PORT/v1: "
                "llama.cpp's server, Ollama, vLLM, ...) to use instead of the local model"})
    llm_model: str = field(default=CascadeSettings.llm_model, metadata={
        "help": "cascade with --llm-url: the model name to ask for ('' = the server's "
                "first model)"})
    llm_key: str = field(default=CascadeSettings.llm_key, metadata={
        "help": "cascade with --llm-url: API key sent as a bearer token"})
    llm_vision: bool = field(default=CascadeSettings.llm_vision, metadata={
        "help": "cascade with --llm-url: send camera frames with the user's turns (image_url "
                "parts, JPEG data URLs; early while the user speaks, for servers that cache "
                "prompts) to a vision model; a server that refuses images gets the camera "
                "described in words, and the page is told once"})
    llm_audio_in: bool = field(default=CascadeSettings.llm_audio_in, metadata={
        "help": "cascade with --llm-url: send the user's speech itself (input_audio, WAV) "
                "so an omni model (Qwen3-Omni on vllm-omni) hears tone and words; the "
                "user's caption still comes from the local ASR"})
    llm_audio_out: bool = field(default=CascadeSettings.llm_audio_out, metadata={
        "help": "cascade with --llm-url: ask for the server's own voice (modalities text + "
                "audio) and play its streamed audio (vllm-omni's audio chunks, OpenAI's "
                "delta.audio); a reply without audio is said by the local voice"})
    llm_voice: str = field(default=CascadeSettings.llm_voice, metadata={
        "help": "cascade with --llm-audio-out: the voice asked for (OpenAI's names; "
                "vllm-omni uses its model's default speaker)"})
    tools: str = field(default="", metadata={
        "help": "a Python module (package.module, or a .py file) whose @tool functions the "
                "assistant may call, e.g. examples.tools"})
    tool_timeout_s: float = field(default=5.0, metadata={
        "help": "a tool call that has not returned after this long fails (the assistant "
                "apologizes)"})
    language: str = field(default=ConversationSettings.language, metadata={
        "help": "cascade: the language spoken: 'auto' (Whisper detects it per turn, when the "
                "ASR model is multilingual) or a code such as en, de, fr, es"})
    transcripts: str = field(default="", metadata={
        "help": "write one JSON Lines file per call (turns, timings, tool calls) into this "
                "folder ('' = off; transcripts hold what people said: see docs/operations.md, "
                "Privacy)"})
    asr: str = field(default=CascadeSettings.asr, metadata={
        "help": "cascade: the speech recognizer: '' (the bundled Whisper tiny.en, English "
                "only), 'base' (the bundled Whisper base: multilingual, about twice the time "
                "per turn; see docs/room.md) or a CTranslate2 Whisper model dir"})
    asr_beam_size: int = field(default=CascadeSettings.asr_beam_size, metadata={
        "help": "cascade: Whisper beam size (1 = greedy; 3 had fewer word errors at the same "
                "median time but a slower p95: see bench/asr_wer.py)"})
    asr_partial_threads: int = field(default=CascadeSettings.asr_partial_threads, metadata={
        "help": "cascade: threads of the second ASR model copy that makes the partial "
                "transcripts (0 = no copy: partials share the final transcript's model and "
                "may delay it; saves the memory of a big --asr model)"})
    voice: str = field(default=CascadeSettings.voice, metadata={
        "help": "cascade: Piper voice .onnx path, 'espeak', or '' (bundled en_US joe)"})
    asr_url: str = field(default=CascadeSettings.asr_url, metadata={
        "help": "cascade: an OpenAI-compatible transcription server's base URL "
                "(http://HOST:PORT/v1: vLLM with Whisper, transformers serve, faster-whisper "
                "servers, OpenAI): each turn's final transcript comes from its "
                "/v1/audio/transcriptions (the cleaned audio as WAV, --language passed on); "
                "partial transcripts stay local; on an error or --asr-timeout-s the local "
                "model (--asr) hears the turn, and the page and the log say so once"})
    asr_model: str = field(default=CascadeSettings.asr_model, metadata={
        "help": "cascade with --asr-url: the model to ask for ('' = whisper-1)"})
    asr_key: str = field(default=CascadeSettings.asr_key, metadata={
        "help": "cascade with --asr-url: API key sent as a bearer token"})
    asr_timeout_s: float = field(default=CascadeSettings.asr_timeout_s, metadata={
        "help": "cascade with --asr-url: a transcription not back this long after it was "
                "asked for is made by the local model instead"})
    asr_partials: bool = field(default=CascadeSettings.asr_partials, metadata={
        "help": "cascade: partial transcripts on the local model while the user speaks (they "
                "fill the LLM's prompt cache early); off: none (with --asr-url nothing is "
                "heard locally unless the server fails)"})
    tts_url: str = field(default=CascadeSettings.tts_url, metadata={
        "help": "cascade: an OpenAI-compatible speech server's base URL (http://HOST:PORT/v1: "
                "Kokoro or Piper servers, OpenAI): replies are spoken by its /v1/audio/speech, "
                "clause by clause, its PCM played as it arrives (24 kHz unless the server's "
                "X-Sample-Rate header says otherwise); a barge-in closes the stream; on an "
                "error or --tts-timeout-s the local voice (--voice) speaks, said once"})
    tts_model: str = field(default=CascadeSettings.tts_model, metadata={
        "help": "cascade with --tts-url: the model to ask for ('' = tts-1)"})
    tts_voice: str = field(default=CascadeSettings.tts_voice, metadata={
        "help": "cascade with --tts-url: the voice to ask for (OpenAI's names such as alloy; "
                "the server's own names, e.g. af_heart for Kokoro)"})
    tts_key: str = field(default=CascadeSettings.tts_key, metadata={
        "help": "cascade with --tts-url: API key sent as a bearer token"})
    tts_timeout_s: float = field(default=CascadeSettings.tts_timeout_s, metadata={
        "help": "cascade with --tts-url: no sound from the server this long (first or next "
                "piece) and the local voice says the clause"})
    hangover_ms: int = field(default=TurnSettings.hangover_ms, metadata={
        "help": "silence after speech that ends the user's turn (with --turn-model smart: "
                "the fallback when the model cannot judge)"})
    turn_model: str = field(default=TurnSettings.turn_model, metadata={
        "help": "'fixed' (--hangover-ms) or 'smart' (Smart Turn v3.2 judges each pause: a "
                "short wait when the speaker sounds finished, a long one when not; cascade, "
                "qwen-omni, and remote with --turn-mode local; measured in docs/benchmarks.md)"})
    echo_warmup_ms: int = field(default=TurnSettings.echo_warmup_ms, metadata={
        "help": "after the assistant starts speaking, speech heard this long is taken for "
                "its own voice coming back, not a barge-in (every engine's listener)"})
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
        "help": "playout jitter buffer target, in 20 ms frames"})
    video: bool = field(default=True, metadata={
        "help": "camera frames from the page reach the engine; off: the page never asks for "
                "the camera and the server refuses any video it is sent (its video section "
                "is answered inactive: nothing is received or decoded)"})
    video_fps: float = field(default=2.0, metadata={"help": "video frames sampled per second"})
    video_width: int = field(default=640, metadata={
        "help": "largest video frame the engine keeps (the page sends 640x480; frames go to "
                "models at --camera-size, or --camera-sharp-size when the words ask to look)"})
    video_height: int = field(default=480, metadata={"help": "largest engine video height"})
    camera_speaking_fps: float = field(default=FramePolicySettings.speaking_fps, metadata={
        "help": "camera frames a second sent to the model while the user speaks (near-"
                "duplicates are skipped; the freshest frame always ends a turn)"})
    camera_quiet_fps: float = field(default=FramePolicySettings.quiet_fps, metadata={
        "help": "camera frames a second sent to the model while the user is quiet"})
    camera_size: int = field(default=FramePolicySettings.size, metadata={
        "help": "long side in pixels of the frames sent to the model (448: ~20 KB, ~192 "
                "vision tokens)"})
    camera_sharp_size: int = field(default=FramePolicySettings.sharp_size, metadata={
        "help": "long side of the end-of-turn frame when the words ask to look ('what is "
                "this', 'read this'; never above the camera's own size)"})
    camera_jpeg_quality: int = field(default=FramePolicySettings.jpeg_quality, metadata={
        "help": "JPEG quality (1-100) of the frames sent to the model"})
    camera_max_images: int = field(default=FramePolicySettings.max_images, metadata={
        "help": "camera images one conversation keeps in the model's context; older ones "
                "are replaced by a short note or deleted from the server's conversation"})
    camera_fact_confidence: float = field(default=CascadeSettings.camera_fact_confidence,
                                          metadata={
        "help": "cascade without a model that sees: a camera fact (a colour, people, text "
                "read, what changed) less sure than this (0..1) is not said"})
    camera_read_timeout_s: float = field(default=CascadeSettings.camera_read_timeout_s,
                                         metadata={
        "help": "cascade without a model that sees: reading the text in the turn's frame "
                "(only when the words ask to read or look) is given up after this long"})
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

    def camera_settings(self) -> FramePolicySettings:
        """The frame policy's settings from the ``--camera-*`` flags (named as the flags)."""
        return FramePolicySettings(
            speaking_fps=self.camera_speaking_fps, quiet_fps=self.camera_quiet_fps,
            size=self.camera_size, sharp_size=self.camera_sharp_size,
            jpeg_quality=self.camera_jpeg_quality, max_images=self.camera_max_images)

    def turn_settings(self) -> TurnSettings:
        """How the caller's turns end, from ``--hangover-ms``, ``--turn-model`` and
        ``--echo-warmup-ms``."""
        return TurnSettings(hangover_ms=self.hangover_ms, turn_model=self.turn_model,
                            echo_warmup_ms=self.echo_warmup_ms)

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
        try:
            self.camera_settings()
        except ValueError as exc:
            raise ConfigError(f"camera settings: {exc}") from exc
        if self.engine == "remote" and not self.engine_urls:
            raise ConfigError("--engine remote needs --engine-url ws://HOST:PORT/v1/realtime")
        for url in self.engine_urls:
            if not url.startswith(("ws://", "wss://")):
                raise ConfigError(f"engine_url must be ws:// or wss://, got {clip(url)}")
        if self.turn_mode not in ("server", "local"):
            raise ConfigError(f"turn_mode must be 'server' or 'local', got {clip(self.turn_mode)}")
        if self.store != "memory" and not self.store.startswith(("redis://", "rediss://")):
            raise ConfigError(f"store must be 'memory' or redis://..., got {clip(self.store)}")
        self._check_files()
        if len(self.wake_phrase) > 60 or not 0 < self.wake_open_s <= 600:
            raise ConfigError("wake_phrase must be at most 60 characters and wake_open_s in "
                              "(0, 600]")
        if not 8 <= self.max_reply_tokens <= 4096:
            raise ConfigError("max_reply_tokens must be in [8, 4096]")
        if not 512 <= self.llm_context <= 131_072:
            raise ConfigError("llm_context must be in [512, 131072]")
        if not 0.0 <= self.camera_fact_confidence <= 1.0:
            raise ConfigError("camera_fact_confidence must be in [0, 1]")
        if not 0.1 <= self.camera_read_timeout_s <= 30.0:
            raise ConfigError("camera_read_timeout_s must be in [0.1, 30] seconds")
        if self.engine == "qwen-omni" and not self.model:
            raise ConfigError("--engine qwen-omni needs --model PATH (a local checkpoint)")
        if self.dtype not in ("auto", "bfloat16", "float16", "float32"):
            raise ConfigError(f"unknown dtype {self.dtype!r}")
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
        if not 100 <= self.hangover_ms <= 5000:
            raise ConfigError("hangover_ms must be in [100, 5000]")
        if not 0 <= self.echo_warmup_ms <= 5000:
            raise ConfigError("echo_warmup_ms must be in [0, 5000]")
        if not 3 <= self.degrade_window_turns <= 1000:
            raise ConfigError("degrade_window_turns must be in [3, 1000]")
        if not 0 < self.degrade_text_first_ms <= self.degrade_fallback_ms:
            raise ConfigError("need 0 < degrade_text_first_ms <= degrade_fallback_ms")
        if self.tools and self.engine in ("qwen-omni", "loopback"):
            raise ConfigError(f"tools: the {self.engine} engine cannot call tools (use the "
                              "cascade or remote engine)")
        if not 1 <= self.asr_beam_size <= 8:
            raise ConfigError("asr_beam_size must be in [1, 8]")
        if not 0 <= self.asr_partial_threads <= 8:
            raise ConfigError("asr_partial_threads must be in [0, 8]")
        if self.addressee not in ADDRESSEES:
            raise ConfigError(f"addressee {clip(self.addressee)}: use one of "
                              f"{', '.join(ADDRESSEES)}")
        if self.addressee == "wake" and not self.wake_phrase.strip():
            raise ConfigError("addressee wake needs --wake-phrase")
        if self.addressee == "camera" and not self.video:
            raise ConfigError("addressee camera needs the camera (not with --no-video)")
        if self.addressee in ("camera", "wake") and self.engine != "cascade":
            raise ConfigError(f"addressee {self.addressee}: the cascade engine only")
        if self.turn_model not in TURN_MODELS:
            raise ConfigError(f"turn_model {clip(self.turn_model)}: use one of "
                              f"{', '.join(TURN_MODELS)}")
        if self.turn_model == "smart" and self.engine == "remote" and self.turn_mode != "local":
            raise ConfigError("turn_model smart with the remote engine needs --turn-mode local "
                              "(in server mode the model server ends the turns)")
        if not 0.1 <= self.tool_timeout_s <= 300:
            raise ConfigError("tool_timeout_s must be in [0.1, 300] seconds")
        if self.llm_url and not self.llm_url.startswith(("http://", "https://")):
            raise ConfigError(f"llm_url {clip(self.llm_url)} must be an http(s):// base URL "
                              "such as http://127.0.0.1:8000/v1")
        for flag in ("llm_vision", "llm_audio_in", "llm_audio_out"):
            if getattr(self, flag) and not self.llm_url:
                raise ConfigError(f"{flag} needs llm_url: the bundled model reads and "
                                  "writes text only")
        if self.llm_url and self.llm:
            raise ConfigError("llm_url and llm both name the language model: give one")
        self._check_speech_servers()
        if self.language != "auto" and not (2 <= len(self.language) <= 3
                                            and self.language.isalpha()
                                            and self.language.islower()):
            raise ConfigError(f"language {clip(self.language)}: use 'auto' or a language "
                              "code such as en, de, fr")
        if self.max_body_bytes < 1024:
            raise ConfigError("max_body_bytes must be >= 1024")
        return self

    def _check_speech_servers(self) -> None:
        """--asr-url / --tts-url: http(s) base URLs, sane time-outs, their options only with
        them."""
        for role in ("asr", "tts"):
            url = getattr(self, f"{role}_url")
            if url and not url.startswith(("http://", "https://")):
                raise ConfigError(f"{role}_url {clip(url)} must be an http(s):// base URL "
                                  "such as http://127.0.0.1:8000/v1")
            if not 0.1 <= getattr(self, f"{role}_timeout_s") <= 60:
                raise ConfigError(f"{role}_timeout_s must be in [0.1, 60] seconds")
            for option in ("model", "key"):
                if getattr(self, f"{role}_{option}") and not url:
                    raise ConfigError(f"{role}_{option} needs {role}_url (it names what to ask "
                                      "that server for)")

    def _check_files(self) -> None:
        """A model or voice path that is wrong is a one-line error naming the flag and the
        file, before anything loads (never a silent fallback)."""
        checks = [("--instructions-file", self.instructions_file, "a UTF-8 text file", False)]
        if self.engine == "cascade":
            checks.append(("--llm", self.llm, "a GGUF chat model file", False))
            if self.asr not in BUNDLED_ASR:
                checks.append(("--asr", self.asr, "a CTranslate2 Whisper model folder (with "
                               "model.bin) or a bundled model's name: "
                               + ", ".join(BUNDLED_ASR), True))
            if self.voice != "espeak":
                checks.append(("--voice", self.voice, "a Piper voice: NAME.onnx with "
                               "NAME.onnx.json beside it", False))
        for flag, value, what, folder in checks:
            path = Path(value)
            if not value:
                continue
            if not (path.is_dir() if folder else path.is_file()):
                raise ConfigError(f"{flag} {value}: no such {'folder' if folder else 'file'} "
                                  f"(expected {what})")
        if self.engine == "cascade" and self.voice not in ("", "espeak") and not Path(
                self.voice + ".json").is_file():
            raise ConfigError(f"--voice {self.voice}: {self.voice}.json is missing (a Piper "
                              "voice needs its .onnx.json config beside the .onnx)")
        if self.engine == "cascade" and self.asr in BUNDLED_ASR:
            try:
                whisper_files(self.asr)
            except ModelMissing as exc:
                raise ConfigError(f"--asr {self.asr}: {exc}") from exc
        elif self.engine == "cascade" and self.asr and not (
                Path(self.asr) / "model.bin").is_file():
            raise ConfigError(f"--asr {self.asr}: no model.bin in that folder (expected a "
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
        return self.instructions.strip()

    @property
    def engine_urls(self) -> list[str]:
        return [u.strip() for u in self.engine_url.split(",") if u.strip()]

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
