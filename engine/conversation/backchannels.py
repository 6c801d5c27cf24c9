"""What the caller's words over the assistant's reply mean: an interruption, a backchannel,
or nothing at all.

While the assistant speaks, a caller who says "mm-hmm", "yeah" or "okay" is listening, not
taking the turn; a cough, a door or the assistant's own voice coming back says no words at
all. Only other words interrupt. :func:`verdict` tells them apart from a transcript of the
sound (the ASR's words for it), per language; the lists are short on purpose (the words
people say to show they follow, alone or two together), and a transcript longer than
:data:`MAX_BACKCHANNEL_WORDS` words is never a backchannel.

The ASR also says how sure it is (:class:`Heard`): a short sound it is unsure of ("mm-hmm"
read as "and then them", "uh-huh" as "uh-uh") is no interruption, while words it is sure of
interrupt as soon as they are heard (:func:`overlap_verdict`).

Pure: no model, no I/O (the listener asks the engine for the words and this module what they
mean).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Verdict = Literal["interrupt", "backchannel", "nothing"]

MAX_BACKCHANNEL_WORDS = 4
#: words heard with a mean token log-probability of at least this are sure: they interrupt
#: at once (measured on Whisper tiny.en over the room bench's phrases: the misread
#: backchannels scored -0.66 to -1.16, interruptions' first words -0.17 to -1.44, their whole
#: sentences -0.12 to -0.52)
SURE_LOGPROB = -0.6
#: unsure words over a reply: when the speech ends, speech shorter than this is no
#: interruption (a backchannel or a sound the ASR made words of); spoken longer, they
#: interrupt
UNSURE_SHORT_S = 1.0
#: unsure words that keep coming this long interrupt without waiting for the end (longer
#: than a backchannel: the bench's, synthesized, last 0.5-0.95 s)
UNSURE_LONG_S = 1.2

#: per language: the words (after :func:`words_of`) a listener says to show they follow
BACKCHANNELS: dict[str, frozenset[str]] = {
    "en": frozenset({
        "mm", "mmm", "hm", "hmm", "mhm", "mm-hmm", "mmhmm", "uh-huh", "uhhuh", "uh", "huh",
        "yeah", "yea", "yep", "yes", "ya", "okay", "ok", "right", "alright", "sure", "i",
        "see", "got", "it", "cool", "nice", "great", "wow", "oh", "ah", "aha", "true",
        "exactly", "indeed", "fine", "good", "sounds",
        # what Whisper writes for a short sound with no words in it, and thanks
        "you", "thank", "thanks"}),
    "de": frozenset({
        "mm", "hm", "hmm", "mhm", "aha", "ja", "jaja", "genau", "okay", "ok", "richtig",
        "stimmt", "klar", "gut", "achso", "ach", "so", "verstehe", "super", "oh"}),
    "fr": frozenset({
        "mm", "hm", "hmm", "mhm", "oui", "ouais", "d'accord", "daccord", "ok", "okay", "ah",
        "oh", "bon", "voilà", "voila", "exactement", "je", "vois", "bien", "super"}),
    "es": frozenset({
        "mm", "hm", "hmm", "mhm", "sí", "si", "vale", "claro", "ajá", "aja", "ok", "okay",
        "ya", "bueno", "exacto", "oh", "ah", "entiendo", "perfecto"}),
    "it": frozenset({
        "mm", "hm", "hmm", "mhm", "sì", "si", "certo", "ok", "okay", "esatto", "giusto",
        "capito", "ah", "oh", "va", "bene", "perfetto"}),
    "pt": frozenset({
        "mm", "hm", "hmm", "mhm", "sim", "certo", "claro", "ok", "okay", "exato", "ah", "oh",
        "tá", "ta", "entendi", "beleza"}),
}

#: what the ASR writes for sounds that are not words: "(coughing)", "[door closes]", "*sighs*"
_ANNOTATION = re.compile(r"\([^)]*\)|\[[^\]]*\]|\*[^*]*\*|♪[^♪]*♪?")
_MM_HMM = re.compile(r"\b(m+)[\s-]+(h+m+)\b")  # "mm hmm", "m-hm" -> "mm-hmm"
_UH_HUH = re.compile(r"\buh[\s-]+huh\b")
_APOSTROPHE = "\u2019"  # the typographic one, as some ASR models write it
_WORD = re.compile(r"[\w'-]+")


def words_of(text: str) -> list[str]:
    """The spoken words of a transcript, lower case, annotations of sounds dropped, the
    usual spellings of "mm-hmm" and "uh-huh" made one."""
    text = _ANNOTATION.sub(" ", text.lower()).replace(_APOSTROPHE, "'")
    text = _MM_HMM.sub("mm-hmm", _UH_HUH.sub("uh-huh", text))
    return [w.strip("-'") for w in _WORD.findall(text) if w.strip("-'")]


def backchannel_words(language: str) -> frozenset[str]:
    """The list for ``language`` (an ISO 639-1 code, or ``auto``/unknown: English's)."""
    return BACKCHANNELS.get(language.split("-")[0].lower(), BACKCHANNELS["en"])


def verdict(text: str, language: str = "en") -> Verdict:
    """``nothing``: no words (silence, a cough, a sound); ``backchannel``: only a listener's
    words, a few of them; ``interrupt``: anything else."""
    words = words_of(text)
    if not words:
        return "nothing"
    listening = backchannel_words(language) | BACKCHANNELS["en"]  # "okay" is everyone's
    if len(words) <= MAX_BACKCHANNEL_WORDS and all(w in listening for w in words):
        return "backchannel"
    return "interrupt"


@dataclass(frozen=True, slots=True)
class Heard:
    """What an ASR made of the caller's sound: its words, and the mean log-probability of
    their tokens (how sure it was: 0 is certain; an engine that cannot tell says 0)."""

    text: str
    logprob: float = 0.0


def overlap_verdict(heard: Heard, language: str, *, final: bool,
                    speech_s: float) -> Verdict | None:
    """What the caller's sound over a reply means, from what was heard of it so far
    (``final``: the speech ended; ``speech_s``: how long it has lasted): the words'
    :func:`verdict`, except that words the ASR is unsure of wait (None) for more sound,
    then, when the speech ends, are nothing when short and an interruption when long."""
    meaning = verdict(heard.text, language)
    if meaning != "interrupt" or heard.logprob >= SURE_LOGPROB:
        return meaning
    if speech_s >= UNSURE_LONG_S:
        return "interrupt"
    if not final:
        return None
    return "nothing" if speech_s < UNSURE_SHORT_S else "interrupt"
