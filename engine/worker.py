"""Model work off the event loop: a named worker thread fed by a bounded queue.

The event loop only submits jobs and awaits their futures. ``max_pending`` bounds how many
jobs may wait; beyond that ``submit`` raises :class:`WorkerBusy` at once (the caller decides:
drop optional work, or report back-pressure) instead of letting a queue grow.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WorkerBusy(RuntimeError):
    """The worker's queue is full."""


class WorkerClosed(RuntimeError):
    """The worker was shut down."""


class ModelWorker:
    def __init__(self, name: str, max_pending: int = 64, threads: int = 1) -> None:
        self.name = name
        self.max_pending = max_pending
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix=f"omnicall-{name}")
        self._pending = 0
        self._lock = threading.Lock()
        self._closed = False
        self.completed = 0

    @property
    def pending(self) -> int:
        return self._pending

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn(*args)`` on the worker thread and await its result."""
        if self._closed:
            raise WorkerClosed(self.name)
        with self._lock:
            if self._pending >= self.max_pending:
                raise WorkerBusy(f"{self.name}: {self._pending} jobs pending")
            self._pending += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, fn, *args)
        finally:
            with self._lock:
                self._pending -= 1
                self.completed += 1

    def close(self) -> None:
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)
