"""Model work off the event loop: named worker threads fed by a bounded priority queue.

The event loop only submits jobs and awaits their futures. Which job runs next is decided
by :class:`omnicall.engine.scheduler.DispatchPolicy` (priority, per-session round-robin, aging);
when ``max_pending`` jobs already wait, :meth:`ModelWorker.run` raises :class:`WorkerBusy`
at once (the caller sheds optional work or reports back-pressure) instead of letting a queue
grow. A job whose caller was cancelled before it started is skipped.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from omnicall.engine.scheduler import DispatchPolicy, Priority, QueueFull

T = TypeVar("T")


class WorkerBusy(RuntimeError):
    """The worker's queue is full."""


class WorkerClosed(RuntimeError):
    """The worker was shut down."""


_Job = tuple[contextvars.Context, Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]",
             asyncio.AbstractEventLoop]


def _cancel(jobs: list[_Job]) -> None:
    """Cancel the futures of jobs that will not run (on their loops' threads)."""
    for _, _, _, fut, loop in jobs:
        if not loop.is_closed():
            loop.call_soon_threadsafe(fut.cancel)


def _resolve(fut: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


class ModelWorker:
    def __init__(self, name: str, max_pending: int = 64, threads: int = 1,
                 max_wait_s: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.max_pending = max_pending
        self._policy: DispatchPolicy[_Job] = DispatchPolicy(max_pending, max_wait_s)
        self._clock = clock
        self._cond = threading.Condition()
        self._running = 0
        self._closed = False
        self.completed = 0
        self.skipped = 0
        self._threads = [threading.Thread(target=self._loop, name=f"omnicall-{name}-{i}",
                                          daemon=True) for i in range(threads)]
        for thread in self._threads:
            thread.start()

    @property
    def pending(self) -> int:
        """Jobs waiting or running."""
        return len(self._policy) + self._running

    async def run(self, fn: Callable[..., T], *args: Any, session: str = "",
                  priority: Priority = Priority.REPLY) -> T:
        """Run ``fn(*args)`` on a worker thread and await its result."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        with self._cond:
            if self._closed:
                raise WorkerClosed(self.name)
            try:
                # the job runs in the caller's context: its log lines name the caller's call
                self._policy.push((contextvars.copy_context(), fn, args, fut, loop), session,
                                  priority, self._clock())
            except QueueFull as exc:
                raise WorkerBusy(f"{self.name}: {exc}") from exc
            self._cond.notify()
        return await fut

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not len(self._policy):
                    self._cond.wait()
                if self._closed:
                    return
                job = self._policy.pop(self._clock())
                assert job is not None
                self._running += 1
            context, fn, args, fut, loop = job
            skipped = fut.cancelled()  # the caller gave up before it started
            result: Any = None
            error: BaseException | None = None
            if not skipped:
                try:
                    result = context.run(fn, *args)
                except Exception as exc:  # noqa: BLE001 - delivered to the awaiting caller
                    error = exc
            with self._cond:  # done before the caller wakes, so ``pending`` is exact for it
                self._running -= 1
                if skipped:
                    self.skipped += 1
                else:
                    self.completed += 1
            if not skipped and not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, fut, result, error)

    def drop_session(self, session: str) -> int:
        """Forget a closed session's waiting jobs; returns how many. Their futures are
        cancelled, so a caller still awaiting one (a task the session did not own) ends
        instead of waiting forever."""
        with self._cond:
            dropped = self._policy.drop_session(session)
        _cancel(dropped)
        return len(dropped)

    def close(self) -> None:
        """Stop the threads after their current job; waiting jobs are cancelled."""
        with self._cond:
            self._closed = True
            waiting: list[_Job] = []
            while (job := self._policy.pop(float("inf"))) is not None:
                waiting.append(job)
            self._cond.notify_all()
        _cancel(waiting)
