"""What the caller's words over a reply mean (engine/conversation/backchannels.py): a
listener's "mm-hmm" or "okay" is a backchannel, a cough or a sound with no words is nothing,
and any other words interrupt; per language, from the ASR's own spellings."""

from __future__ import annotations

import pytest

from omnicall.engine.conversation.backchannels import (
    MAX_BACKCHANNEL_WORDS,
    SURE_LOGPROB,
    UNSURE_LONG_S,
    UNSURE_SHORT_S,
    Heard,
    backchannel_words,
    overlap_verdict,
    verdict,
    words_of,
)


@pytest.mark.parametrize("text", ["Mm-hmm.", "mm hmm", "Mhm", "Uh huh.", "Uh-huh", "Yeah.",
                                  "Okay, okay.", "OK", "Right.", "I see.", "Got it.",
                                  "Yeah, right.", "Thank you."])
def test_a_listener_s_words_are_a_backchannel(text: str) -> None:
    assert verdict(text, "en") == "backchannel"


@pytest.mark.parametrize("text", ["", "   ", "(coughing)", "[BLANK_AUDIO]", "*door slams*",
                                  "♪ music ♪", "..."])
def test_sounds_without_words_are_nothing(text: str) -> None:
    assert verdict(text, "en") == "nothing"


@pytest.mark.parametrize("text", ["Stop.", "Wait, stop!", "No.", "What time is it?",
                                  "Yes, but what about Paris?",
                                  "okay okay okay okay okay"])  # too many to be listening
def test_other_words_interrupt(text: str) -> None:
    assert verdict(text, "en") == "interrupt"


def test_each_language_has_its_own_list_and_okay_is_everyone_s() -> None:
    assert verdict("Ja, genau.", "de") == "backchannel"
    assert verdict("D\u2019accord.", "fr") == "backchannel"  # the typographic apostrophe
    assert verdict("Vale, claro.", "es") == "backchannel"
    assert verdict("Okay.", "de") == "backchannel"
    assert verdict("Genau.", "en") == "interrupt"  # not an English listener's word
    assert backchannel_words("auto") == backchannel_words("en")  # unknown: English's
    assert backchannel_words("de-AT") == backchannel_words("de")


def test_words_of_drops_annotations_and_unifies_spellings() -> None:
    assert words_of("(laughs) Mm hmm, uh huh!") == ["mm-hmm", "uh-huh"]
    assert words_of("Don't-") == ["don't"]
    assert len(words_of("yeah " * MAX_BACKCHANNEL_WORDS)) == MAX_BACKCHANNEL_WORDS


SURE, UNSURE = SURE_LOGPROB + 0.1, SURE_LOGPROB - 0.1
SHORT, LONG = UNSURE_SHORT_S - 0.2, UNSURE_LONG_S + 0.1
MIDDLE = (UNSURE_SHORT_S + UNSURE_LONG_S) / 2


@pytest.mark.parametrize("final", [False, True])
def test_words_heard_for_sure_mean_what_they_say_at_once(final: bool) -> None:
    for text, meaning in (("Wait, stop.", "interrupt"), ("Mm-hmm.", "backchannel"),
                          ("(coughing)", "nothing")):
        assert overlap_verdict(Heard(text, SURE), "en", final=final, speech_s=SHORT) == \
            meaning


def test_unsure_words_wait_then_a_short_sound_is_nothing_and_a_long_one_interrupts() -> None:
    heard = Heard("and then them", UNSURE)
    assert overlap_verdict(heard, "en", final=False, speech_s=SHORT) is None
    assert overlap_verdict(heard, "en", final=False, speech_s=MIDDLE) is None
    assert overlap_verdict(heard, "en", final=True, speech_s=SHORT) == "nothing"
    assert overlap_verdict(heard, "en", final=True, speech_s=MIDDLE) == "interrupt"
    assert overlap_verdict(heard, "en", final=False, speech_s=LONG) == "interrupt"


def test_unsure_listener_words_are_still_a_backchannel() -> None:
    assert overlap_verdict(Heard("Yeah", UNSURE), "en", final=True, speech_s=SHORT) == \
        "backchannel"
