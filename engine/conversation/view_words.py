"""Whether a caller's words are about what the camera shows, the same for every engine.

"What colour is this?" asks about the picture; "what colour is a ripe banana?" and "what
colour is the sky on a clear day?" do not, though both hold "what colour". A phrase that
*could* ask about the picture (a colour, reading, counting people, what changed) is taken as
one only when the words refer to the view (:func:`refers_to_view`):

- a word that points at it: this, that, these, those, it, here, my, the camera, the
  picture, what I'm holding, behind me, in front of me, can you see, do you see, look, the
  label, the wall ...;
- or nothing else is said: "What changed?", "Look!", "What colour?" alone.

Used by the frame policy (whether the turn's frame goes at the sharp size:
:func:`~omnicall.engine.conversation.frame_policy.asks_to_look`) and by the offline look's
question router (:func:`~omnicall.engine.cascade.camera.sight_answer.question_kind`): a general
question goes to the model, never to the camera path.

Pure and synchronous; words match whole (case, punctuation and apostrophes ignored:
"What's this?" is " whats this ").
"""

from __future__ import annotations

import re

#: words and phrases that point at what the camera shows (English)
VIEW_REFERENCES: tuple[str, ...] = (
    "this", "that", "these", "those", "it", "its", "here", "my", "mine", "camera",
    "picture", "photo", "video", "screen", "holding", "hold up", "behind me", "in front of me",
    "next to me", "with me", "around me", "you see", "see me", "can you see", "do you see",
    "look", "looking", "show you", "am i", "of us", "fingers", "label", "sign", "card",
    "the wall", "the room", "background",
)
#: words that say nothing of their own ("What changed, please?" is the phrase alone)
FILLERS: tuple[str, ...] = (
    "please", "now", "so", "ok", "okay", "hey", "and", "then", "well", "again", "tell me",
    "can you", "could you", "assistant", "kiosk", "hi", "hello", "um", "uh",
)

_APOSTROPHES = re.compile(r"['\u2019\u2018`]")
_NOT_WORD = re.compile(r"[^\w]+")


def normalize(text: str) -> str:
    """``text`` as `` word word `` (lower case, no punctuation or apostrophes), padded with
    spaces so a phrase ``" what color "`` matches whole words only."""
    words = _NOT_WORD.sub(" ", _APOSTROPHES.sub("", text.casefold())).split()
    return f" {' '.join(words)} "


_REFERENCES = tuple(normalize(w) for w in VIEW_REFERENCES)
_FILLERS = tuple(normalize(w) for w in FILLERS)


def refers_to_view(norm: str, phrase: str = "") -> bool:
    """Whether the normalized words ``norm`` (:func:`normalize`) refer to what the camera
    shows: a pointing word, or nothing but the normalized ``phrase`` they matched (and
    fillers)."""
    if any(ref in norm for ref in _REFERENCES):
        return True
    if not phrase:
        return False
    rest = norm.replace(phrase, " ", 1)
    for filler in _FILLERS:
        while filler in rest:
            rest = rest.replace(filler, " ")
    return not rest.split()


def matching(norm: str, phrases: tuple[str, ...]) -> str:
    """The first of the normalized ``phrases`` in ``norm`` ('' when none is)."""
    return next((p for p in phrases if p in norm), "")
