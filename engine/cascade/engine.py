"""The embedded CPU engine (default): models that ship inside packages, warm before calls.

Four worker threads keep model work off the event loop and out of each other's way:
``listen`` (VAD, ~0.2 ms per 32 ms chunk, never waits behind anything), ``think`` (the final
ASR, LLM, vision), ``talk`` (TTS), so the first clause can be spoken while the LLM goes on,
and ``partial`` (partial transcripts on a second, one-thread copy of tiny.en, so the turn's
final transcript never waits behind one).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from omnicall.engine.base import Engine, EngineSession, SessionOptions
from omnicall.engine.bundled_models import ModelMissing, whisper_name
from omnicall.engine.cascade.asr import DEFAULT_DECODING, Decoding, WhisperAsr
from omnicall.engine.cascade.camera.faces import FaceFacts
from omnicall.engine.cascade.camera.looker import MAX_PENDING as EYES_MAX_PENDING
from omnicall.engine.cascade.camera.looker import WATCH_PENDING, Looker
from omnicall.engine.cascade.camera.text_reader import TextReader
from omnicall.engine.cascade.history import SYSTEM_PROMPT, Conversation
from omnicall.engine.cascade.language_model import LanguageModel
from omnicall.engine.cascade.llm import LlamaLlm
from omnicall.engine.cascade.runtime import CascadeRuntime, PartialTranscriber
from omnicall.engine.cascade.servers.asr_server import AsrServer, AsrServerError
from omnicall.engine.cascade.servers.openai_llm import LlmServerError
from omnicall.engine.cascade.servers.tts_server import ServerVoice, TtsServerError
from omnicall.engine.cascade.session import CascadeSession
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.cascade.tool_format import tool_prompt, tool_shots
from omnicall.engine.cascade.tts import EspeakTts, Tts, load_tts
from omnicall.engine.conversation.listener import ListenRuntime
from omnicall.engine.degrade import Level
from omnicall.engine.errors import EngineLoadError
from omnicall.engine.languages import reply_language_note
from omnicall.engine.tools import ToolSpec
from omnicall.engine.vad import VadState
from omnicall.engine.worker import ModelWorker
from omnicall.media.clock import Clock, MonotonicClock

logger = logging.getLogger(__name__)


def _progress(step: int, total: int, label: str) -> None:
    width = 24
    done = width * step // total
    sys.stderr.write(f"\rwarming up [{'#' * done}{'.' * (width - done)}] {step}/{total} "
                     f"{label:<40}")
    if step == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


class CascadeEngine(Engine):
    name = "cascade"
    realtime_output = False

    def __init__(self, settings: CascadeSettings | None = None, clock: Clock | None = None,
                 progress: Callable[[int, int, str], None] | None = _progress) -> None:
        self.settings = settings or CascadeSettings()
        self.clock = clock or MonotonicClock()
        #: the VAD, its worker and the end-of-turn model every call's listener shares
        self.listening = ListenRuntime(self.settings.turns, self.clock)
        self.think_worker = ModelWorker("think", max_pending=64)
        self.talk_worker = ModelWorker("talk", max_pending=64)
        #: partial transcripts on their own replica of the ASR model and thread, so the
        #: turn's final transcript never waits behind one (None: they share the think worker)
        self.partial_worker = ModelWorker("partial", max_pending=4)
        self.partial_asr: WhisperAsr | None = None
        self._progress = progress
        self.asr: WhisperAsr
        self.llm: LanguageModel
        self.tts: Tts
        #: the offline look at the camera (faces, colours, text read), off the think worker
        self.eyes_worker = ModelWorker("eyes", max_pending=EYES_MAX_PENDING)
        #: --addressee camera: who is talking, frame by frame (its own worker: never the looks')
        self.watch_worker = ModelWorker("watch", max_pending=WATCH_PENDING)
        self.vision: Looker
        self.load_s: dict[str, float] = {}
        self.fallback_tts: Tts | None = None
        self.asr_server: AsrServer | None = None  # --asr-url
        self._runtime: CascadeRuntime | None = None  # built once the models are loaded

    def _load(self) -> None:
        s = self.settings
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("VAD (silero-vad)", self.listening.load_vad),
            (f"ASR (whisper {whisper_name(s.asr)})", lambda: setattr(self, "asr", self._whisper(
                s.asr_threads, Decoding(beam_size=s.asr_beam_size)))),
            *([("ASR for partial transcripts", lambda: setattr(
                self, "partial_asr", self._whisper(s.asr_partial_threads)))]
              if s.asr_partial_threads > 0 and s.asr_partials else []),
            *([("ASR server", self._load_asr_server)] if s.asr_url else []),
            ("LLM (SmolLM2-135M)" if not s.llm_url else "LLM (server)",
             lambda: setattr(self, "llm", self._load_llm())),
            ("TTS (piper)", lambda: setattr(self, "tts", load_tts(s.voice, s.language))),
            *([("TTS server", self._load_tts_server)] if s.tts_url else []),
            ("vision (OpenCV faces, PP-OCR text)", lambda: setattr(self, "vision",
                                                                 self._looker())),
            *([("end of turn (smart-turn v3.2)", self.listening.judge.load)]
              if self.listening.judge.enabled else []),
            ("warm-up run", self._warm_up),
        ]
        for i, (label, load) in enumerate(steps):
            if self._progress:
                self._progress(i, len(steps), label)
            started = time.monotonic()
            try:
                load()
            except (ModelMissing, ImportError, LlmServerError, AsrServerError,
                    TtsServerError) as exc:
                raise EngineLoadError(f"{label}: {exc}") from exc
            except (OSError, ValueError, RuntimeError) as exc:
                raise EngineLoadError(f"{label} failed to load: {exc}") from exc
            self.load_s[label] = time.monotonic() - started
        if self._progress:
            self._progress(len(steps), len(steps), "ready")
        self._runtime = self._new_runtime()

    def _load_asr_server(self) -> None:
        """--asr-url: the server answers a transcription now, or the engine does not start."""
        s = self.settings
        self.asr_server = AsrServer(s.asr_url, s.asr_model, s.asr_key, s.language,
                                    s.asr_timeout_s)
        self.asr_server.check()

    def _load_tts_server(self) -> None:
        """--tts-url: the server speaks a word now, or the engine does not start; the local
        voice loaded before stands in for it."""
        s = self.settings
        voice = ServerVoice(s.tts_url, self.tts, s.tts_model, s.tts_voice, s.tts_key,
                            s.tts_timeout_s)
        voice.check()
        self.tts = voice

    def _whisper(self, threads: int, decoding: Decoding = DEFAULT_DECODING) -> WhisperAsr:
        s = self.settings
        return WhisperAsr(s.asr, threads=threads, language=s.language,
                          decoding=decoding)

    def partial_transcriber(self) -> PartialTranscriber:
        """Where partial transcripts run: their own model copy and worker, or (without the
        copy) the final transcript's model on the think worker."""
        if self.partial_asr is not None:
            return PartialTranscriber(self.partial_worker, self.partial_asr)
        return PartialTranscriber(self.think_worker, self.asr)

    def _new_runtime(self) -> CascadeRuntime:
        return CascadeRuntime(
            settings=self.settings, clock=self.clock, listening=self.listening,
            think_worker=self.think_worker, talk_worker=self.talk_worker, asr=self.asr,
            partial=self.partial_transcriber(), llm=self.llm, vision=self.vision,
            voice=self.talker, new_conversation=self.new_conversation,
            level=lambda: self.level, asr_server=self.asr_server)

    @property
    def runtime(self) -> CascadeRuntime:
        """What the sessions share (the models loaded: after :meth:`start`)."""
        if self._runtime is None:
            raise RuntimeError("the cascade engine's models are not loaded (start() it)")
        return self._runtime

    def _looker(self) -> Looker:
        s = self.settings
        return Looker(FaceFacts(s.camera_fact_confidence),
                      TextReader(min_confidence=s.camera_fact_confidence),
                      read_timeout_s=s.camera_read_timeout_s, worker=self.eyes_worker,
                      watch_worker=self.watch_worker)

    def _load_llm(self) -> LanguageModel:
        s = self.settings
        if s.llm_url:
            from omnicall.engine.cascade.servers.openai_llm import OpenAiLlm

            return OpenAiLlm(s.llm_url, s.llm_model, s.llm_key, s.max_reply_tokens,
                             vision=s.llm_vision, audio_in=s.llm_audio_in,
                             audio_out=s.llm_audio_out, voice=s.llm_voice)
        return LlamaLlm(Path(s.llm) if s.llm else None, threads=s.llm_threads,
                        max_reply_tokens=s.max_reply_tokens, context_tokens=s.llm_context,
                        sprint_threads=s.llm_sprint_threads)

    def new_conversation(self, tools: list[ToolSpec] | None = None) -> Conversation:
        s = self.settings
        if not getattr(self, "llm", None) or not self.llm.prompt_tools:
            tools = None  # a server's own function calling: nothing in the prompt
        prompt = s.instructions or SYSTEM_PROMPT
        if s.language not in ("auto", "en"):
            prompt += " " + reply_language_note(s.language)
        return Conversation(max_tokens=max(256, s.llm_context * 3 // 8),
                            system_prompt=prompt,
                            tools=tool_prompt(tools) if tools else "",
                            shots=tool_shots(tools) if tools else [])

    def _warm_up(self) -> None:
        """Run every model once so the first call pays no first-use cost."""
        rng = np.random.default_rng(0)
        noise = (rng.standard_normal(16_000) * 300).astype(np.int16)
        self.listening.vad.probabilities(VadState(), noise)
        self.asr.transcribe(noise)
        if self.partial_asr is not None:
            self.partial_asr.transcribe(noise)
        messages = self.new_conversation().messages("", "Hello!")
        for _ in self.llm.stream(messages, threading.Event()):
            break
        for _ in self.tts.synthesize("Hello."):
            break
        self.vision.warm_up(np.zeros((48, 64, 3), np.uint8))

    async def start(self) -> None:
        logger.info("loading the embedded CPU models (bundled in packages; no downloads)")
        await self.think_worker.run(self._load)
        logger.info("cascade engine ready: tts=%s; load times %s", self.tts.name,
                    {k: round(v, 2) for k, v in self.load_s.items()})

    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        return CascadeSession(session_id, options, self.runtime)

    def set_level(self, level: Level) -> None:
        """TEXT_FIRST: new turns answer in captions, the Talker paused. FALLBACK: the lighter
        configuration - espeak-ng voice (~17 ms a sentence), replies capped at
        24 tokens, no partial transcripts, no vision."""
        if level == Level.FALLBACK and self.fallback_tts is None:
            try:
                self.fallback_tts = EspeakTts()
            except ModelMissing as exc:
                logger.warning("no lighter voice for the fallback level: %s", exc)
        logger.warning("cascade engine: answering new turns at level %s", level.name)
        self.level = level

    def talker(self) -> Tts | None:
        """The voice for a new turn at the current level (None: text only)."""
        if self.level == Level.TEXT_FIRST:
            return None
        if self.level == Level.FALLBACK and self.fallback_tts is not None:
            return self.fallback_tts
        return self.tts

    def admission_problem(self, active_sessions: int) -> str | None:
        if active_sessions >= self.settings.max_calls:
            return f"the CPU assistant answers {self.settings.max_calls} calls at a time"
        if self.think_worker.pending > self.settings.max_think_queue:
            return "the assistant is busy answering other calls"
        return None

    def queue_depths(self) -> dict[str, int]:
        workers = (self.listening.worker, *self.workers())
        return {w.name: w.pending for w in workers}

    def workers(self) -> tuple[ModelWorker, ...]:
        """The engine's own model workers (the listen and turn workers are the listening
        runtime's: it closes them)."""
        return (self.think_worker, self.talk_worker, self.partial_worker, self.eyes_worker,
                self.watch_worker)

    async def close(self) -> None:
        for worker in self.workers():
            worker.close()
        self.listening.close()
        if getattr(self, "llm", None) is not None:  # loaded (close may come before start)
            await self.llm.aclose()
        if self.asr_server is not None:
            await self.asr_server.aclose()
        voice = getattr(self, "tts", None)
        if isinstance(voice, ServerVoice):
            await voice.aclose()
