"""Reply filters: streamed model text turned into what is said - a leading ``[...]`` tool tag
stripped (:class:`ReplyFilter`), markup removed (:func:`clean_delta`), and done after two
sentences (:class:`SpokenReply`). Shared by every LLM backend."""

from __future__ import annotations

import re

_MARKUP = re.compile(r"[*_#`>|\[\]{}<>]+")
_SENTENCE_END = re.compile(r"[.!?](\s|$)")
MAX_SENTENCES = 2


def clean_delta(delta: str) -> str:
    return _MARKUP.sub("", delta)


class ReplyFilter:
    """Strips a leading ``[...]`` (a tool choice echoed into an answer) from streamed text."""

    def __init__(self) -> None:
        self.head = ""
        self.passing = False

    def feed(self, delta: str) -> str:
        if self.passing:
            return delta
        self.head += delta
        stripped = self.head.lstrip()
        if not stripped:
            return ""
        if not stripped.startswith("["):
            self.passing = True
            return self.head
        if "]" in stripped:
            self.passing = True
            return stripped.split("]", 1)[1].lstrip()
        if len(stripped) > 40:  # not a tool tag after all
            self.passing = True
            return self.head
        return ""


class SpokenReply:
    """Streamed model text -> what is said: a leading tool tag stripped (:class:`ReplyFilter`),
    markup removed, and :attr:`done` after two sentences. Shared by every LLM backend."""

    def __init__(self) -> None:
        self._tag = ReplyFilter()
        self.sentences = 0

    def feed(self, content: str) -> str:
        text = clean_delta(self._tag.feed(content))
        self.sentences += len(_SENTENCE_END.findall(text))
        return text

    @property
    def done(self) -> bool:
        return self.sentences >= MAX_SENTENCES
