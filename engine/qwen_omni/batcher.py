"""Cross-call batching of decode steps for the native engine.

Every call with a reply in progress asks for its next decode step here; the batcher gathers
the calls that are waiting at that moment (up to ``max_batch``) and runs their steps as one
job on the model worker with :func:`step_many` - the code predictor's 15 sequential forwards
per frame run once for all of them. Fair by construction: each waiting call advances the
same number of steps per job. A job stops stepping a call once that call has new audio, so
its audio reaches egress at once.
"""

from __future__ import annotations

import asyncio
import logging

from omnicall.engine.qwen_omni.reply import ReplyStream, StepOutput, step_many
from omnicall.engine.scheduler import Priority
from omnicall.engine.tasks import TaskOwner
from omnicall.engine.worker import ModelWorker

logger = logging.getLogger(__name__)

Waiter = tuple[ReplyStream, "asyncio.Future[list[StepOutput]]"]


def run_steps(streams: list[ReplyStream], steps: int) -> list[list[StepOutput]]:
    """Up to ``steps`` batched steps; a stream leaves the batch when done or on new audio."""
    results: list[list[StepOutput]] = [[] for _ in streams]
    active = list(range(len(streams)))
    for _ in range(steps):
        active = [i for i in active if not streams[i].done]
        if not active:
            break
        outs = step_many([streams[i] for i in active])
        for i, out in zip(active, outs, strict=True):
            results[i].append(out)
        active = [i for i, out in zip(active, outs, strict=True) if out.audio is None]
    return results


class DecodeBatcher:
    def __init__(self, worker: ModelWorker, max_batch: int = 8, steps_per_job: int = 4) -> None:
        self.worker = worker
        self.max_batch = max_batch
        self.steps_per_job = steps_per_job
        self.tasks = TaskOwner("decode-batcher")
        self._waiting: list[Waiter] = []
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.jobs = 0
        self.batched_calls = 0  # sum of batch sizes (mean batch = batched_calls / jobs)

    async def step(self, stream: ReplyStream) -> list[StepOutput]:
        """The next few decode steps of ``stream`` (batched with other calls')."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # first use, or an engine reused under a new loop (tests)
            self._loop = loop
            self.tasks = TaskOwner("decode-batcher")
            self._waiting, self._wake = [], asyncio.Event()
        if not self.tasks.names:
            self.tasks.spawn("loop", self._run())
        future: asyncio.Future[list[StepOutput]] = asyncio.get_running_loop().create_future()
        self._waiting.append((stream, future))
        self._wake.set()
        return await future

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(0)  # calls woken in this loop turn join the same batch
            batch = [w for w in self._waiting[:self.max_batch] if not w[1].done()]
            self._waiting = self._waiting[self.max_batch:]
            if self._waiting:
                self._wake.set()
            if not batch:
                continue
            self.jobs += 1
            self.batched_calls += len(batch)
            try:
                results = await self.worker.run(run_steps, [s for s, _ in batch],
                                                self.steps_per_job, priority=Priority.REPLY)
            except (RuntimeError, ValueError, IndexError, TypeError) as exc:  # to every call
                logger.warning("batched decode step failed: %s", exc)
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)

    async def close(self) -> None:
        await self.tasks.close()
        for _, future in self._waiting:
            future.cancel()
        self._waiting.clear()
