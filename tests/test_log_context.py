"""A call's log lines name it once: from its tasks, from its model jobs on worker threads,
and from the app's work on it; nothing names a call outside one."""

from __future__ import annotations

import asyncio
import logging

import pytest

from omnicall.engine.worker import ModelWorker
from omnicall.media import log_context

logger = logging.getLogger("omnicall.test_log_context")


def said(caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    return {r.getMessage(): r.call for r in caplog.records  # type: ignore[attr-defined]
            if r.name == logger.name}


async def test_a_calls_tasks_and_worker_jobs_log_under_its_id(
        caplog: pytest.LogCaptureFixture) -> None:
    log_context.CALL_ID.set(None)  # this test's own context: outside any call
    log_context.install()
    log_context.install()  # once per process, however often it is asked
    caplog.set_level(logging.INFO, logger=logger.name)
    worker = ModelWorker("test-log")

    async def call(call_id: str) -> None:
        log_context.for_call(call_id)
        logger.info("%s: in the call", call_id)
        await asyncio.create_task(spawned(call_id))
        await worker.run(lambda: logger.info("%s: on the worker", call_id))

    async def spawned(call_id: str) -> None:
        await asyncio.sleep(0)
        logger.info("%s: in a task it spawned", call_id)

    try:
        await asyncio.gather(call("a1"), call("b2"))
        logger.info("outside")
        with log_context.call_context("c3"):
            logger.info("c3: closed by the app")
        logger.info("outside again")
    finally:
        worker.close()
    lines = said(caplog)
    for call_id in ("a1", "b2"):
        for where in ("in the call", "in a task it spawned", "on the worker"):
            assert lines[f"{call_id}: {where}"] == f"[{call_id}] ", (call_id, where)
    assert lines["c3: closed by the app"] == "[c3] "
    assert lines["outside"] == "" and lines["outside again"] == ""
