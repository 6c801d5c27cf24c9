"""The test servers themselves: ``transformers serve`` on the tiny checkpoints (text, image,
audio reach the model), and the recording proxy (passes answers through, SSE included, keeps
the bodies, refuses images when told)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest

from tests.llm_servers import (
    IMAGE_REFUSAL,
    VLM_IMAGE_TOKENS,
    RecordingProxy,
    ServedModel,
    build_tiny_llm,
    decode_data_url,
    image_urls,
    jpeg_data_url,
    mean_colour,
    post_json,
    transformers_serve,
    wav_base64,
)


def user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(parts)}]


TEXT = {"type": "text", "text": "What is this?"}


def image_part(colour: tuple[int, int, int] = (255, 0, 0)) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": jpeg_data_url(colour)}}


def audio_part(seconds: float) -> dict[str, Any]:
    tone = 0.3 * np.sin(2 * np.pi * 440 * np.arange(int(16_000 * seconds)) / 16_000)
    return {"type": "input_audio", "input_audio": {"data": wav_base64(tone), "format": "wav"}}


def prompt_tokens(served: ServedModel, messages: list[dict[str, Any]]) -> int:
    status, body = served.chat(messages, max_tokens=2)
    assert status == 200, body
    assert isinstance(body["choices"][0]["message"]["content"], str)
    return int(body["usage"]["prompt_tokens"])


def test_checkpoints_are_small_and_the_same_each_build(tmp_path: Path,
                                                       tiny_llm_checkpoint: Path,
                                                       tiny_vlm_checkpoint: Path,
                                                       tiny_audio_checkpoint: Path) -> None:
    for folder in (tiny_llm_checkpoint, tiny_vlm_checkpoint, tiny_audio_checkpoint):
        assert sum(f.stat().st_size for f in folder.iterdir()) < 20 * 2**20
    again = build_tiny_llm(tmp_path / "again")
    assert (again / "model.safetensors").read_bytes() == \
        (tiny_llm_checkpoint / "model.safetensors").read_bytes()


def test_serve_answers_and_streams_through_the_proxy(tiny_llm_server: ServedModel,
                                                     recording_proxy: Any) -> None:
    assert tiny_llm_server.startup_s < 60
    proxy = recording_proxy(tiny_llm_server)
    client = openai.OpenAI(base_url=proxy.base_url, api_key="none", max_retries=0)
    chunks = list(client.chat.completions.create(
        model=tiny_llm_server.model, messages=[{"role": "user", "content": "hi"}],
        max_tokens=5, stream=True))
    assert len(chunks) >= 3  # streamed in pieces, unbuffered by the proxy
    assert chunks[-1].choices[0].finish_reason in ("length", "stop")
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
    (record,) = proxy.requests
    assert (record.method, record.path, record.status) == ("POST", "/v1/chat/completions", 200)
    assert record.body["stream"] is True and record.body["max_tokens"] == 5


def test_the_text_model_drops_images_silently(tiny_llm_server: ServedModel) -> None:
    assert prompt_tokens(tiny_llm_server, user(image_part(), TEXT)) == \
        prompt_tokens(tiny_llm_server, user(TEXT))


def test_unknown_request_fields_are_refused_with_422(tiny_llm_server: ServedModel) -> None:
    client = openai.OpenAI(base_url=tiny_llm_server.base_url, api_key="none", max_retries=0)
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client.chat.completions.create(model=tiny_llm_server.model, max_tokens=2,
                                       messages=[{"role": "user", "content": "hi"}],
                                       extra_body={"cache_prompt": True})
    assert "cache_prompt" in refused.value.response.text  # {"detail": "Unexpected fields..."}


def test_an_image_goes_through_the_vision_tower(tiny_vlm_server: ServedModel,
                                                recording_proxy: Any) -> None:
    plain = prompt_tokens(tiny_vlm_server, user(TEXT))
    proxy = recording_proxy(tiny_vlm_server)
    status, body = post_json(f"{proxy.base_url}/chat/completions",
                             {"model": tiny_vlm_server.model, "max_tokens": 2,
                              "messages": user(image_part((0, 0, 255)), TEXT)})
    assert status == 200, body
    assert body["usage"]["prompt_tokens"] == plain + VLM_IMAGE_TOKENS
    (sent,) = proxy.chat_bodies()
    mime, jpeg = decode_data_url(image_urls(sent)[0])
    assert mime == "image/jpeg"
    r, g, b = mean_colour(jpeg)
    assert b > 200 and r < 40 and g < 40


def test_input_audio_goes_through_the_audio_encoder(tiny_audio_server: ServedModel) -> None:
    plain = prompt_tokens(tiny_audio_server, user(TEXT))
    one = prompt_tokens(tiny_audio_server, user(audio_part(1.0), TEXT))
    three = prompt_tokens(tiny_audio_server, user(audio_part(3.0), TEXT))
    assert one - plain == 25 + 2  # 25 audio tokens a second, between audio_bos and audio_eos
    assert three - one == 50
    # images mean nothing to it: dropped by its chat template
    assert prompt_tokens(tiny_audio_server, user(image_part(), TEXT)) == plain


def test_the_proxy_refuses_images_when_told(tiny_vlm_server: ServedModel,
                                           recording_proxy: Any) -> None:
    proxy = recording_proxy(tiny_vlm_server, refuse_images=True)
    url = f"{proxy.base_url}/chat/completions"
    status, body = post_json(url, {"model": tiny_vlm_server.model, "max_tokens": 2,
                                   "messages": user(image_part(), TEXT)})
    assert status == 400 and body["error"]["message"] == IMAGE_REFUSAL
    status, body = post_json(url, {"model": tiny_vlm_server.model, "max_tokens": 2,
                                   "messages": user(TEXT)})
    assert status == 200, body
    proxy.refuse_images = False
    status, _ = post_json(url, {"model": tiny_vlm_server.model, "max_tokens": 2,
                                "messages": user(image_part(), TEXT)})
    assert status == 200
    assert [r.status for r in proxy.requests] == [400, 200, 200]


async def test_the_proxy_serves_async_clients(tiny_llm_server: ServedModel) -> None:
    async with RecordingProxy(tiny_llm_server.root, max_records=2) as proxy:
        client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="none", max_retries=0)
        for word in ("one", "two", "three"):
            stream = await client.chat.completions.create(
                model=tiny_llm_server.model, messages=[{"role": "user", "content": word}],
                max_tokens=3, stream=True)
            assert [c async for c in stream]
        await client.close()
        assert [b["messages"][0]["content"] for b in proxy.bodies] == ["two", "three"]


def test_a_server_that_cannot_load_fails_with_its_log(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(AssertionError, match="transformers serve exited") as failure, \
            transformers_serve(tmp_path, tmp_path / "serve.log"):
        pass
    assert "Traceback" in str(failure.value) or "Error" in str(failure.value)
