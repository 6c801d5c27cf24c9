"""Real OpenAI-compatible LLM servers for tests: ``transformers serve`` on tiny random
checkpoints built here (offline, seeded, a few MB each), and a recording reverse proxy to put
in front of any server.

Checkpoints (``build_*(path)``; session-cached by the ``tiny_*_checkpoint`` fixtures in
tests/conftest.py):

* :func:`build_tiny_llm` - a plain Llama (``LlamaForCausalLM``: serve's modality LLM, it
  drops image and audio parts silently).
* :func:`build_tiny_vlm` - LLaVA (``LlavaForConditionalGeneration``): a tiny CLIP vision tower
  and Llama, the PIL ``CLIPImageProcessorPil`` (no torchvision). Each image becomes
  :data:`VLM_IMAGE_TOKENS` ``<image>`` tokens run through the vision tower.
* :func:`build_tiny_audio_llm` - Qwen2-Audio (``Qwen2AudioForConditionalGeneration``,
  ``WhisperFeatureExtractor``): serve's modality MULTIMODAL, so ``input_audio`` (WAV base64)
  parts reach the audio encoder (~25 prompt tokens per second of audio).

All three share one byte-level tokenizer (every byte is a token, no merges; 320 ids) with
ChatML special tokens, so any generated id decodes; each chat template renders only the media
its model takes. Built in ~0.1 s (after imports), under 1 MB each.

Fixtures: ``tiny_{llm,vlm,audio}_checkpoint`` (session: the saved folders),
``tiny_{llm,vlm,audio}_server`` (session: a :class:`ServedModel`, started on first use),
``recording_proxy`` (a factory of :class:`RecordingProxy`, stopped at the test's end).

Servers: :func:`transformers_serve` starts ``transformers serve`` on a free port (a context
manager yielding a :class:`ServedModel`); :class:`RecordingProxy` forwards requests to it
unchanged (SSE streamed through) and keeps the JSON bodies it saw, optionally refusing image
requests as llama.cpp's server does for a model without a projector.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: ChatML and media special tokens, after the 256 byte tokens
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<|AUDIO|>",
                  "<|audio_bos|>", "<|audio_eos|>")
VOCAB_SIZE = 320  # 256 bytes + the specials, rounded up (unused ids decode as <|tN|>)
#: the VLM's image: 32x32 pixels in 8x8 patches, CLS dropped -> 16 tokens
VLM_IMAGE_SIZE = 32
VLM_PATCH = 8
VLM_IMAGE_TOKENS = (VLM_IMAGE_SIZE // VLM_PATCH) ** 2
MAX_NEW_TOKENS = 8  # the checkpoints' default reply length (requests may ask for more)


def chat_template(image: str = "", audio: str = "") -> str:
    """ChatML; an image part renders as ``image``, an audio part as ``audio`` (by default
    neither renders: the model does not take that medium)."""
    parts = "{% if c['type'] == 'text' %}{{ c['text'] }}"
    if image:
        parts += "{% elif c['type'] == 'image' %}" + image
    if audio:
        parts += "{% elif c['type'] == 'audio' %}" + audio
    return ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
            "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
            "{% for c in m['content'] %}" + parts + "{% endif %}{% endfor %}{% endif %}"
            "<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


TEXT_TEMPLATE = chat_template()
VLM_TEMPLATE = chat_template(image="<image>")
AUDIO_TEMPLATE = chat_template(audio="<|audio_bos|><|AUDIO|><|audio_eos|>")


def build_tokenizer() -> Any:
    """A byte-level BPE with no merges: one token per UTF-8 byte, ChatML specials after."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {char: index for index, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    for token in SPECIAL_TOKENS:
        vocab[token] = len(vocab)
    while len(vocab) < VOCAB_SIZE:
        vocab[f"<|t{len(vocab)}|>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", bos_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS[1:])})
    fast.chat_template = TEXT_TEMPLATE
    return fast


def _token_ids(tok: Any) -> dict[str, int]:
    return {token: int(tok.convert_tokens_to_ids(token)) for token in SPECIAL_TOKENS}


def _llama_config(**overrides: Any) -> Any:
    from transformers import LlamaConfig

    ids = _token_ids(build_tokenizer())
    values: dict[str, Any] = dict(
        vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"], tie_word_embeddings=True)
    values.update(overrides)
    return LlamaConfig(**values)


def _save(model: Any, path: Path, *savables: Any) -> Path:
    model.eval()
    model.generation_config.max_new_tokens = MAX_NEW_TOKENS
    model.generation_config.do_sample = False
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path))
    for item in savables:
        item.save_pretrained(str(path))
    return path


def build_tiny_llm(path: Path, seed: int = 0) -> Path:
    """A random 2-layer Llama (serve's modality LLM) with the byte tokenizer."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return _save(LlamaForCausalLM(_llama_config()), path, build_tokenizer())


def build_tiny_vlm(path: Path, seed: int = 0) -> Path:
    """A random LLaVA: 1-layer CLIP vision tower (32 px, 8 px patches) + 2-layer Llama; the PIL
    CLIP image processor, so nothing needs torchvision."""
    import torch
    from transformers import (
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    tok = build_tokenizer()
    tok.chat_template = VLM_TEMPLATE
    ids = _token_ids(tok)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                              num_attention_heads=2, image_size=VLM_IMAGE_SIZE,
                              patch_size=VLM_PATCH, projection_dim=32)
    config = LlavaConfig(vision_config=vision, text_config=_llama_config(),
                         image_token_index=ids["<image>"], vision_feature_layer=-1,
                         vision_feature_select_strategy="default", projector_hidden_act="gelu")
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": VLM_IMAGE_SIZE},
        crop_size={"height": VLM_IMAGE_SIZE, "width": VLM_IMAGE_SIZE})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tok,
                               patch_size=VLM_PATCH, vision_feature_select_strategy="default",
                               num_additional_image_tokens=1, chat_template=VLM_TEMPLATE,
                               image_token="<image>")
    return _save(model, path, processor)


def build_tiny_audio_llm(path: Path, seed: int = 0) -> Path:
    """A random Qwen2-Audio: 1-layer Whisper-style encoder (128 mel bins) + 2-layer Qwen2."""
    import torch
    from transformers import (
        Qwen2AudioConfig,
        Qwen2AudioEncoderConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        Qwen2Config,
        WhisperFeatureExtractor,
    )

    tok = build_tokenizer()
    tok.chat_template = AUDIO_TEMPLATE
    ids = _token_ids(tok)
    audio = Qwen2AudioEncoderConfig(num_mel_bins=128, encoder_layers=1,
                                    encoder_attention_heads=2, encoder_ffn_dim=64, d_model=32,
                                    max_source_positions=1500)
    text = Qwen2Config(vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=4096, eos_token_id=ids["<|im_end|>"],
                       pad_token_id=ids["<|endoftext|>"], bos_token_id=ids["<|endoftext|>"],
                       tie_word_embeddings=True)
    config = Qwen2AudioConfig(audio_config=audio, text_config=text,
                              audio_token_index=ids["<|AUDIO|>"])
    torch.manual_seed(seed)
    model = Qwen2AudioForConditionalGeneration(config)
    processor = Qwen2AudioProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=128, sampling_rate=16_000),
        tokenizer=tok, chat_template=AUDIO_TEMPLATE)
    return _save(model, path, processor)


# ---- transformers serve ------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class ServedModel:
    """A running ``transformers serve`` pinned to one checkpoint."""

    base_url: str  #: ``http://127.0.0.1:PORT/v1`` (an OpenAI client's base_url)
    model: str  #: the model id requests name (the checkpoint's path; the server is pinned to it)
    log: Path  #: the server's stdout and stderr
    proc: subprocess.Popen[bytes]
    startup_s: float  #: spawn to a 200 from /health (the checkpoint loads before that)

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT`` (where /health is)."""
        return self.base_url.removesuffix("/v1")

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log, lines)

    def chat(self, messages: list[dict[str, Any]], timeout_s: float = 60,
             **params: Any) -> tuple[int, dict[str, Any]]:
        """POST /v1/chat/completions (not streamed); (status, JSON body)."""
        return post_json(f"{self.base_url}/chat/completions",
                         {"model": self.model, "messages": messages, **params}, timeout_s)


def post_json(url: str, body: dict[str, Any], timeout_s: float = 60) -> tuple[int, dict[str, Any]]:
    """POST a JSON body; (status, decoded JSON answer), error statuses included."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            return error.code, json.loads(raw or b"{}")
        except ValueError:
            return error.code, {"raw": raw.decode(errors="replace")}


@contextlib.contextmanager
def transformers_serve(checkpoint: Path | str, log_path: Path | str | None = None,
                       timeout_s: float = 60, extra_args: tuple[str, ...] = ()
                       ) -> Iterator[ServedModel]:
    """``transformers serve CHECKPOINT`` on a free loopback port (CPU, offline), once its
    /health answers; stopped (terminate, then kill) on exit. Fails with the log's tail when it
    exits or is not healthy within ``timeout_s``."""
    import tempfile

    checkpoint = str(Path(checkpoint).resolve())
    port = _free_port()
    if log_path is None:
        handle, name = tempfile.mkstemp(prefix="transformers-serve-", suffix=".log")
        os.close(handle)
        log_path = name
    log = Path(log_path)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    cli = Path(sys.executable).with_name("transformers")
    argv = [str(cli) if cli.exists() else "transformers", "serve", checkpoint,
            "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
            "--log-level", "info", *extra_args]
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        root = f"http://127.0.0.1:{port}"
        deadline = started + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"{root}/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                raise AssertionError(f"transformers serve exited ({proc.returncode}):\n"
                                     f"{_tail(log)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"transformers serve not healthy after {timeout_s:.0f} s:\n"
                                     f"{_tail(log)}")
            time.sleep(0.1)
        yield ServedModel(f"{root}/v1", checkpoint, log, proc, time.monotonic() - started)
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# ---- the recording proxy -----------------------------------------------------------------

#: headers a proxy does not pass on (hop-by-hop, or recomputed by the sending side)
_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                  "trailer", "transfer-encoding", "upgrade", "host", "content-length"})
IMAGE_REFUSAL = "image input is not supported"


@dataclass
class Recorded:
    method: str
    path: str  #: with the query string
    body: Any  #: the decoded JSON body, None when there was none or it was not JSON
    status: int | None = None  #: the answer's status (set once the response headers are sent)


def has_images(body: Any) -> bool:
    """Whether a chat request carries an image part (``image_url`` / ``input_image``)."""
    return bool(image_urls(body))


def image_urls(body: Any) -> list[str]:
    """The image URLs (data URLs, mostly) of a chat completions request, in order."""
    urls: list[str] = []
    if not isinstance(body, dict):
        return urls
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("image_url", "input_image"):
                url = part.get("image_url")
                urls.append(url.get("url", "") if isinstance(url, dict) else str(url))
    return urls


def audio_parts(body: Any) -> list[dict[str, Any]]:
    """The ``input_audio`` objects ({data, format}) of a chat completions request, in order."""
    out: list[dict[str, Any]] = []
    for message in (body.get("messages") or []) if isinstance(body, dict) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "input_audio":
                out.append(part.get("input_audio") or {})
    return out


def decode_data_url(url: str) -> tuple[str, bytes]:
    """``data:MIME;base64,DATA`` -> (MIME, bytes)."""
    head, _, data = url.partition(",")
    if not head.startswith("data:") or not head.endswith(";base64"):
        raise ValueError(f"not a base64 data URL: {url[:40]!r}")
    return head[5:-7], base64.b64decode(data)


def mean_colour(image: bytes) -> tuple[int, int, int]:
    """The mean RGB of an encoded image (JPEG, PNG...)."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(image)).convert("RGB"), dtype=np.float64)
    r, g, b = pixels.reshape(-1, 3).mean(axis=0)
    return round(r), round(g), round(b)


def wav_base64(samples: Any, rate: int = 16_000) -> str:
    """Mono int16 (or float in [-1, 1]) samples as a base64 WAV (an ``input_audio`` data)."""
    import wave

    import numpy as np

    data = np.asarray(samples)
    if data.dtype.kind == "f":
        data = (np.clip(data, -1, 1) * 32767).astype(np.int16)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(data.astype(np.int16).tobytes())
    return base64.b64encode(buffer.getvalue()).decode()


def jpeg_data_url(colour: tuple[int, int, int] = (255, 0, 0), size: tuple[int, int] = (64, 48)
                  ) -> str:
    """A solid-colour JPEG as a data URL (an ``image_url`` part's url)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, "JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


@dataclass
class RecordingProxy:
    """A reverse proxy (aiohttp, on its own event loop in a thread, so sync and async tests
    use it alike) that forwards every request to ``upstream`` and streams the answer back
    unchanged, recording each request (method, path, JSON body; the last ``max_records``).

    ``refuse_images``: answer chat requests that carry an image with HTTP 400
    ``{"error": {"message": "image input is not supported", ...}}`` (what llama.cpp's server
    says for a model without an mmproj) instead of forwarding them; settable while running.

        with RecordingProxy(served.root) as proxy:
            client = OpenAI(base_url=proxy.base_url, api_key="x")
            ...
            assert proxy.bodies[-1]["messages"][0]["content"][0]["type"] == "image_url"
    """

    upstream: str  #: the server's root, ``http://HOST:PORT`` (a trailing /v1 is dropped)
    max_records: int = 200
    refuse_images: bool = False
    refusal_message: str = IMAGE_REFUSAL
    port: int = 0
    records: deque[Recorded] = field(init=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _runner: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.upstream = self.upstream.rstrip("/").removesuffix("/v1")
        self.records = deque(maxlen=self.max_records)

    # -- what tests read

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: give this to the client under test."""
        return f"{self.root}/v1"

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self.records)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the recorded POSTs, oldest first."""
        return [r.body for r in self.requests if r.method == "POST" and r.body is not None]

    def chat_bodies(self) -> list[dict[str, Any]]:
        """The bodies of the recorded /chat/completions requests."""
        return [r.body for r in self.requests
                if r.path.split("?")[0].endswith("/chat/completions") and isinstance(r.body, dict)]

    def clear(self) -> None:
        with self._lock:
            self.records.clear()

    def wait_for(self, count: int, timeout_s: float = 10) -> list[Recorded]:
        """Block until ``count`` requests were recorded (for clients that send in the
        background)."""
        deadline = time.monotonic() + timeout_s
        while len(self.records) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.records)} requests recorded, wanted {count}")
            time.sleep(0.02)
        return self.requests

    # -- life

    def start(self) -> RecordingProxy:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except Exception as error:  # noqa: BLE001 (re-raised by start())
                failure.append(error)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="recording-proxy", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> RecordingProxy:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    # -- the server (on the proxy's loop)

    async def _serve(self) -> None:
        from aiohttp import ClientSession, ClientTimeout, web

        self._session = ClientSession(auto_decompress=False,
                                      timeout=ClientTimeout(total=None, sock_read=300))
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)

        async def close_session(_: web.Application) -> None:
            await self._session.close()

        app.on_cleanup.append(close_session)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def _forward(self, request: Any) -> Any:
        from aiohttp import web

        raw = await request.read()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        record = Recorded(request.method, request.path_qs, body)
        with self._lock:
            self.records.append(record)
        if self.refuse_images and has_images(body):
            record.status = 400
            return web.json_response(
                {"error": {"code": 400, "message": self.refusal_message,
                           "type": "invalid_request_error"}}, status=400)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with self._session.request(request.method, self.upstream + request.path_qs,
                                         data=raw or None, headers=headers,
                                         allow_redirects=False) as upstream:
            record.status = upstream.status
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP:
                    response.headers.add(key, value)
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except ConnectionResetError:  # the client went away mid-stream (a cancel)
                pass
            return response


# ---- pytest fixtures (imported by tests/conftest.py) --------------------------------------


@pytest.fixture(scope="session")
def tiny_llm_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llm(tmp_path_factory.mktemp("tiny-llm"))


@pytest.fixture(scope="session")
def tiny_vlm_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"))


@pytest.fixture(scope="session")
def tiny_audio_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_audio_llm(tmp_path_factory.mktemp("tiny-audio-llm"))


def _served(checkpoint: Path, factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    log = factory.mktemp("serve-logs") / f"{checkpoint.name}.log"
    with transformers_serve(checkpoint, log) as served:
        yield served


@pytest.fixture(scope="session")
def tiny_llm_server(tiny_llm_checkpoint: Path,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    """``transformers serve`` on the tiny Llama (text only), for the whole session."""
    yield from _served(tiny_llm_checkpoint, tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_vlm_server(tiny_vlm_checkpoint: Path,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    """``transformers serve`` on the tiny LLaVA (image_url parts reach its vision tower)."""
    yield from _served(tiny_vlm_checkpoint, tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_audio_server(tiny_audio_checkpoint: Path,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    """``transformers serve`` on the tiny Qwen2-Audio (input_audio parts reach its encoder)."""
    yield from _served(tiny_audio_checkpoint, tmp_path_factory)


@pytest.fixture
def recording_proxy() -> Iterator[Any]:
    """A factory: ``recording_proxy(upstream, refuse_images=False, max_records=200)`` starts a
    :class:`RecordingProxy` in front of ``upstream`` (a :class:`ServedModel` or a URL); all
    are stopped when the test ends."""
    started: list[RecordingProxy] = []

    def start(upstream: ServedModel | str, **options: Any) -> RecordingProxy:
        url = upstream.root if isinstance(upstream, ServedModel) else upstream
        proxy = RecordingProxy(url, **options).start()
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()
