"""Which words refer to what the camera shows: general questions with colour, reading and
counting words never reach the camera path (the frame policy's sharp frame, the offline
look's answers); questions that point at the view do."""

from __future__ import annotations

import pytest

from omnicall.engine.cascade.camera.sight_answer import question_kind
from omnicall.engine.conversation.frame_policy import asks_to_look
from omnicall.engine.conversation.view_words import normalize, refers_to_view

#: general questions that hold a camera question's words, and must go to the model
GENERAL = [
    "What color is the sky on a clear day?", "What color is a ripe banana?",
    "What colour are flamingos?", "How many legs does a spider have?",
    "Read me a short poem.", "Can you read me a short poem?", "How many people live in Paris?",
    "Is anyone awake at three in the morning usually?", "Describe the water cycle.",
    "What changed in the law last year?", "Show me how to boil an egg.",
    "What kind of music do you like?", "How old is the universe?",
    "Which colour do you like best?", "What is the capital of France?",
    "Who else won a Nobel prize twice?", "What type of tree grows fastest?",
]
#: questions about the camera's view, and the kind of answer they get offline
CAMERA = [
    ("What color is this?", "colour"), ("What colour is my shirt?", "colour"),
    ("What colour?", "colour"), ("Which colour is the thing I'm holding?", "colour"),
    ("Can you read this?", "read"), ("Can you read the label?", "read"),
    ("What does it say?", "read"), ("Is anyone behind me?", "people"),
    ("How many people can you see?", "people"), ("Is anyone here?", "people"),
    ("What changed?", "change"), ("What changed, please?", "change"),
    ("What do you see?", "describe"), ("Describe what you see.", "describe"),
    ("What am I holding?", "object"), ("What's that?", "object"),
    ("What breed is this dog?", "unseeable"), ("Who am I?", "unseeable"),
]


@pytest.mark.parametrize("words", GENERAL)
def test_general_questions_never_reach_the_camera(words: str) -> None:
    assert question_kind(words) is None
    assert not asks_to_look(words)


@pytest.mark.parametrize(("words", "kind"), CAMERA)
def test_questions_about_the_view_do(words: str, kind: str) -> None:
    assert question_kind(words) == kind


@pytest.mark.parametrize("words", ["What colour is this?", "Look!", "look at that",
                                   "What colour am I wearing?", "Show me what you see."])
def test_the_sharp_frame_is_asked_for_by_words_that_point(words: str) -> None:
    assert asks_to_look(words)


def test_a_phrase_alone_refers_to_the_view_and_fillers_do_not_count() -> None:
    assert refers_to_view(normalize("What changed?"), normalize("what changed"))
    assert refers_to_view(normalize("OK, what changed now, please?"), normalize("what changed"))
    assert not refers_to_view(normalize("What changed in Rome?"), normalize("what changed"))
    assert not refers_to_view(normalize("What changed in Rome?"))
    assert refers_to_view(normalize("what's in my hand"))  # a pointing word, any phrase


def test_normalize_keeps_whole_words() -> None:
    assert normalize("What\u2019s THIS?!") == " whats this "
    assert " it " not in normalize("item")
