"""Typed messages and interrupts: one path for a call's page and a Realtime client."""

from __future__ import annotations

from typing import Any

import pytest

from omnicall.app.turns.user_controls import (
    MAX_TYPED_CHARS,
    MAX_WAITING_TEXTS,
    UserControls,
    typed_text,
)
from omnicall.engine.base import EngineSession, UnsupportedControl
from omnicall.media.aligner import MediaUnit


class Recorder(EngineSession):
    """Records what reaches the engine; ``typed=False``: it takes no typed messages."""

    def __init__(self, typed: bool = True, log: list[str] | None = None,
                 manual: bool = True) -> None:
        self.session_id = "s"
        self.typed = typed
        self.manual = manual  # it has manual turns (push-to-talk)
        self.log = log if log is not None else []
        self.sent: list[str] = []
        self.history: list[tuple[str, str]] = []

    def send_text(self, text: str) -> None:
        if not self.typed:
            super().send_text(text)
        self.sent.append(text)

    def add_message(self, role: Any, text: str) -> None:
        self.history.append((role, text))

    def set_turn_detection(self, automatic: bool) -> None:
        if not self.manual:
            super().set_turn_detection(automatic)
        self.log.append(f"auto={automatic}")

    def commit_input(self) -> None:
        self.log.append("commit")

    def respond(self) -> None:
        self.log.append("respond")

    def push(self, unit: MediaUnit) -> bool:
        return True

    def interrupt(self) -> None:
        self.log.append("engine")

    def events(self) -> Any:
        raise NotImplementedError

    async def close(self) -> None:
        return None


@pytest.mark.parametrize(("text", "expected"), [
    ("  hello  ", "hello"), ("", None), ("   \n", None), (None, None), (42, None),
    (["hi"], None), ("x" * (MAX_TYPED_CHARS + 50), "x" * MAX_TYPED_CHARS)])
def test_typed_text(text: object, expected: str | None) -> None:
    assert typed_text(text) == expected


def test_interrupt_is_the_engines_then_the_queued_sound_and_counts() -> None:
    log: list[str] = []
    # the engine's cut reads what was heard of its live reply, then stops its sound handle;
    # what is still queued of replies it already ended goes after
    controls = UserControls(Recorder(log=log), flush_sound=lambda: log.append("audio"))
    controls.interrupt()
    controls.interrupt()
    assert log == ["engine", "audio", "engine", "audio"] and controls.interrupts == 2
    bare = UserControls(Recorder(log=log))  # a Realtime connection: no queued sound here
    bare.interrupt()
    assert log[-1] == "engine" and bare.interrupts == 1


def test_send_text_cleans_and_says_when_nothing_was_sent() -> None:
    engine = Recorder()
    controls = UserControls(engine)
    assert controls.send_text("  what time is it? ")
    assert not controls.send_text("   ") and not controls.send_text({"text": "x"})
    assert engine.sent == ["what time is it?"] and controls.typed_sent == 1
    with pytest.raises(UnsupportedControl):
        UserControls(Recorder(typed=False)).send_text("hi")


def test_waiting_items_are_answered_as_one_message() -> None:
    engine = Recorder()
    controls = UserControls(engine)
    assert not controls.answer()
    controls.hold("What is")
    controls.hold("the capital of France?")
    assert controls.waiting == 2 and controls.answer()
    assert engine.sent == ["What is the capital of France?"] and controls.waiting == 0


def test_waiting_items_stay_when_the_engine_refuses_typed_text() -> None:
    controls = UserControls(Recorder(typed=False))
    controls.hold("hi")
    with pytest.raises(UnsupportedControl):
        controls.answer()
    assert controls.waiting == 1


def test_waiting_items_become_history_and_are_bounded() -> None:
    engine = Recorder()
    controls = UserControls(engine)
    for n in range(MAX_WAITING_TEXTS + 2):
        controls.hold(f"t{n}")
    assert controls.waiting == MAX_WAITING_TEXTS
    assert engine.history == [("user", "t0"), ("user", "t1")]  # the oldest, at once
    controls.to_history()
    assert controls.waiting == 0 and len(engine.history) == MAX_WAITING_TEXTS + 2
    assert engine.history[-1] == ("user", f"t{MAX_WAITING_TEXTS + 1}") and not engine.sent


def test_hold_to_talk_makes_the_held_audio_the_turn_and_answers_it_at_the_release() -> None:
    engine = Recorder()
    controls = UserControls(engine, flush_sound=lambda: engine.log.append("audio"))
    controls.hold_to_talk(True)
    controls.hold_to_talk(True)  # held again (a second key-down): nothing more
    assert engine.log == ["auto=False", "engine", "audio"] and controls.holding
    controls.hold_to_talk(False)
    controls.hold_to_talk(False)  # released twice: answered once
    assert engine.log[3:] == ["commit", "respond", "auto=True"]
    assert not controls.holding and controls.held_turns == 1 and controls.interrupts == 1


def test_hold_to_talk_where_the_engine_cannot_changes_nothing() -> None:
    engine = Recorder(manual=False)
    controls = UserControls(engine)
    with pytest.raises(UnsupportedControl):
        controls.hold_to_talk(True)
    assert not controls.holding and engine.log == [] and controls.interrupts == 0
