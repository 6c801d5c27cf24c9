"""The offline look done while the caller speaks (real face detector and text reader on the
eyes worker, drawn scenes): the end of the turn takes it without waiting when the scene is the
same, looks again when the view changed, reads the text only when asked, and says when the
turn waited."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import numpy as np
import pytest

from omnicall.engine.cascade.camera.faces import FaceFacts
from omnicall.engine.cascade.camera.look_ahead import LOOK_EVERY_S, LookAhead
from omnicall.engine.cascade.camera.looker import Looker
from omnicall.engine.cascade.camera.scene_change import same_scene
from omnicall.engine.cascade.camera.sight import Sight
from omnicall.engine.cascade.camera.text_reader import TextReader
from omnicall.engine.conversation.frame_policy import grey_thumb
from omnicall.engine.tasks import TaskOwner
from tests.scenes import OBJECT_COLOURS, WALLS, hold_label, hold_object, wall

LABEL = ("Gate B12",)


@pytest.fixture(scope="module")
def reader() -> TextReader:
    return TextReader()


@pytest.fixture
async def ahead(reader: TextReader) -> AsyncIterator[tuple[LookAhead, list[Sight]]]:
    looker = Looker(FaceFacts(), reader, look_timeout_s=30.0, read_timeout_s=30.0)
    tasks = TaskOwner("test")
    seen: list[Sight] = []
    yield LookAhead(looker, "s", tasks, seen.append), seen
    await tasks.close()
    looker.close()


def shaken(image: np.ndarray, dx: int, gain: float) -> np.ndarray:
    """The same scene through a hand-held camera: moved a few pixels, brighter."""
    moved = np.roll(image, dx, axis=1)
    return np.clip(moved.astype(np.float32) * gain, 0, 255).astype(np.uint8)


def test_a_shaken_brighter_view_is_the_same_scene_a_raised_object_is_not() -> None:
    room = hold_label(wall(WALLS["grey"], 4), ("EXIT",), 4)
    assert same_scene(grey_thumb(room), grey_thumb(shaken(room, 3, 1.1)))
    assert same_scene(grey_thumb(room), grey_thumb(shaken(room, -2, 0.92)))
    held = hold_object(room, OBJECT_COLOURS["red"], 5)
    assert not same_scene(grey_thumb(room), grey_thumb(held))
    elsewhere = hold_label(wall(WALLS["blue"], 6), ("EXIT",), 6)  # the camera turned
    assert not same_scene(grey_thumb(room), grey_thumb(elsewhere))
    dark = (room * 0.03).astype(np.uint8)  # covered
    assert not same_scene(grey_thumb(room), grey_thumb(dark))


async def until_looked(ahead: LookAhead, looks: int) -> None:
    for _ in range(3000):
        if ahead.looks >= looks:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {looks} looks ahead")


async def test_the_turn_takes_the_look_done_while_speaking_without_waiting(
        ahead: tuple[LookAhead, list[Sight]]) -> None:
    looks, seen = ahead
    room = hold_object(wall(WALLS["white"], 2), OBJECT_COLOURS["blue"], 2)
    looks.offer(room, 0.0, None, speaking=True)
    await until_looked(looks, 1)
    assert len(seen) == 1 and seen[0].of("colour", 0.5)
    looks.offer(shaken(room, 2, 1.05), 0.5, None, speaking=True)  # within LOOK_EVERY_S
    looks.offer(shaken(room, 2, 1.05), LOOK_EVERY_S + 0.1, None, speaking=True)  # same scene
    await asyncio.sleep(0.05)
    assert looks.looks == 1
    sight, waited = await looks.for_turn(shaken(room, -3, 0.95), 2.0, None, read=False)
    assert sight is not None and sight.glance is seen[0].glance and not waited
    assert sight.facts == seen[0].facts and looks.waits == 0


async def test_a_view_changed_at_the_end_is_looked_at_again_and_the_turn_waits(
        ahead: tuple[LookAhead, list[Sight]]) -> None:
    looks, seen = ahead
    room = wall(WALLS["grey"], 3)
    looks.offer(room, 0.0, None, speaking=True)
    await until_looked(looks, 1)
    first = seen[0]
    held = hold_object(room, OBJECT_COLOURS["red"], 3)
    sight, waited = await looks.for_turn(held, 1.5, first.glance, read=False)
    assert waited and sight is not None and sight is not first
    assert sight.of("change", 0.5) and "red" in " ".join(f.text for f in sight.of("colour", 0.5))


async def test_text_is_read_ahead_when_the_words_so_far_ask_and_at_the_end_otherwise(
        ahead: tuple[LookAhead, list[Sight]]) -> None:
    looks, seen = ahead
    label = hold_label(wall(WALLS["grey"], 4), LABEL, 4)
    looks.offer(label, 0.0, None, speaking=True)  # the words so far do not ask to read
    await until_looked(looks, 1)
    assert not seen[0].read_asked
    looks.offer(label, LOOK_EVERY_S, None, speaking=True, read=True)  # now they do: read
    await until_looked(looks, 2)
    assert [line.text for line in seen[1].lines] == list(LABEL)
    sight, waited = await looks.for_turn(label, 2.0, None, read=True)
    assert sight is not None and sight.lines == seen[1].lines and not waited
    other = hold_label(wall(WALLS["blue"], 5), LABEL, 5)  # the camera turned: a new look
    sight, waited = await looks.for_turn(other, 3.0, None, read=True)
    assert waited and sight is not None and [line.text for line in sight.lines] == list(LABEL)


async def test_a_turn_that_ends_while_its_look_is_still_under_way_says_it_waited(
        ahead: tuple[LookAhead, list[Sight]]) -> None:
    """The look ahead of the same scene is the turn's, but the turn waits for its end: that
    is a wait (the reply's look stage timings show it), not a look done ahead."""
    looks, seen = ahead
    room = hold_object(wall(WALLS["white"], 2), OBJECT_COLOURS["blue"], 2)
    looks.offer(room, 0.0, None, speaking=True)  # started, not done
    sight, waited = await looks.for_turn(shaken(room, 2, 1.05), 0.3, None, read=False)
    assert waited and looks.waits == 1 and looks.looks == 1
    assert sight is not None and sight.facts == seen[0].facts


async def test_a_look_is_optional_work_never_queued_behind_another(
        ahead: tuple[LookAhead, list[Sight]]) -> None:
    looks, _ = ahead
    release = threading.Event()
    job = asyncio.ensure_future(looks.looker.worker.run(release.wait, 30.0))
    for _ in range(1000):  # until the worker holds the job
        if looks.looker.worker.pending:
            break
        await asyncio.sleep(0)
    looks.offer(wall(WALLS["blue"], 1), 0.0, None, speaking=True)  # busy: none queued
    assert looks.looker.worker.pending == 1
    release.set()
    await job
    await asyncio.sleep(0.05)
    assert looks.looks == 0


async def test_a_look_between_turns_serves_the_next_turn_compared_with_its_reference(
        ahead: tuple[LookAhead, list[Sight]]) -> None:
    """A Realtime client's quiet frame is looked at as it comes; the next turn takes that
    look, what changed measured against the call's reference at that moment; a look too old
    is done again."""
    from omnicall.engine.cascade.camera.look_ahead import QUIET_EVERY_S, STANDS_S

    looks, seen = ahead
    before = await looks.looker.look(wall(WALLS["grey"], 3), None, read=False)
    assert before is not None
    held = hold_object(wall(WALLS["grey"], 3), OBJECT_COLOURS["red"], 3)
    looks.offer(held, 10.0, before.glance, speaking=False)
    looks.offer(held, 10.0 + QUIET_EVERY_S / 2, before.glance, speaking=False)  # not yet due
    await until_looked(looks, 1)
    assert seen[0].of("change", 0.5)  # told against the reference of the moment
    sight, waited = await looks.for_turn(shaken(held, 2, 1.0), 14.0, before.glance, read=False)
    assert not waited and sight is not None and sight.of("change", 0.5)
    same, waited = await looks.for_turn(held, 14.5, sight.glance, read=False)  # a new reference
    assert not waited and same is not None and not same.of("change", 0.5) and same.compared
    _, waited = await looks.for_turn(held, 10.0 + STANDS_S + 1, sight.glance, read=False)
    assert waited and looks.looks == 2
