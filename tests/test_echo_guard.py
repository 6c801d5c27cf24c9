"""The echo guard tells the assistant's own voice from a real user turn."""

from __future__ import annotations

from omnicall.engine.conversation.echo_guard import repeats_assistant

REPLY = "The capital of France is Paris, a city on the Seine."


def test_echo_of_the_reply_is_recognised() -> None:
    assert repeats_assistant("the capital of France is Paris", REPLY)
    assert repeats_assistant("capital of france is paris a city on the", REPLY)


def test_real_turns_are_not_echo() -> None:
    assert not repeats_assistant("What about Germany?", REPLY)
    assert not repeats_assistant("Is Paris big?", REPLY)  # shares a word, not a run
    assert not repeats_assistant("stop", REPLY)  # short barge-in words always count
    assert not repeats_assistant("tell me about the capital of Spain and its food", REPLY)
    assert not repeats_assistant("", REPLY) and not repeats_assistant("hello there", "")
