"""Which model job runs next: the pure dispatch policy behind every :class:`ModelWorker`.

- Priority first: replies the user is waiting for (final ASR, LLM, TTS) before listening
  extras (partial transcripts) before background work (vision).
- Fair within a priority: sessions take turns (round-robin), so one chatty call cannot
  queue ahead of everyone else's turn.
- Starvation-free: a job that has waited ``max_wait_s`` runs before any newer job,
  whatever its priority (aging).
- Bounded: at most ``max_pending`` jobs wait; :meth:`DispatchPolicy.push` raises
  :class:`QueueFull` beyond that, and the caller sheds or reports back-pressure.

Synchronous and I/O free; time comes in as an argument, so tests drive it directly.
"""

from __future__ import annotations

import enum
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


class Priority(enum.IntEnum):
    REPLY = 0
    LISTEN = 1
    BACKGROUND = 2


class QueueFull(RuntimeError):
    """Too many jobs are waiting."""


@dataclass(frozen=True, slots=True)
class _Entry(Generic[T]):
    job: T
    session: str
    enqueued_s: float
    seq: int


class DispatchPolicy(Generic[T]):
    def __init__(self, max_pending: int = 64, max_wait_s: float = 2.0) -> None:
        self.max_pending = max_pending
        self.max_wait_s = max_wait_s
        # priority -> session -> FIFO of that session's jobs; session order = round-robin order
        self._queues: dict[Priority, OrderedDict[str, deque[_Entry[T]]]] = {
            p: OrderedDict() for p in Priority}
        self._pending = 0
        self._seq = 0
        self.aged = 0

    def __len__(self) -> int:
        return self._pending

    def push(self, job: T, session: str, priority: Priority, now_s: float) -> None:
        if self._pending >= self.max_pending:
            raise QueueFull(f"{self._pending} model jobs waiting")
        self._seq += 1
        self._queues[priority].setdefault(session, deque()).append(
            _Entry(job, session, now_s, self._seq))
        self._pending += 1

    def pop(self, now_s: float) -> T | None:
        if not self._pending:
            return None
        entry = self._oldest_overdue(now_s)
        if entry is not None:
            self.aged += 1
        else:
            entry = self._next_by_priority()
        self._pending -= 1
        return entry.job

    def _oldest_overdue(self, now_s: float) -> _Entry[T] | None:
        oldest: tuple[Priority, str] | None = None
        oldest_entry: _Entry[T] | None = None
        for priority, sessions in self._queues.items():
            for session, jobs in sessions.items():
                head = jobs[0]
                if now_s - head.enqueued_s >= self.max_wait_s and (
                        oldest_entry is None or head.seq < oldest_entry.seq):
                    oldest, oldest_entry = (priority, session), head
        if oldest is None:
            return None
        return self._take(*oldest)

    def _next_by_priority(self) -> _Entry[T]:
        for priority, sessions in self._queues.items():
            if sessions:
                session = next(iter(sessions))
                return self._take(priority, session)
        raise AssertionError("pending count out of step with the queues")

    def _take(self, priority: Priority, session: str) -> _Entry[T]:
        sessions = self._queues[priority]
        jobs = sessions.pop(session)
        entry = jobs.popleft()
        if jobs:
            sessions[session] = jobs  # back of the round-robin order
        return entry

    def drop_session(self, session: str) -> list[T]:
        """Forget a closed session's waiting jobs; returns them (oldest first within each
        priority), for their owner to tell whoever awaits them."""
        dropped: list[T] = []
        for sessions in self._queues.values():
            jobs = sessions.pop(session, None)
            if jobs:
                dropped.extend(entry.job for entry in jobs)
        self._pending -= len(dropped)
        return dropped
