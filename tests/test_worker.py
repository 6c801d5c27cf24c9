import asyncio
import threading

import pytest

from engine.worker import ModelWorker, WorkerBusy, WorkerClosed


async def test_runs_off_the_event_loop_thread() -> None:
    worker = ModelWorker("t")
    loop_thread = threading.get_ident()
    ran_on = await worker.run(threading.get_ident)
    assert ran_on != loop_thread
    assert worker.completed == 1
    worker.close()


async def test_bounded_pending_jobs() -> None:
    worker = ModelWorker("t", max_pending=2)
    gate = threading.Event()
    jobs = [asyncio.ensure_future(worker.run(gate.wait, 5)) for _ in range(2)]
    await asyncio.sleep(0.01)
    with pytest.raises(WorkerBusy):
        await worker.run(gate.wait, 5)
    gate.set()
    assert all(await asyncio.gather(*jobs))
    assert worker.pending == 0
    worker.close()
    with pytest.raises(WorkerClosed):
        await worker.run(int)
