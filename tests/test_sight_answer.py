"""Honest answers to camera questions: which questions are about the camera, and the
replies made from the facts of real looks at drawn pictures (a label read by the real OCR
model, a held object, people)."""

from __future__ import annotations

import numpy as np
import pytest

from omnicall.engine.cascade.camera.faces import FaceFacts
from omnicall.engine.cascade.camera.sight import Sight, look_at, text_facts
from omnicall.engine.cascade.camera.sight_answer import answer, question_kind
from omnicall.engine.cascade.camera.text_reader import TextReader
from tests.scenes import OBJECT_COLOURS, WALLS, add_person, hold_label, hold_object, wall


def sight_of(image: np.ndarray, read: bool = False, previous: Sight | None = None) -> Sight:
    from omnicall.engine.cascade.camera.scene_change import changes

    facts, glance = look_at(image, FaceFacts().faces(image))
    facts = (*facts, *changes(previous.glance if previous else None, glance))
    lines = TextReader().read(image) if read else ()
    return Sight((*facts, *text_facts(lines)), glance, lines, read_asked=read,
                 compared=previous is not None)


@pytest.mark.parametrize(("words", "kind"), [
    ("Can you read this?", "read"), ("What does this say?", "read"),
    ("What's written on it?", "read"), ("What is this say?", "read"),
    ("What breed is this dog?", "unseeable"),
    ("Who is that?", "unseeable"), ("What brand is it?", "unseeable"),
    ("What colour is this?", "colour"), ("What color is my shirt?", "colour"),
    ("Is anyone behind me?", "people"), ("How many people can you see?", "people"),
    ("What changed?", "change"), ("What do you see?", "describe"),
    ("What am I holding?", "object"), ("What is this?", "object"),
    ("What kind of music do you like?", None), ("Tell me a joke.", None),
    ("How old is the universe?", None),
])
def test_camera_questions_are_told_from_other_words(words: str, kind: str | None) -> None:
    assert question_kind(words) == kind


def test_other_languages_are_left_to_the_model() -> None:
    assert question_kind("What colour is this?", "de") is None


def test_read_this_quotes_the_text_read() -> None:
    sight = sight_of(hold_label(wall(WALLS["grey"], 5), ("ORGANIC MILK", "Best before 12/05"),
                                5), read=True)
    assert answer("Can you read this?", sight, 0.5) == \
        'It says "ORGANIC MILK / Best before 12/05".'


def test_no_text_or_text_not_read_in_time_is_said_plainly() -> None:
    plain = sight_of(wall(WALLS["white"], 1), read=True)
    assert "can't make out any text" in str(answer("What does it say?", plain, 0.5))
    late = Sight(plain.facts, plain.glance, read_asked=True, unread="slow")
    assert "couldn't read it in time" in str(answer("What does it say?", late, 0.5))


def test_a_breed_is_not_guessed() -> None:
    sight = sight_of(hold_object(wall(WALLS["grey"], 2), OBJECT_COLOURS["brown"], 2))
    reply = str(answer("What breed is this dog?", sight, 0.5))
    assert reply.startswith("I can't tell that from here.")
    assert "it's mostly brown" in reply


def test_a_colour_question_gets_the_held_objects_colour() -> None:
    sight = sight_of(hold_object(wall(WALLS["white"], 2), OBJECT_COLOURS["blue"], 2))
    assert answer("What colour is this?", sight, 0.5) == "It looks mostly blue."
    assert answer("What colour is the wall?", sight, 0.5) == \
        "The whole picture is mostly white."
    assert answer("What colour is this?", sight, 1.01) == "I can't tell the colour for sure."


def test_people_and_what_changed() -> None:
    empty = sight_of(wall(WALLS["grey"], 1))
    assert "first look" in str(answer("What changed?", empty, 0.5))
    two = sight_of(add_person(add_person(wall(WALLS["grey"], 3), 10, 190), 260, 180),
                   previous=empty)
    reply = str(answer("Is anyone behind me?", two, 0.5))
    assert reply.startswith("2 people are facing the camera") and "turned towards" in reply
    assert "2 more people" in str(answer("What changed?", two, 0.5))


def test_a_dark_camera_and_no_look_are_said() -> None:
    dark = sight_of(np.full((336, 448, 3), 2, np.uint8))
    assert "dark" in str(answer("What is this?", dark, 0.5))
    assert "couldn't look" in str(answer("What is this?", None, 0.5))
    assert answer("Tell me a joke.", dark, 0.5) is None


def test_what_do_you_see_lists_the_facts_and_the_limit() -> None:
    sight = sight_of(hold_object(wall(WALLS["grey"], 2), OBJECT_COLOURS["red"], 2))
    reply = str(answer("What do you see?", sight, 0.5))
    assert "The thing in the middle is mostly red." in reply
    assert reply.endswith("I can't recognise objects offline.")
