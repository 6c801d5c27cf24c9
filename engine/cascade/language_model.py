"""What the cascade asks of its language model, whichever backend answers: the bundled GGUF on
llama.cpp (:class:`~omnicall.engine.cascade.llm.LlamaLlm`) or an OpenAI-compatible server
(:class:`~omnicall.engine.cascade.servers.openai_llm.OpenAiLlm`).

The answer path and the session speak to a :class:`LanguageModel` and ask it about what it
can do (``can_prefill``, ``prompt_tools``) instead of asking which class it is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from omnicall.engine.tools import ToolSpec
    from omnicall.media.resample import Int16Array


@dataclass(frozen=True)
class ToolRequest:
    """The model asked for a tool instead of (before) answering."""

    name: str
    arguments: dict[str, Any]
    call_id: str = ""


@dataclass(frozen=True)
class SpokenAudio:
    """A piece of the reply as the server's own voice (``--llm-audio-out``): mono PCM."""

    samples: Int16Array
    rate_hz: int


class MediaRefused(RuntimeError):
    """The server failed a request that carried images or audio (before any reply text):
    the caller retries without them and stops sending them."""


class LanguageModel(Protocol):
    """A chat model that streams a spoken reply (or one tool request) for a prompt."""

    name: str
    #: the tools are listed in the system prompt (the bracket format a grammar enforces);
    #: False: they go in the request (the server's own function calling)
    prompt_tools: bool
    #: the model keeps a prompt cache that :meth:`prefill` can fill while the user speaks
    can_prefill: bool
    #: a server whose prompt cache :meth:`warm` fills with a request of its own (no worker)
    can_warm: bool
    #: camera frames go in the user's messages (``--llm-vision``); set False once the
    #: server refused them
    sees: bool
    #: the user's speech itself goes in their message (``--llm-audio-in``)
    hears: bool
    #: the reply may come with the server's own voice (``--llm-audio-out``):
    #: :meth:`stream` then yields :class:`SpokenAudio` pieces too
    speaks: bool

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` (an estimate where the tokenizer is out of reach)."""
        ...

    def tool_result_messages(self, request: ToolRequest, output: str) -> list[dict[str, Any]]:
        """What follows the prompt once the tool of ``request`` returned ``output``."""
        ...

    def prefill(self, messages: list[dict[str, Any]]) -> int:
        """Put the prompt of ``messages`` up to the end of the last message's text in the
        cache; returns the tokens evaluated now (0 for a model without a cache of its own)."""
        ...

    async def warm(self, messages: list[dict[str, Any]]) -> bool:
        """Send the prompt of ``messages`` ahead, so the server has it cached (only called
        when ``can_warm``); False when the server failed it (logged: optional work)."""
        ...

    async def aclose(self) -> None:
        """Release what the model holds open (a server's connection pool)."""
        ...

    def cruise(self) -> None:
        """The reply's first clause is out: the rest may be decoded with fewer cores."""
        ...

    def stream(self, messages: list[dict[str, Any]], cancel: threading.Event,
               max_tokens: int | None = None, tools: list[ToolSpec] | None = None,
               greedy: bool = False) -> Iterator[str | ToolRequest | SpokenAudio]:
        """Reply text deltas, or one :class:`ToolRequest` (when ``tools`` are offered and
        the model picks one), and with ``speaks`` the server's audio; stops early when
        ``cancel`` is set or after two sentences (of text: the audio plays to its end).
        ``greedy``: no sampling (answers from a tool's result keep its facts better)."""
        ...
