import asyncio
import logging

import pytest

from omnicall.engine.tasks import TaskOwner


async def test_named_tasks_cancelled_on_close() -> None:
    owner = TaskOwner("call-x")
    owner.spawn("sleeper", asyncio.sleep(100))
    owner.spawn("other", asyncio.sleep(100))
    assert owner.names == ["call-x/other", "call-x/sleeper"]
    await owner.close(timeout_s=1)
    assert len(owner) == 0
    with pytest.raises(RuntimeError):
        owner.spawn("late", asyncio.sleep(0))


async def test_failed_task_is_logged_and_released(caplog: pytest.LogCaptureFixture) -> None:
    owner = TaskOwner("call-y")

    async def boom() -> None:
        raise ValueError("kaput")

    with caplog.at_level(logging.ERROR):
        task = owner.spawn("boom", boom())
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)
    assert len(owner) == 0
    assert "call-y/boom failed" in caplog.text


async def test_stubborn_task_reported(caplog: pytest.LogCaptureFixture) -> None:
    owner = TaskOwner("call-z")
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                await release.wait()

    owner.spawn("stubborn", stubborn())
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR):
        await owner.close(timeout_s=0.05)
    assert "did not stop" in caplog.text
    release.set()
    await asyncio.sleep(0.01)
