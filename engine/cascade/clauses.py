"""Cut a stream of LLM text deltas into clauses for the Talker. Pure and synchronous.

A clause ends at sentence punctuation, or at a comma/semicolon/colon/dash once it has at
least ``min_words`` words, so speech can start after the first few words instead of the
whole sentence. The very first clause of a reply is also cut after ``first_max_words``
words when no punctuation came by then (for ~110 ms less wait), but never right after a
weak word - an article, preposition, auxiliary - which the voice, ending a clause there,
says in its citation form ("The sky on a" was spoken "on A" and heard as "on 8"): the cut
moves on past such words, by up to ``WEAK_EXTEND_WORDS`` ("The sky on a clear | day").
Cutting earlier instead, before the phrase ("The sky | on a clear day"), was heard worse
(bench --reply-wer): Piper says a 2-3 word clause poorly ("Bees make honey" -> "These may
Connie"). With ``phrases`` it may instead end where speech can pause: before a word
that starts a phrase ("... | in the north", "... | because ...") once it has
``first_min_words`` words - measured on 2 cores (bench --reply-wer, --tools) it sounded
smoother but, with ``first_max_words`` 6-8, answered ~110 ms later and its word error rate
was no lower, so it is off by default. ``flush()`` returns what is left when the reply ends.
"""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"[.!?\u2026]+[\"')\]]*(\s|$)")
_SOFT_END = re.compile(r"[,;:\u2014-]\s")
#: words that start a phrase: speech may pause before them
PHRASE_STARTS = frozenset((
    "and", "but", "or", "so", "because", "although", "though", "that", "which", "who",
    "whose", "when", "where", "while", "if", "unless", "with", "without", "to", "for", "in",
    "on", "at", "of", "from", "by", "about", "into", "onto", "like", "than", "as", "after",
    "before", "during", "until", "since", "through", "between"))
#: words a clause should not end on (see the module doc)
WEAK_ENDINGS = PHRASE_STARTS | frozenset((
    "a", "an", "the", "my", "your", "his", "her", "its", "our", "their", "this", "these",
    "those", "is", "are", "was", "were", "be", "been", "am", "has", "have", "had", "do",
    "does", "did", "can", "could", "will", "would", "should", "may", "might", "must", "very",
    "not", "no", "some", "any", "each", "every", "i", "we", "you", "they", "it's", "i'm"))
WEAK_EXTEND_WORDS = 3
_WORD = re.compile(r"[^\w']+")


class ClauseSplitter:
    def __init__(self, min_words: int = 4, max_chars: int = 160,
                 first_max_words: int | None = 4, first_min_words: int = 3,
                 phrases: bool = False, weak_endings: bool = True) -> None:
        self.min_words = min_words
        self.max_chars = max_chars
        self.first_max_words = first_max_words
        self.first_min_words = first_min_words
        self.phrases = phrases
        self.weak_endings = weak_endings
        self._buffer = ""
        self._first = True

    def feed(self, delta: str) -> list[str]:
        self._buffer += delta
        out: list[str] = []
        while True:
            cut = self._find_cut()
            if cut is None:
                break
            clause, self._buffer = self._buffer[:cut].strip(), self._buffer[cut:].lstrip()
            if clause:
                out.append(clause)
                self._first = False
        return out

    def _find_cut(self) -> int | None:
        text = self._buffer
        cuts = []
        sentence = _SENTENCE_END.search(text)
        # a sentence end counts once something follows it (a delta may end mid "3.50")
        if sentence and (sentence.end() < len(text) or text[-1].isspace()):
            cuts.append(sentence.end())
        for soft in _SOFT_END.finditer(text):
            if len(text[:soft.start()].split()) >= self.min_words:
                cuts.append(soft.end())
                break
        if self._first and self.first_max_words:
            words = list(re.finditer(r"\S+\s", text))
            if self.phrases:
                for index in range(self.first_min_words, min(len(words), self.first_max_words)):
                    if words[index].group().strip().lower() in PHRASE_STARTS:
                        cuts.append(words[index - 1].end())
                        break
            cut = self._first_cut([w.group() for w in words])
            if cut is not None:
                cuts.append(words[cut - 1].end())
        if cuts:
            return min(cuts)
        if len(text) > self.max_chars:
            space = text.rfind(" ", 0, self.max_chars)
            return space if space > 0 else self.max_chars
        return None

    def _first_cut(self, words: list[str]) -> int | None:
        """After how many of the (complete) ``words`` the first clause is cut without
        punctuation; None: not yet."""
        limit = self.first_max_words
        assert limit is not None
        if len(words) <= limit:
            return None
        if not self.weak_endings:
            return limit
        plain = [_WORD.sub("", w).lower() for w in words]
        for k in range(limit, limit + WEAK_EXTEND_WORDS + 1):  # past any weak words
            if k >= len(words):
                return None  # wait for the next word
            if plain[k - 1] not in WEAK_ENDINGS:
                return k
        return limit + WEAK_EXTEND_WORDS

    def flush(self) -> str:
        rest, self._buffer = self._buffer.strip(), ""
        return rest
