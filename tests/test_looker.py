"""The look off the event loop: real models on the eyes worker, the text read only when
asked, a read held past its bound or refused by a full worker leaves the turn without text
(the worker is held by a job the test controls, so no verdict depends on speed)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from omnicall.engine.cascade.camera.faces import FaceFacts
from omnicall.engine.cascade.camera.looker import MAX_PENDING, Looker
from omnicall.engine.cascade.camera.text_reader import TextReader
from tests.scenes import WALLS, hold_label, wall

LABEL = ("Gate B12",)


@pytest.fixture(scope="module")
def reader() -> TextReader:
    return TextReader()


@pytest.fixture
def looker(reader: TextReader) -> Iterator[Looker]:
    eyes = Looker(FaceFacts(), reader, look_timeout_s=30.0, read_timeout_s=30.0)
    yield eyes
    eyes.close()


async def test_a_look_reads_only_when_asked_and_compares_with_the_last(
        looker: Looker) -> None:
    scene = hold_label(wall(WALLS["grey"], 4), LABEL, 4)
    first = await looker.look(wall(WALLS["grey"], 3), None, read=False)
    assert first is not None and not first.compared and first.lines == ()
    unread = await looker.look(scene, first.glance, read=False)
    assert unread is not None and unread.lines == () and not unread.read_asked
    assert unread.compared and unread.of("change", 0.5)  # the label came into the middle
    read = await looker.look(scene, first.glance, read=True)
    assert read is not None and [line.text for line in read.lines] == list(LABEL)
    assert read.of("text", 0.5)[0].text == 'text reads "Gate B12"'


async def until_pending(eyes: Looker, jobs: int) -> None:
    """Until the eyes worker holds ``jobs`` (queued from this loop: a few loop turns)."""
    for _ in range(1000):
        if eyes.worker.pending >= jobs:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"the worker never held {jobs} jobs")


async def test_a_read_past_its_bound_is_dropped_and_the_turn_goes_on(
        reader: TextReader) -> None:
    eyes = Looker(FaceFacts(), reader, look_timeout_s=30.0, read_timeout_s=0.05)
    release = threading.Event()
    try:
        look = asyncio.ensure_future(eyes.look(hold_label(wall(WALLS["grey"], 4), LABEL, 4),
                                               None, read=True))
        await until_pending(eyes, 1)  # the quick facts are queued: hold the worker after them
        held = asyncio.ensure_future(eyes.worker.run(release.wait))
        sight = await look  # the read waited behind the held job past its bound
        assert sight is not None and sight.of("colour", 0.5)
        assert sight.read_asked and sight.unread == "slow" and sight.lines == ()
        assert eyes.reads_late == 1
    finally:
        release.set()
    await held
    eyes.close()


async def test_a_full_worker_or_a_late_look_leaves_the_turn_without_facts(
        reader: TextReader) -> None:
    eyes = Looker(FaceFacts(), reader, look_timeout_s=0.05, read_timeout_s=30.0)
    release = threading.Event()
    try:
        held = [asyncio.ensure_future(eyes.worker.run(release.wait))]
        await until_pending(eyes, 1)
        assert await eyes.look(wall(WALLS["grey"], 3), None, read=False) is None  # late
        held += [asyncio.ensure_future(eyes.worker.run(release.wait))
                 for _ in range(MAX_PENDING - 1)]
        await until_pending(eyes, MAX_PENDING)
        assert await eyes.look(wall(WALLS["grey"], 3), None, read=False) is None  # full
    finally:
        release.set()
    await asyncio.gather(*held)
    eyes.look_timeout_s = 30.0  # free again: a look comes back (a bound no machine misses)
    assert await eyes.look(wall(WALLS["grey"], 3), None, read=False) is not None
    eyes.close()
