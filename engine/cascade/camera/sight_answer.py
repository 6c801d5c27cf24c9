"""Honest answers to questions about the camera, from what the offline default can see.

The bundled language model (135M parameters) is told the camera facts in a note, but a
model that small guesses when asked what it cannot know. So a question about the camera is
answered here, from the facts alone (:func:`answer`), and the model is not asked:

- ``read``: "read this", "what does it say": the text read, quoted; or that none could be
  made out (or read in time), with what helps;
- ``unseeable``: what no fact covers ("what breed is this dog", "who is that", "what brand
  is it"): the assistant says it cannot tell, and what it can see instead;
- ``colour``, ``people``, ``change``: the fact that answers it, or that it cannot tell;
- ``describe`` ("what do you see") and ``object`` ("what is this", "what am I holding"):
  every fact said, and that objects are not recognised offline.

A phrase counts only when the words refer to the camera's view (:func:`~omnicall.engine.
conversation.view_words.refers_to_view`: "what colour is this?", not "what colour is a
banana?"). Any other words (or another language: the phrases are English) get ``None``: the
model answers, with the note. Pure and synchronous; phrases match as whole words, case,
punctuation and apostrophes ignored.
"""

from __future__ import annotations

from omnicall.engine.cascade.camera.sight import Fact, Sight
from omnicall.engine.conversation.view_words import matching, normalize, refers_to_view

#: each kind's phrases, checked in this order (the first that matches is the kind)
PHRASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("read", ("read this", "read that", "read it", "read the", "read what", "can you read",
              "what does it say", "what does this say", "what does that say",
              "what does the label say", "what does the sign say", "whats written",
              "this say", "that say", "it say",
              "what is written", "what it says", "what this says", "say on it",
              "says on it", "says on the")),
    ("unseeable", ("what breed", "which breed", "what kind of", "what sort of", "what type of",
                   "what brand", "which brand", "what make", "what model", "who is this",
                   "who is that", "whos this", "whos that", "who am i", "how old",
                   "what species", "what animal", "what plant", "what flower", "what tree",
                   "is it ripe", "is it fresh", "am i smiling", "how do i look", "what mood",
                   "what is my name", "recognise", "recognize", "what food", "what fruit",
                   "how much is", "what size")),
    ("colour", ("what colour", "what color", "which colour", "which color", "what colours",
                "what colors")),
    ("people", ("how many people", "anyone behind", "anybody behind", "is anyone",
                "is anybody", "is there anyone", "is there anybody", "someone behind",
                "somebody behind", "who else", "how many of us", "can you see me",
                "do you see me", "how many faces", "am i alone", "people here")),
    ("change", ("what changed", "whats changed", "what has changed", "whats different",
                "what is different", "anything different", "anything changed",
                "notice anything")),
    ("describe", ("what do you see", "what can you see", "what you see", "describe",
                  "can you see anything", "do you see anything")),
    ("object", ("what is this", "whats this", "what is that", "whats that", "what is it",
                "what am i holding", "what im holding", "in my hand")),
)
#: the kinds whose answer quotes the text read: the text is read for them even when the
#: frame policy did not take the words as asking to look
READ_KINDS = ("read", "unseeable", "describe", "object")
LIMITS = "Offline I can only make out colours, text, and people facing the camera."

_PATTERNS = tuple((kind, tuple(normalize(p) for p in phrases)) for kind, phrases in PHRASES)


def question_kind(words: str, language: str = "en") -> str | None:
    """The kind of camera question ``words`` ask (see the module docstring), or None."""
    if language.casefold().split("-")[0] not in ("en", ""):
        return None
    norm = normalize(words)
    for kind, patterns in _PATTERNS:
        phrase = matching(norm, patterns)
        if phrase and refers_to_view(norm, phrase):
            return kind
    return None


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def _quoted(facts: tuple[Fact, ...]) -> str:
    """'It says "ORGANIC MILK / Best before 12/05".' from the text fact."""
    text = facts[0].text.removeprefix("text reads ").strip()
    return f"It says {text}."


def _centre_colour(sight: Sight, min_confidence: float) -> str:
    colours = [f for f in sight.of("colour", min_confidence) if "middle" in f.text]
    return colours[0].text.removeprefix("the thing in the middle is ") if colours else ""


def answer(words: str, sight: Sight | None, min_confidence: float,
           language: str = "en") -> str | None:
    """The reply to a question about the camera, from ``sight``'s facts at
    ``min_confidence`` or more; None when ``words`` ask no such question (the model
    answers)."""
    kind = question_kind(words, language)
    if kind is None:
        return None
    if sight is None:
        return "I couldn't look at your camera just now. Please ask me again in a moment."
    if sight.of("light", min_confidence):
        return "Your camera picture is dark, so I can't see anything. It may be covered or off."
    text = sight.of("text", min_confidence)
    if kind == "read":
        if text:
            return _quoted(text)
        if sight.unread:
            return "I couldn't read it in time. Hold it still, close to the camera, and ask again."
        return ("I can't make out any text. Try holding it closer to the camera, facing it, "
                "in good light.")
    if kind == "colour":
        if "background" in words or "wall" in words or "room" in words:
            whole = [f for f in sight.of("colour", min_confidence) if "whole" in f.text]
            return _sentence(whole[0].text) if whole else "I can't tell the colours for sure."
        centre = _centre_colour(sight, min_confidence)
        return f"It looks {centre}." if centre else "I can't tell the colour for sure."
    if kind == "people":
        people = sight.of("people", min_confidence)
        said = _sentence(people[0].text) if people else "I can't tell for sure."
        return f"{said} I can only see faces turned towards the camera."
    if kind == "change":
        changed = sight.of("change", min_confidence)
        if changed:
            return " ".join(_sentence(f.text) for f in changed)
        return "Nothing much has changed since I last looked." if sight.compared else \
            "This is my first look, so I can't compare yet."
    centre = _centre_colour(sight, min_confidence)
    seen = f" I can see that it's {centre}." if centre else ""
    read = f" {_quoted(text)}" if text else ""
    if kind == "unseeable":
        return f"I can't tell that from here. {LIMITS}{seen}{read}"
    if kind == "object":
        return f"I can't recognise objects without a vision model.{seen}{read}"
    facts = [_sentence(f.text) for f in sight.said(min_confidence)
             if f.kind in ("colour", "people", "text", "change")]
    return " ".join([*facts, "I can't recognise objects offline."])
