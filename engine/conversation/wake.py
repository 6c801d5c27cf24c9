"""Who the assistant answers without a camera: a wake phrase opens a conversation.

With ``--wake-phrase "hey kiosk"`` a caller's turn is answered only when it begins with the
phrase ("Hey kiosk, where is the cafe?": the words after it are the question), or while the
conversation is open: for ``open_s`` after the assistant last spoke (its reply's sound played
out) or after the phrase was heard. Everything else the microphone hears (people passing by
and chatting, a TV) is no turn: nothing is answered and no reply is cut for it. No phrase: every
turn is answered (the default).

The phrase is matched on what the speech recognizer heard, forgiving its spelling ("Hey,
kiosk." "Hay kiosk" "hey kiosks"): the turn's first words, case and punctuation ignored,
against the phrase's, word by word: the same first letter and alike by :data:`LIKENESS`
(difflib's ratio) or more ("hay" for "hey", "kiosks" for "kiosk"; not "the" for "hey").

Pure and synchronous: the times are passed in (seconds on the call's clock).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from omnicall.engine.conversation.view_words import normalize

#: how alike a heard word must be to the phrase's (difflib's ratio, 0..1; same first letter)
LIKENESS = 0.6
#: words heard before the phrase that do not count against it ("um, hey kiosk")
LEAD_WORDS = ("um", "uh", "oh", "ok", "okay", "so", "and", "hi", "hello")


def after_phrase(text: str, phrase: str) -> str | None:
    """The words of ``text`` after the wake ``phrase`` it begins with, or None when it does
    not begin with it (see the module docstring)."""
    words, wanted = normalize(text).split(), normalize(phrase).split()
    if not wanted:
        return text
    for skip in range(min(2, len(words)) + 1):
        if skip and words[skip - 1] not in LEAD_WORDS:
            break
        said = words[skip:skip + len(wanted)]
        if len(said) == len(wanted) and all(_alike(a, b) for a, b in zip(said, wanted,
                                                                           strict=True)):
            return _rest(text, skip + len(wanted))
    return None


def _alike(heard: str, wanted: str) -> bool:
    return heard[:1] == wanted[:1] and \
        difflib.SequenceMatcher(None, heard, wanted).ratio() >= LIKENESS


def _rest(text: str, words: int) -> str:
    """``text`` less its first ``words`` words (as :func:`normalize` counts them), with the
    punctuation between cut."""
    kept = text.split()
    count = 0
    for i, token in enumerate(kept):
        count += len(normalize(token).split())
        if count >= words:
            return " ".join(kept[i + 1:]).lstrip(" ,.;:!?-")
    return ""


@dataclass
class WakeGate:
    """One call's wake phrase and whether its conversation is open (see the module
    docstring)."""

    phrase: str = ""
    open_s: float = 8.0
    _open_until_s: float = float("-inf")

    @property
    def on(self) -> bool:
        return bool(self.phrase.strip())

    def is_open(self, now_s: float, spoke_until_s: float) -> bool:
        """Whether the conversation is open at ``now_s``; ``spoke_until_s``: when the
        assistant's last reply finished sounding."""
        return not self.on or now_s < max(self._open_until_s, spoke_until_s + self.open_s)

    def heard(self, text: str, now_s: float, spoke_until_s: float) -> str | None:
        """A caller's turn heard as ``text``: what to answer (the words after the phrase, all
        of them for the phrase alone or while the conversation is open), or None: not said
        to the assistant. The phrase opens the conversation; the assistant's replies keep it
        open (``spoke_until_s``), the caller's own turns do not."""
        rest = after_phrase(text, self.phrase) if self.on else None
        if rest is not None:
            self._open_until_s = now_s + self.open_s
        elif not self.is_open(now_s, spoke_until_s):
            return None
        return rest or text
