"""What of a call's conversation goes to the transcript store, and what it keeps meanwhile."""

from __future__ import annotations

from omnicall.app.storage.stored_conversation import (
    MAX_OPEN_REPLIES,
    MAX_REPLY_CHARS,
    StoredConversation,
)
from omnicall.engine.events import AssistantText, StageTiming, TurnEvent, UserTranscript


def test_final_user_transcripts_and_ended_replies_are_stored() -> None:
    stored = StoredConversation()
    assert stored.item(UserTranscript("what is", False, 1)) is None
    assert stored.item(UserTranscript("   ", True, 1)) is None
    assert stored.item(UserTranscript("what is it?", True, 1)) == ("user", "what is it?")
    assert stored.item(AssistantText("It is ", 2)) is None
    assert stored.item(AssistantText("a test. ", 2)) is None
    assert stored.item(StageTiming(2, "first_audio", 1.0)) is None
    assert stored.item(TurnEvent("assistant", "end", 2)) == ("assistant", "It is a test.")
    assert len(stored) == 0


def test_a_cut_reply_says_so_and_a_silent_one_is_not_stored() -> None:
    stored = StoredConversation()
    stored.item(AssistantText("Well, the", 3))
    assert stored.item(TurnEvent("assistant", "end", 3, interrupted=True)) == \
        ("assistant", "Well, the ...")
    assert stored.item(TurnEvent("assistant", "end", 4)) is None
    assert stored.item(TurnEvent("user", "end", 5)) is None


def test_reply_text_is_bounded() -> None:
    stored = StoredConversation()
    for turn in range(MAX_OPEN_REPLIES + 3):
        stored.item(AssistantText("x", turn))
    assert len(stored) == MAX_OPEN_REPLIES
    assert stored.item(TurnEvent("assistant", "end", 0)) is None  # pruned: the oldest
    stored.item(AssistantText("a" * MAX_REPLY_CHARS, 99))
    stored.item(AssistantText("tail", 99))
    item = stored.item(TurnEvent("assistant", "end", 99))
    assert item is not None and len(item[1]) == MAX_REPLY_CHARS and item[1].endswith("tail")
