"""The cascade's language model on any OpenAI-compatible server (``--llm-url``).

llama.cpp's server, Ollama, vLLM, LM Studio and hosted APIs all speak Chat Completions;
the ``openai`` package streams from them. Everything downstream is the same as with the
local model: the text deltas feed the clause splitter, a barge-in cancels (the HTTP stream
is closed at the next chunk), and tools use the protocol's own function calling (``tools``
in the request, streamed ``tool_calls`` deltas, the result sent back as a ``tool`` message).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import openai

from omnicall.engine.cascade.language_model import ToolRequest
from omnicall.engine.cascade.llm import SpokenReply
from omnicall.engine.tools import new_call_id

if TYPE_CHECKING:
    from omnicall.engine.tools import ToolSpec

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 30.0  # a server silent this long mid-reply: the reply fails (and is said)
CHARS_PER_TOKEN = 4  # the server's tokenizer is out of reach: memory is bounded by estimate


class LlmServerError(RuntimeError):
    """The server cannot be used (unreachable, no such model); the message says which."""


class OpenAiLlm:
    """Chat Completions over HTTP (a
    :class:`~omnicall.engine.cascade.language_model.LanguageModel`); ``stream`` has the same
    contract as ``LlamaLlm.stream``."""

    prompt_tools = False  # tools go in the request, not in the system prompt
    can_prefill = False  # the server's prompt cache is out of reach

    def __init__(self, base_url: str, model: str = "", key: str = "",
                 max_reply_tokens: int = 64) -> None:
        self.client = openai.OpenAI(
            base_url=base_url.rstrip("/"), api_key=key or "not-needed", max_retries=0,
            timeout=openai.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S))
        self.base_url = base_url
        self.max_reply_tokens = max_reply_tokens
        try:
            served = [m.id for m in self.client.models.list()]
        except openai.APIError as exc:
            raise LlmServerError(f"--llm-url {base_url}: {exc}") from exc
        if model and served and model not in served:
            raise LlmServerError(f"--llm-model {model}: not served by {base_url} (it serves "
                                 f"{', '.join(served[:8])})")
        if not model and not served:
            raise LlmServerError(f"--llm-url {base_url} lists no models; name one with "
                                 "--llm-model")
        self.model = model or served[0]
        self.name = f"{self.model} at {base_url}"

    def count_tokens(self, text: str) -> int:
        return len(text) // CHARS_PER_TOKEN + 1

    def prefill(self, messages: list[dict[str, Any]]) -> int:
        """Nothing to fill ahead: the server caches prompts on its own (if it does)."""
        return 0

    def cruise(self) -> None:
        """The server decodes on its own cores: nothing to hand back."""

    def tool_result_messages(self, request: ToolRequest, output: str) -> list[dict[str, Any]]:
        """The call and its result, as the protocol has them."""
        return [{"role": "assistant", "content": None, "tool_calls": [{
                    "id": request.call_id, "type": "function", "function": {
                        "name": request.name, "arguments": json.dumps(request.arguments)}}]},
                {"role": "tool", "tool_call_id": request.call_id, "content": output}]

    def stream(self, messages: list[dict[str, Any]], cancel: threading.Event,
               max_tokens: int | None = None, tools: list[ToolSpec] | None = None,
               greedy: bool = False) -> Iterator[str | ToolRequest]:
        extra: dict[str, Any] = {"tools": [s.openai() for s in tools]} if tools else {}
        stream: Any = self.client.chat.completions.create(
            model=self.model, messages=messages,  # type: ignore[arg-type]
            stream=True, max_tokens=max_tokens or self.max_reply_tokens,
            temperature=0.0 if greedy else 0.3, top_p=0.9, **extra)
        calls: dict[int, dict[str, str]] = {}
        reply = SpokenReply()
        with stream:
            for chunk in stream:
                if cancel.is_set() or not chunk.choices:
                    if cancel.is_set():
                        return
                    continue
                delta = chunk.choices[0].delta
                for call in delta.tool_calls or ():
                    slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = call.id or slot["id"]
                    if call.function is not None:
                        slot["name"] += call.function.name or ""
                        slot["arguments"] += call.function.arguments or ""
                if calls or not delta.content:
                    continue
                text = reply.feed(delta.content)
                if not text:
                    continue
                yield text
                if reply.done:
                    return
        if calls:  # the first call is run (one tool per turn, like the local model)
            first = calls[min(calls)]
            try:
                arguments = json.loads(first["arguments"] or "{}")
            except json.JSONDecodeError:
                logger.warning("tool call %s: arguments are not JSON: %.80s", first["name"],
                               first["arguments"])
                arguments = {}
            yield ToolRequest(first["name"], arguments if isinstance(arguments, dict) else {},
                              first["id"] or new_call_id())
