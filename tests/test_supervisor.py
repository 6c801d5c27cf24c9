"""The worker supervisor: replaces a worker that dies, backs off from a crash loop, stops
every worker with it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from omnicall.app.process.supervisor import Supervisor, WorkerSlot, describe_exit

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from omnicall.app.process.supervisor import Supervisor

    def work(index, ready_fd):
        os.write(ready_fd, bytes([index]))
        while True:
            time.sleep(1)

    sup = Supervisor(2, work, Path(sys.argv[1]), shutdown_timeout_s=2,
                     on_ready=lambda: print("ready", flush=True))
    raise SystemExit(sup.run())
""")


def read_status(folder: Path) -> dict[str, object]:
    try:
        data = json.loads((folder / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def wait_status(folder: Path, predicate: object, timeout_s: float = 10) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = read_status(folder)
        if status and predicate(status):  # type: ignore[operator]
            return status
        time.sleep(0.05)
    raise AssertionError(f"status not reached: {read_status(folder)}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_killed_worker_is_replaced_within_5_s_and_all_stop_together(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        status = wait_status(tmp_path, lambda s: len(s["pids"]) == 2)
        pids = dict(status["pids"])  # type: ignore[call-overload]
        victim = pids["0"]
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        status = wait_status(tmp_path, lambda s: s["restarts"] == 1 and len(s["pids"]) == 2,
                             timeout_s=5)
        replaced_s = time.monotonic() - killed_at
        new_pids = dict(status["pids"])  # type: ignore[call-overload]
        assert new_pids["0"] != victim and new_pids["1"] == pids["1"]
        assert replaced_s < 5, replaced_s
        assert status["last_restart_s"] is not None and status["last_restart_s"] < 5
        assert not alive(victim)  # reaped: no zombie left
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    for pid in new_pids.values():
        assert not alive(pid), f"worker {pid} outlived the supervisor"


def test_crash_loop_backs_off(tmp_path: Path) -> None:
    supervisor = Supervisor(1, lambda index, fd: None, tmp_path)
    slot = supervisor.slots[0]
    delays = []
    for _ in range(5):  # a worker that exits with status 3 right after each start
        slot.pid, slot.started_s = 12345, time.monotonic()
        supervisor.on_exit(slot, 3 << 8)
        delays.append(slot.start_after_s - time.monotonic())
    assert delays[0] <= 0.1  # one quick death: replaced at once
    assert 0.3 < delays[1] < delays[2] < delays[3] < delays[4] <= 30  # then longer and longer
    assert slot.restarts == 5 and slot.last_exit == "exited with status 3" and slot.pid == 0
    slot.pid, slot.started_s = 12345, time.monotonic() - 60  # lived a minute: no back-off
    supervisor.on_exit(slot, 9)
    assert slot.start_after_s <= time.monotonic() and slot.last_exit == "killed by SIGKILL"


def test_describe_exit() -> None:
    assert describe_exit(9) == "killed by SIGKILL"
    assert describe_exit(2 << 8) == "exited with status 2"
    assert isinstance(WorkerSlot(0).restarts, int)
