import asyncio
import threading

import pytest

from omnicall.engine.scheduler import Priority
from omnicall.engine.worker import ModelWorker, WorkerBusy, WorkerClosed
from tests.utils import wait_for


async def test_runs_off_the_event_loop_thread() -> None:
    worker = ModelWorker("t")
    loop_thread = threading.get_ident()
    ran_on = await worker.run(threading.get_ident)
    assert ran_on != loop_thread
    assert worker.completed == 1
    worker.close()


async def test_errors_reach_the_caller() -> None:
    worker = ModelWorker("t")
    with pytest.raises(ZeroDivisionError):
        await worker.run(lambda: 1 / 0)
    assert await worker.run(int, "7") == 7
    worker.close()


async def test_bounded_waiting_jobs() -> None:
    worker = ModelWorker("t", max_pending=1)
    gate = threading.Event()
    running = asyncio.ensure_future(worker.run(gate.wait, 5))
    await wait_for(lambda: worker._running == 1, timeout_s=5)  # now running on the thread
    waiting = asyncio.ensure_future(worker.run(gate.wait, 5))
    await asyncio.sleep(0.01)
    assert worker.pending == 2
    with pytest.raises(WorkerBusy):
        await worker.run(gate.wait, 5)
    gate.set()
    assert await running and await waiting
    assert worker.pending == 0
    worker.close()
    with pytest.raises(WorkerClosed):
        await worker.run(int)


async def test_priority_order_and_cancelled_jobs_are_skipped() -> None:
    worker = ModelWorker("t")
    gate = threading.Event()
    order: list[str] = []
    blocker = asyncio.ensure_future(worker.run(gate.wait, 5))
    await asyncio.sleep(0.05)
    vision = asyncio.ensure_future(worker.run(order.append, "vision", session="a",
                                              priority=Priority.BACKGROUND))
    gone = asyncio.ensure_future(worker.run(order.append, "gone", session="b"))
    reply = asyncio.ensure_future(worker.run(order.append, "reply", session="c"))
    await asyncio.sleep(0.01)
    gone.cancel()
    gate.set()
    await asyncio.gather(blocker, vision, reply)
    assert order == ["reply", "vision"] and worker.skipped == 1
    worker.close()


async def test_close_cancels_waiting_jobs() -> None:
    worker = ModelWorker("t")
    gate = threading.Event()
    running = asyncio.ensure_future(worker.run(gate.wait, 5))
    await wait_for(lambda: worker._running == 1, timeout_s=5)  # taken by the thread
    waiting = asyncio.ensure_future(worker.run(int, "1"))
    await asyncio.sleep(0.01)
    worker.close()
    gate.set()
    assert await running
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_dropped_session_s_waiting_jobs_are_cancelled() -> None:
    """Its callers end (a reply's generation awaited by a task the session did not own was
    left pending for good: 'Task was destroyed but it is pending' at exit); the running job
    and other sessions' jobs go on."""
    worker = ModelWorker("t")
    gate = threading.Event()
    running = asyncio.ensure_future(worker.run(gate.wait, 5, session="gone"))
    await wait_for(lambda: worker._running == 1, timeout_s=5)  # taken by the thread
    dropped = asyncio.ensure_future(worker.run(int, "1", session="gone"))
    kept = asyncio.ensure_future(worker.run(int, "2", session="stays"))
    await asyncio.sleep(0.01)
    assert worker.drop_session("gone") == 1
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(dropped, timeout=5)
    gate.set()
    assert await running and await kept == 2
    worker.close()
