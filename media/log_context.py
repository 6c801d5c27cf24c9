"""Which call a log line belongs to, said once: the call's id in a context variable that every
task and worker job of the call carries, and that each log record reads.

A call sets :data:`CALL_ID` when it is created (:func:`for_call`: the call's session, an
engine session); asyncio copies the context into every task spawned after that, and
:class:`omnicall.engine.worker.ModelWorker` runs each job in the context it was submitted
from, so a log line from a reply's task or from the model's worker thread names its call
without the id passed around or written into each message. :func:`install` makes every log
record carry it as ``record.call`` (``"[abc123] "``, or ``""`` outside a call), which the
server's log format prints before the message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

#: the call the current task (or worker job) works for; None outside a call
CALL_ID: ContextVar[str | None] = ContextVar("omnicall_call_id", default=None)

_installed = False


def for_call(call_id: str) -> None:
    """The current context (and every task spawned from it from now on) works for
    ``call_id``."""
    CALL_ID.set(call_id)


@contextmanager
def call_context(call_id: str) -> Iterator[None]:
    """Log lines in this block (and tasks spawned in it) name ``call_id``: for work on a
    call done outside its own tasks (the app's sweeper closing a parked call, shutdown)."""
    token = CALL_ID.set(call_id)
    try:
        yield
    finally:
        CALL_ID.reset(token)


def call_prefix() -> str:
    call = CALL_ID.get()
    return f"[{call}] " if call else ""


def install() -> None:
    """Every log record made from now on carries ``call`` (see the module docstring); once
    per process, whatever the number of calls."""
    global _installed
    if _installed:
        return
    base = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        record.call = call_prefix()
        return record

    logging.setLogRecordFactory(factory)
    _installed = True
