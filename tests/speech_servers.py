"""Real OpenAI-compatible speech servers for tests and the bench (third-party packages,
started here on free loopback ports, offline, on the bundled models):

* :func:`faster_whisper_server` - ``faster-whisper-server`` (PyPI, MIT) serving
  ``/v1/audio/transcriptions`` with the bundled Whisper tiny.en (CTranslate2 folder).
* :func:`piper_speech_server` - ``local-tts-studio`` (PyPI, MIT; ``local-tts``) serving
  ``/v1/audio/speech`` with the bundled Piper voice (en_US joe), linked into its voices folder
  and named its API's default voice in its settings file. It answers a clause whole (raw PCM
  at the voice's 22,050 Hz, said in ``X-Sample-Rate``).
* :func:`tiny_whisper_serve` - ``transformers serve`` (``tests.llm_servers``) on a tiny random
  Whisper checkpoint built here by :func:`build_tiny_whisper` (the bundled tiny.en is a
  CTranslate2 folder, which transformers cannot load): its words are nonsense but fixed.

Each is a context manager yielding a :class:`SpeechServer` (stopped at the end: terminate,
then kill), failing with its log's tail when it does not come up.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.llm_servers import ServedModel, _free_port, _tail, transformers_serve

ROOT = Path(__file__).resolve().parent.parent
#: the tiny Whisper's vocabulary: the bundled tiny.en's tokenizer (50,257 text tokens and its
#: specials); everything past the text tokens is suppressed, so each answer has words
TINY_WHISPER_VOCAB = 50_364
TEXT_TOKENS = 50_257


@dataclass
class SpeechServer:
    """A running third-party speech server."""

    base_url: str  #: ``http://127.0.0.1:PORT/v1``
    model: str  #: the model name to ask for
    proc: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log, lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _tool(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    return str(exe) if exe.exists() else name


@contextlib.contextmanager
def _running(argv: list[str], health_url: str, base_url: str, model: str, folder: Path,
             env: dict[str, str] | None = None, timeout_s: float = 60,
             ready: Any = None) -> Iterator[SpeechServer]:
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=folder, env={**os.environ, "HF_HUB_OFFLINE": "1",
                                                       "PYTHONUNBUFFERED": "1", **(env or {})},
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = SpeechServer(base_url, model, proc, log)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(health_url, timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                raise AssertionError(f"{argv[0]} exited ({proc.returncode}):\n{_tail(log)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{argv[0]} did not come up in {timeout_s:.0f} s:\n"
                                     f"{_tail(log)}")
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


#: faster-whisper-server's model and decoding options (its YAML config), as omnicall's own
#: ASR runs the same model: int8 on two threads, greedy, no timestamps, no VAD, no
#: conditioning on earlier text (faster-whisper's defaults: beam 5, temperature fallback)
WHISPER_MODEL_OPTIONS = {"device": "cpu", "compute_type": "int8", "cpu_threads": 2}
WHISPER_DECODING = {"beam_size": 1, "without_timestamps": True, "vad_filter": False,
                    "condition_on_previous_text": False, "temperature": 0.0}


@contextlib.contextmanager
def faster_whisper_server(model_dir: Path | None = None,
                          folder: Path | None = None) -> Iterator[SpeechServer]:
    """``faster-whisper-server --config`` serving MODEL_DIR (default: the bundled tiny.en)
    as ``whisper-1`` (the openai package's field is ``model``; this server reads
    ``model_name``, whose default is that name) with omnicall's decoding, on a free port."""
    from omnicall.engine.bundled_models import whisper_tiny_en_dir

    port = _free_port()
    with contextlib.ExitStack() as stack:
        where = folder or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        where.mkdir(parents=True, exist_ok=True)
        config = where / "models.yaml"
        config.write_text(json.dumps({"models": [{  # JSON is YAML
            "name": "whisper-1", "path": str(model_dir or whisper_tiny_en_dir()),
            "model_options": WHISPER_MODEL_OPTIONS, "transcribe_options": WHISPER_DECODING}]}))
        argv = [_tool("faster-whisper-server"), "--config", str(config),
                "--host", "127.0.0.1", "--port", str(port), "--log-level", "info"]
        root = f"http://127.0.0.1:{port}"
        yield stack.enter_context(_running(argv, f"{root}/health", f"{root}/v1", "whisper-1",
                                           where))


@contextlib.contextmanager
def piper_speech_server(voice_onnx: Path | None = None,
                        folder: Path | None = None) -> Iterator[SpeechServer]:
    """``local-tts`` (local-tts-studio) with the bundled Piper voice (or ``voice_onnx``) as
    its API's default voice, on a free port; its data folder is a temporary one."""
    from omnicall.engine.bundled_models import joe_voice_onnx

    voice = Path(voice_onnx or joe_voice_onnx())
    port = _free_port()
    with contextlib.ExitStack() as stack:
        where = folder or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        voices = where / "voices"
        voices.mkdir(parents=True, exist_ok=True)
        for suffix in ("", ".json"):
            link = voices / (voice.name + suffix)
            if not link.exists():
                link.symlink_to(Path(str(voice) + suffix))
        (where / "settings.json").write_text(json.dumps({
            "voices_dir": str(voices), "api_default_voice": voice.stem, "device": "cpu"}))
        argv = [_tool("local-tts"), "--host", "127.0.0.1", "--port", str(port)]
        root = f"http://127.0.0.1:{port}"
        yield stack.enter_context(_running(
            argv, f"{root}/v1/models", f"{root}/v1", "tts-1", where,
            env={"LOCAL_TTS_DATA_DIR": str(where)}))


def build_tiny_whisper(path: Path, seed: int = 0) -> Path:
    """A random 1-layer Whisper (d_model 32) with the bundled tiny.en's tokenizer, greedy,
    at most 8 new tokens of text (at least 4): ~11 MB, built in a second."""
    import torch
    from transformers import (
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizerFast,
    )

    from omnicall.engine.bundled_models import whisper_tiny_en_dir

    tokenizer = WhisperTokenizerFast(tokenizer_file=str(whisper_tiny_en_dir() / "tokenizer.json"))
    start, end = tokenizer.convert_tokens_to_ids(["<|startoftranscript|>", "<|endoftext|>"])
    config = WhisperConfig(
        vocab_size=TINY_WHISPER_VOCAB, num_mel_bins=80, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_source_positions=1500, max_target_positions=64,
        decoder_start_token_id=start, eos_token_id=end, pad_token_id=end, bos_token_id=end)
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).eval()
    generation = model.generation_config
    generation.max_new_tokens, generation.min_new_tokens, generation.do_sample = 8, 4, False
    generation.suppress_tokens = list(range(TEXT_TOKENS, TINY_WHISPER_VOCAB))
    generation.begin_suppress_tokens = [end]
    processor = WhisperProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=80, sampling_rate=16_000),
        tokenizer=tokenizer)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path))
    processor.save_pretrained(str(path))
    return path


@contextlib.contextmanager
def tiny_whisper_serve(folder: Path) -> Iterator[ServedModel]:
    """``transformers serve`` on a tiny Whisper built in ``folder``."""
    with transformers_serve(build_tiny_whisper(folder / "whisper"), folder / "serve.log",
                            timeout_s=120) as served:
        yield served


def transcription_request(base_url: str, wav: bytes, model: str,
                          timeout_s: float = 60) -> dict[str, Any]:
    """One plain multipart POST /v1/audio/transcriptions (no openai package): the server's
    own answer, to compare the client's with."""
    boundary = "omnicall-test-boundary"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\n{model}\r\n'
             .encode(),
             f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
             "Content-Type: audio/wav\r\n\r\n".encode() + wav + b"\r\n",
             f"--{boundary}--\r\n".encode()]
    request = urllib.request.Request(
        f"{base_url}/audio/transcriptions", data=b"".join(parts), method="POST",
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as error:
        raise AssertionError(f"{error.code}: {error.read()[:300]!r}") from error
