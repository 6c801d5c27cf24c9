"""Echo guard: a "user" utterance that repeats what the assistant just said is its own voice
coming back (speakers without echo cancellation, Safari/Firefox quirks), not a turn.

Pure text comparison on normalised words: the share of the user's words covered by runs
they have in common with the assistant's recent reply.
"""

from __future__ import annotations

import difflib
import re

_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def repeats_assistant(user_text: str, assistant_text: str, threshold: float = 0.7,
                      min_run: int = 2) -> bool:
    """True when at least ``threshold`` of the user's words come, in order, in runs of
    ``min_run`` or more words, from ``assistant_text``."""
    said, heard = words(assistant_text), words(user_text)
    if not said or not heard:
        return False
    if len(heard) < min_run:
        return False  # "yes", "stop": too short to call echo; barge-in words must work
    matcher = difflib.SequenceMatcher(None, heard, said, autojunk=False)
    covered = sum(block.size for block in matcher.get_matching_blocks() if block.size >= min_run)
    return covered / len(heard) >= threshold
