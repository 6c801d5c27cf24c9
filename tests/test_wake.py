"""The wake phrase: a turn is answered when it begins with the phrase (as the ASR spells it)
or while the conversation is open after the assistant spoke; others are no turn."""

from __future__ import annotations

import pytest

from omnicall.engine.conversation.wake import WakeGate, after_phrase


@pytest.mark.parametrize(("heard", "rest"), [
    ("Hey kiosk, where is the cafe?", "where is the cafe?"),
    ("Hey, kiosk. Where is the cafe?", "Where is the cafe?"),
    ("Hay kiosk where is the cafe", "where is the cafe"),
    ("hey kiosks, what time is it?", "what time is it?"),
    ("Um, hey kiosk, is the museum open?", "is the museum open?"),
    ("Hey kiosk.", ""),
])
def test_the_phrase_as_the_asr_spells_it_opens_the_turn(heard: str, rest: str) -> None:
    assert after_phrase(heard, "hey kiosk") == rest


@pytest.mark.parametrize("heard", [
    "Did you see the game last night?", "Where is the cafe?", "Hey Mike, over here!",
    "I told the kiosk guy hey", "Kiosk hey", "The kiosk is closed.", "",
])
def test_other_words_are_not_said_to_the_assistant(heard: str) -> None:
    assert after_phrase(heard, "hey kiosk") is None


def test_the_conversation_stays_open_after_the_assistant_spoke_and_then_closes() -> None:
    gate = WakeGate("hey kiosk", open_s=8.0)
    never = float("-inf")
    assert gate.heard("Did you see the game last night?", 10.0, never) is None
    assert gate.heard("Hey kiosk, where is the cafe?", 20.0, never) == "where is the cafe?"
    assert gate.heard("And the toilets?", 25.0, never) == "And the toilets?"  # opened by it
    assert gate.heard("And the toilets?", 29.0, never) is None  # 9 s on, nobody spoke
    # the assistant's reply ended at 30 s: open until 38 s
    assert gate.heard("Thanks, and the exit?", 36.0, 30.0) == "Thanks, and the exit?"
    assert gate.heard("Nice weather today.", 39.0, 30.0) is None  # a bystander, later
    assert gate.heard("Hey kiosk.", 50.0, 30.0) == "Hey kiosk."  # the phrase alone: answered


def test_no_phrase_answers_every_turn() -> None:
    gate = WakeGate("")
    assert not gate.on
    assert gate.heard("Did you see the game last night?", 0.0, float("-inf")) == \
        "Did you see the game last night?"
