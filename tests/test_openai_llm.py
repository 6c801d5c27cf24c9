"""``--llm-url``: the cascade's LLM on a real OpenAI-compatible server - llama.cpp's own
server module (llama-cpp-python[server]) on the bundled GGUF, started here."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from omnicall.engine.base import SessionOptions
from omnicall.engine.bundled_models import smollm2_gguf
from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.history import Conversation
from omnicall.engine.cascade.servers.openai_llm import LlmServerError, OpenAiLlm
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.events import AssistantAudio, AssistantText, TurnEvent
from omnicall.engine.tools import load_tools
from tests.cascade_fixtures import Recorder
from tests.utils import _free_port


@pytest.fixture(scope="module")
def llm_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()),
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1",
         "--n_threads_batch", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/models", timeout=1):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("llama.cpp's server did not start") from None
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(10)


def question(text: str) -> list[dict[str, Any]]:
    return Conversation().messages("", text)


def test_a_reply_streams_in_pieces_and_stops_after_two_sentences(llm_server: str) -> None:
    llm = OpenAiLlm(llm_server, max_reply_tokens=64)
    assert llm.model.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")  # the server's first model
    deltas = [d for d in llm.stream(question("What is the capital of France?"),
                                    threading.Event())]
    assert len(deltas) > 3 and all(isinstance(d, str) for d in deltas)
    text = "".join(deltas)  # type: ignore[arg-type]
    assert text.strip() and "*" not in text
    assert sum(text.count(p) for p in ".!?") <= 2


def test_cancel_ends_the_stream_at_the_next_chunk(llm_server: str) -> None:
    llm = OpenAiLlm(llm_server, max_reply_tokens=200)
    cancel = threading.Event()
    got = []
    for delta in llm.stream(question("Tell me a very long story about a dragon."), cancel):
        got.append(delta)
        cancel.set()
    assert len(got) == 1


def test_tools_are_offered_and_a_plain_answer_still_comes(llm_server: str) -> None:
    """llama.cpp's server with the bundled 135M model does not call tools (its chat template
    has no tool syntax): the request carries them, and the answer is plain text."""
    llm = OpenAiLlm(llm_server)
    box = load_tools("examples.tools")
    out = list(llm.stream(question("Hello there!"), threading.Event(), tools=box.specs()))
    assert out and all(isinstance(d, str) for d in out)


def test_an_unreachable_server_or_an_unknown_model_is_a_clear_error(llm_server: str) -> None:
    started = time.monotonic()
    with pytest.raises(LlmServerError, match=r"--llm-url http://127.0.0.1:9/v1: Connection"):
        OpenAiLlm("http://127.0.0.1:9/v1")
    assert time.monotonic() - started < 5
    with pytest.raises(LlmServerError, match=r"--llm-model nope: not served by .* \(it serves"):
        OpenAiLlm(llm_server, model="nope")


async def test_the_cascade_answers_through_the_server_with_speech(llm_server: str) -> None:
    engine = CascadeEngine(CascadeSettings(llm_url=llm_server), progress=None)
    await engine.start()
    try:
        assert isinstance(engine.llm, OpenAiLlm)
        session = engine.open_session("url", SessionOptions())
        recorder = Recorder(session)
        session.send_text("What is the capital of France?")
        await recorder.wait(lambda r: any(e.role == "assistant" and e.phase == "end"
                                          for e in r.of(TurnEvent)), timeout_s=30)
        # a second turn remembers the first (the conversation goes to the server)
        assert session.conversation.pairs()[0] == ("user", "What is the capital of France?")
        await recorder.close()
    finally:
        await engine.close()
    text = "".join(e.delta for e in recorder.of(AssistantText))
    assert text.strip()
    assert sum(len(e.samples) for e in recorder.of(AssistantAudio)) > 24_000 * 0.5


def test_malformed_audio_chunks_are_skipped_not_raised() -> None:
    """A server's audio chunk that is not base64, a truncated or 8-bit WAV, or an odd number
    of PCM bytes: skipped (or the whole samples kept), never an exception mid-reply."""
    import base64
    import io
    import wave

    import numpy as np

    from omnicall.engine.cascade.servers.openai_llm import decode_audio

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    assert decode_audio("") is None
    garbage = decode_audio("%%% not base64 %%%")  # the characters are ignored: no samples
    assert garbage is None or len(garbage.samples) == 0
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(1)
        out.setframerate(8000)
        out.writeframes(bytes(100))
    assert decode_audio(b64(buffer.getvalue())) is None  # 8-bit: refused
    assert decode_audio(b64(b"RIFF" + bytes(10))) is None  # a truncated WAV header
    odd = decode_audio(b64(np.arange(5, dtype="<i2").tobytes() + b"\x01"))
    assert odd is not None and list(odd.samples) == [0, 1, 2, 3, 4] and odd.rate_hz == 24_000
    stereo = io.BytesIO()
    with wave.open(stereo, "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes(np.array([1, -1, 2, -2], "<i2").tobytes())
    left = decode_audio(b64(stereo.getvalue()))
    assert left is not None and list(left.samples) == [1, 2] and left.rate_hz == 16_000
