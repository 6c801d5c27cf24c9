"""`omnicall serve` as a user runs it: one process, or several sharing the port."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent


async def start(*flags: str) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "serve", "--engine", "echo", "--port", "0",
        "--log-level", "WARNING", *flags, cwd=ROOT, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
    assert "ready" in line, line
    return proc, line.split("open ", 1)[1].split()[0]


async def test_workers_share_the_port_and_stop_together() -> None:
    proc, url = await start("--workers", "2")
    pids: set[int] = set()
    try:
        await asyncio.sleep(1.5)  # the second worker starts listening
        for _ in range(60):
            connector = aiohttp.TCPConnector(force_close=True)
            async with aiohttp.ClientSession(connector=connector) as http, \
                    http.get(url + "health") as resp:
                pids.add((await resp.json())["pid"])
            if len(pids) == 2:
                break
        assert len(pids) == 2, pids  # the kernel spread connections over both workers
        assert proc.pid in pids
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    for pid in pids - {proc.pid}:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"worker {pid} outlived the server")


async def test_unknown_engine_model_path_exits_with_a_message() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "serve", "--engine", "qwen-omni", "--model",
        "/nonexistent/model", "--port", "0", cwd=ROOT, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert b"does not exist" in err
