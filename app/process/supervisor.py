"""``omnicall serve --workers N``: a supervisor process and N worker processes.

The supervisor binds the port once (holding it, not listening), forks the workers (each
listens on its own SO_REUSEPORT socket on that port, so the kernel spreads new connections
evenly over them), and then only watches them: a worker that dies for any reason (a crash,
``kill -9``, the kernel's OOM killer) is logged with how it died and replaced at once, with
an exponential back-off when workers die right after starting (a crash loop must not spin).
Workers report ready over a pipe; the supervisor prints the ready line when all of them are
serving. On SIGTERM/SIGINT it stops the
workers (SIGTERM, then SIGKILL after the shutdown timeout) and exits.

State for the workers' ``/health`` and ``/metrics`` (restarts, pids) is written atomically to
``status.json`` in the group's runtime directory, beside each worker's private Unix socket
(see :mod:`omnicall.app.process.worker_group`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import selectors
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

POLL_S = 0.1
QUICK_DEATH_S = 5.0  # a worker dying sooner than this after its start counts toward back-off
MAX_BACKOFF_S = 30.0
PR_SET_PDEATHSIG = 1


@dataclass
class WorkerSlot:
    index: int
    pid: int = 0
    started_s: float = 0.0
    ready: bool = False
    restarts: int = 0
    quick_deaths: int = 0
    start_after_s: float = 0.0  # back-off: not before this time
    last_exit: str = ""
    last_restart_s: float | None = None  # death -> replacement ready, seconds


@dataclass
class GroupStatus:
    """What the supervisor tells the workers (``status.json``)."""

    supervisor_pid: int
    workers: int
    restarts: int = 0
    pids: dict[int, int] = field(default_factory=dict)
    last_restart_s: float | None = None


def describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(number).name}"
        return f"killed by signal {number}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def die_with_parent() -> None:
    """Linux: this process gets SIGTERM when its parent (the supervisor) dies, even by -9."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervisor:
    """Forks ``count`` workers running ``work(index, ready_fd)`` and keeps them alive."""

    def __init__(self, count: int, work: Callable[[int, int], None], runtime_dir: Path,
                 shutdown_timeout_s: float = 5.0,
                 on_ready: Callable[[], None] | None = None) -> None:
        self.slots = [WorkerSlot(i) for i in range(count)]
        self._work = work
        self.runtime_dir = runtime_dir
        self.shutdown_timeout_s = shutdown_timeout_s
        self._on_ready = on_ready
        self._stopping = False
        self._announced = False
        self._died_at: dict[int, float] = {}
        self._ready_r, self._ready_w = os.pipe()
        os.set_blocking(self._ready_r, False)

    # -- process management ---------------------------------------------------------
    def _spawn(self, slot: WorkerSlot) -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(self._ready_r)
            code = 0
            try:
                die_with_parent()
                for sig in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)
                self._work(slot.index, self._ready_w)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # the worker's last word before _exit skips all handlers
                logger.exception("worker %d crashed", slot.index)
                code = 1
            finally:
                os._exit(code)
        slot.pid, slot.started_s, slot.ready = pid, time.monotonic(), False
        logger.info("worker %d started (pid %d)", slot.index, pid)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            slot = next((s for s in self.slots if s.pid == pid), None)
            if slot is not None:
                self.on_exit(slot, status)

    def on_exit(self, slot: WorkerSlot, status: int) -> None:
        """A worker ended (``status`` as from ``waitpid``): schedule its replacement."""
        pid = slot.pid
        slot.pid, slot.last_exit = 0, describe_exit(status)
        if self._stopping:
            return
        now = time.monotonic()
        lived_s = now - slot.started_s
        slot.quick_deaths = slot.quick_deaths + 1 if lived_s < QUICK_DEATH_S else 0
        backoff_s = 0.0 if slot.quick_deaths <= 1 else min(
            MAX_BACKOFF_S, 0.5 * 2 ** (slot.quick_deaths - 2))
        slot.start_after_s = now + backoff_s
        slot.restarts += 1
        self._died_at[slot.index] = now
        logger.error("worker %d (pid %d) %s after %.1f s; replacing it%s", slot.index, pid,
                     slot.last_exit, lived_s,
                     f" in {backoff_s:.1f} s (it keeps dying)" if backoff_s else "")

    def _read_ready(self, timeout_s: float) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._ready_r, selectors.EVENT_READ)
        try:
            if not sel.select(timeout_s):
                return
        finally:
            sel.close()
        with contextlib.suppress(BlockingIOError):
            data = os.read(self._ready_r, 4096)
            for index in data:
                slot = self.slots[index] if index < len(self.slots) else None
                if slot is None or slot.pid == 0:
                    continue
                slot.ready = True
                died = self._died_at.pop(index, None)
                if died is not None:
                    slot.last_restart_s = time.monotonic() - died
                    logger.warning("worker %d is serving again (pid %d), %.2f s after it died",
                                   index, slot.pid, slot.last_restart_s)

    def write_status(self) -> None:
        restarts = [s.last_restart_s for s in self.slots if s.last_restart_s is not None]
        status = GroupStatus(os.getpid(), len(self.slots),
                             restarts=sum(s.restarts for s in self.slots),
                             pids={s.index: s.pid for s in self.slots if s.pid and s.ready},
                             last_restart_s=restarts[-1] if restarts else None)
        tmp = self.runtime_dir / "status.json.tmp"
        tmp.write_text(json.dumps(status.__dict__))
        tmp.replace(self.runtime_dir / "status.json")

    # -- main loop --------------------------------------------------------------------
    def stop(self, *_: object) -> None:
        self._stopping = True

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.stop)
        last_status = None
        try:
            while not self._stopping:
                now = time.monotonic()
                for slot in self.slots:
                    if slot.pid == 0 and now >= slot.start_after_s:
                        self._spawn(slot)
                self._read_ready(POLL_S)
                self._reap()
                status = [(s.pid, s.ready, s.restarts) for s in self.slots]
                if status != last_status:
                    self.write_status()
                    last_status = status
                if not self._announced and all(s.ready for s in self.slots):
                    self._announced = True
                    if self._on_ready is not None:
                        self._on_ready()
        finally:
            self._stop_all()
        return 0

    def _stop_all(self) -> None:
        self._stopping = True
        alive = [s.pid for s in self.slots if s.pid]
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.shutdown_timeout_s
        while alive and time.monotonic() < deadline:
            self._reap()
            alive = [s.pid for s in self.slots if s.pid]
            time.sleep(POLL_S)
        for pid in alive:
            logger.error("worker pid %d did not stop in %.0f s; killing it", pid,
                         self.shutdown_timeout_s)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in alive:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
