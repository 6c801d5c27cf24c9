"""The base of queue-driven engine sessions: units in order, and the audio of a unit still
being formed heard ahead of it only by a session that uses it and is not behind."""

from __future__ import annotations

import asyncio

import numpy as np

from omnicall.engine.base import SessionOptions
from omnicall.engine.queued_session import AudioAhead, QueuedEngineSession
from omnicall.media.aligner import MediaUnit
from tests.utils import wait_for


class Recording(QueuedEngineSession):
    """Takes units as they come, each item noted in order; hears ahead when told to."""

    def __init__(self, hears: bool) -> None:
        self.hears = hears
        self.seen: list[tuple[str, int, int]] = []  # (what, unit index, offset)
        self.go = asyncio.Event()
        super().__init__("s", SessionOptions(input_queue_frames=4))

    @property
    def hears_ahead(self) -> bool:
        return self.hears

    async def hear_ahead(self, ahead: AudioAhead) -> None:
        self.seen.append(("ahead", ahead.index, ahead.offset))

    async def process(self) -> None:
        while True:
            await self.go.wait()
            unit = await self.next_unit()
            self.seen.append(("unit", unit.index, 0))

    def interrupt(self) -> None:
        self.flush_queues()


def unit(index: int) -> MediaUnit:
    return MediaUnit(index, np.zeros(1280, np.int16))


async def test_audio_ahead_comes_before_its_unit_only_into_an_empty_queue() -> None:
    session = Recording(hears=True)
    session.go.set()
    try:
        session.listen_ahead(0, 0, np.zeros(320, np.int16))
        session.listen_ahead(0, 320, np.zeros(320, np.int16))  # queued behind the first
        assert session.push(unit(0))
        await wait_for(lambda: len(session.seen) == 2)
        assert session.seen == [("ahead", 0, 0), ("unit", 0, 0)]  # the second was dropped
        session.go.clear()
        await asyncio.sleep(0.01)  # the loop waits with nothing taken
        assert session.push(unit(1)) and session.push(unit(2))
        session.listen_ahead(3, 0, np.zeros(320, np.int16))  # behind: of no use, dropped
        session.go.set()
        await wait_for(lambda: len(session.seen) == 4)
        assert session.seen[2:] == [("unit", 1, 0), ("unit", 2, 0)]
        # a unit taken at once (a client's commit) drops the audio queued ahead of it
        session.go.clear()
        await asyncio.sleep(0.01)
        session.listen_ahead(3, 0, np.zeros(320, np.int16))
        assert session.push(unit(3))
        taken = session.next_unit_now()
        assert taken is not None and taken.index == 3 and session.next_unit_now() is None
    finally:
        await session.close()


async def test_a_session_that_does_not_hear_ahead_queues_none_of_it() -> None:
    session = Recording(hears=False)
    try:
        session.listen_ahead(0, 0, np.zeros(320, np.int16))
        assert session.state.inputs.empty()
        assert session.push(unit(0))
        session.go.set()
        await wait_for(lambda: session.seen == [("unit", 0, 0)])
    finally:
        await session.close()
