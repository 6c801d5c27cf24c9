"""The Thinker's language model: SmolLM2-135M-Instruct (bundled GGUF) on llama.cpp.

llama-cpp-python was chosen over transformers by measurement on this 2-core machine:
~100 tok/s and ~150 ms time to first token vs 18 tok/s, 190 ms and a 28 s first load for
transformers (which dequantizes the GGUF to fp32). The model is small and its answers are
weak, so prompts stay short and replies are guarded (length cap, two sentences, no markup).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_cpp import Llama

from engine.models import smollm2_gguf

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = ("You are omnicall, a friendly voice assistant on a video call. You can hear "
                 "the user and see their camera. Reply in one or two short spoken sentences. "
                 "No lists, no markdown.")


@dataclass
class Conversation:
    """Per-session memory, bounded by tokens (oldest exchanges are forgotten first)."""

    max_tokens: int = 768
    turns: list[tuple[str, str]] = field(default_factory=list)
    system_prompt: str = SYSTEM_PROMPT  # --instructions

    def add(self, role: str, text: str) -> None:
        if text.strip():
            self.turns.append((role, text.strip()))

    def replace_last(self, role: str, text: str) -> None:
        """Change the latest ``role`` message (dropped when ``text`` is empty)."""
        for index in range(len(self.turns) - 1, -1, -1):
            if self.turns[index][0] == role:
                if text.strip():
                    self.turns[index] = (role, text.strip())
                else:
                    del self.turns[index]
                return

    def trim(self, count_tokens: Callable[[str], int]) -> None:
        while self.turns and sum(count_tokens(t) + 4 for _, t in self.turns) > self.max_tokens:
            self.turns.pop(0)
        while self.turns and self.turns[0][0] != "user":
            self.turns.pop(0)

    def messages(self, facts: str, user_text: str) -> list[dict[str, str]]:
        """The prompt for answering ``user_text`` (not yet added to the memory).

        The camera facts change every few seconds, so they go last, just before the question:
        the system prompt and the history stay a stable prefix that llama.cpp keeps cached
        from the previous turn (only the new tail is prefilled)."""
        camera = [{"role": "system", "content": f"What the camera shows now: {facts}"}] \
            if facts else []
        return [{"role": "system", "content": self.system_prompt},
                *({"role": role, "content": text} for role, text in self.turns),
                *camera, {"role": "user", "content": user_text}]


_MARKUP = re.compile(r"[*_#`>|\[\]{}<>]+")


def clean_delta(delta: str) -> str:
    return _MARKUP.sub("", delta)


class LlamaLlm:
    def __init__(self, model_path: Path | None = None, threads: int = 2,
                 max_reply_tokens: int = 64, context_tokens: int = 2048) -> None:
        path = model_path or smollm2_gguf()
        # decode on ``threads`` (a core stays free for TTS), prefill the prompt on both cores
        self.llm = Llama(model_path=str(path), n_ctx=context_tokens, n_threads=threads,
                         n_threads_batch=max(2, threads), verbose=False)
        self.max_reply_tokens = max_reply_tokens
        self.name = Path(path).name

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode(), add_bos=False))

    def stream(self, messages: list[dict[str, str]], cancel: threading.Event,
               max_tokens: int | None = None) -> Iterator[str]:
        """Reply text deltas; stops early when ``cancel`` is set or after two sentences."""
        sentences = 0
        chunks: Iterator[Any] = self.llm.create_chat_completion(  # type: ignore[assignment]
            messages, stream=True,  # type: ignore[arg-type]
            max_tokens=max_tokens or self.max_reply_tokens,
            temperature=0.3, top_p=0.9, repeat_penalty=1.15)
        for chunk in chunks:
            if cancel.is_set():
                return
            content = chunk["choices"][0]["delta"].get("content")
            if not isinstance(content, str) or not content:
                continue
            delta = clean_delta(content)
            yield delta
            sentences += len(re.findall(r"[.!?](\s|$)", delta))
            if sentences >= 2:
                return
