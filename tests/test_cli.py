"""`omnicall serve` as a user runs it: one process, or several sharing the port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path

import aiohttp
import ifaddr

from omnicall.client import Microphone, connect
from omnicall.media.third_party import use_loopback_candidates
from tests.utils import tone, wait_for

ROOT = Path(__file__).resolve().parent.parent


async def start(*flags: str) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "omnicall", "serve", "--engine", "loopback", "--port", "0",
        "--log-level", "WARNING", *flags, cwd=ROOT, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
    assert "ready" in line, line
    return proc, line.split("open ", 1)[1].split()[0]


async def health(url: str) -> dict[str, object]:
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http, \
            http.get(url + "health") as resp:
        data: dict[str, object] = await resp.json()
        return data


async def test_workers_supervised_replaced_when_killed_and_reported_together() -> None:
    proc, url = await start("--workers", "2")
    try:
        first = await health(url)
        assert first["workers_serving"] == 2 and first["workers_expected"] == 2
        pids = {w["pid"] for w in first["workers"]}  # type: ignore[attr-defined]
        assert len(pids) == 2 and proc.pid not in pids  # the supervisor serves no calls
        answered_by = {(await health(url))["pid"] for _ in range(40)}
        assert answered_by == pids  # the kernel hands connections to both workers
        victim = min(pids)  # type: ignore[type-var]
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        for _ in range(100):
            try:
                now = await health(url)
            except aiohttp.ClientError:  # a connection the kernel gave the dying worker's
                await asyncio.sleep(0.05)  # socket is reset: the replacement is under way
                continue
            serving = {w.get("pid") for w in now["workers"]  # type: ignore[attr-defined]
                       if w.get("status") == "ok"}
            if len(serving) == 2 and victim not in serving:
                break
            await asyncio.sleep(0.05)
        replaced_s = time.monotonic() - killed_at
        assert replaced_s < 5, replaced_s
        assert now["worker_restarts"] == 1 and now["status"] == "ok"
        connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(connector=connector) as http, \
                http.get(url + "metrics") as resp:
            metrics = await resp.text()
        assert 'omnicall_active_sessions{worker="0"}' in metrics
        assert 'omnicall_active_sessions{worker="1"}' in metrics
        assert "omnicall_worker_restarts_total 1.0" in metrics
        assert "omnicall_workers_serving 2.0" in metrics
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, 0)
            raise AssertionError("the killed worker was not reaped")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 0)  # type: ignore[arg-type]
            raise AssertionError(f"worker {pid} outlived the server")


async def test_sigterm_with_a_call_says_goodbye_and_exits() -> None:
    proc, url = await start("--ice-loopback")
    use_loopback_candidates(True)  # both peers offer 127.0.0.1 only
    call = await connect(url, Microphone(tone(300, 20, rate=48_000)))
    try:
        await wait_for(lambda: any(m.get("type") == "state" for m in call.messages), 15)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        await wait_for(lambda: any(m.get("type") == "goodbye" for m in call.messages), 5)
    finally:
        await call.close()
        use_loopback_candidates(False)
    goodbye = next(m for m in call.messages if m.get("type") == "goodbye")
    assert goodbye["reason"] == "shutdown" and "restarting" in goodbye["message"]


async def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "omnicall", "serve", *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})})
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, (out + err).decode(), time.monotonic() - began


async def test_operator_mistakes_are_one_line_errors_before_any_model_loads(
        tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # the cascade engine would take seconds to load: these fail before it starts
        code, text, took_s = await run_cli("--port", str(port))
        assert code == 2 and f"port {port} on 127.0.0.1 is already in use" in text, text
        assert "Traceback" not in text and len(text.strip().splitlines()) == 1
        assert took_s < 15
    code, text, _ = await run_cli("--port", "0", "--cert", str(tmp_path / "missing.pem"),
                                  "--key", str(tmp_path / "key.pem"))
    assert code == 2 and "--cert" in text and "no such file" in text and "Traceback" not in text
    code, text, _ = await run_cli(env={"OMNICALL_PORT": "abc"})
    assert code == 2 and "OMNICALL_PORT='abc' is not an integer" in text, text
    code, text, _ = await run_cli(env={"OMNICALL_PORT": "70000"})
    assert code == 2 and "OMNICALL_PORT" in text, text


async def test_operator_settings_that_cannot_work_are_one_line_errors(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    for args, expected in (
            (("--tools", "no_such_tools_module"), "--tools no_such_tools_module: cannot import"),
            (("--tools", "examples.faq"), "--tools examples.faq: cannot import"),
            (("--language", "de"), "--language de: the bundled whisper tiny.en hears English"),
            (("--language", "german"), "use 'auto' or a language code"),
            (("--transcripts", str(blocked / "sub")), f"--transcripts {blocked / 'sub'}:"),
            (("--engine", "loopback", "--tools", "examples.tools"),
             "loopback engine cannot call tools"),
            (("--llm-url", "localhost:8000"), "must be an http(s):// base URL")):
        code, text, took_s = await run_cli("--port", "0", *args)
        last = text.strip().splitlines()[-1]  # settings errors follow argparse's usage lines
        assert code == 2 and expected in last, (args, text)
        assert "Traceback" not in text, text
        assert took_s < 20


async def test_ready_line_lists_addresses_when_listening_everywhere() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "omnicall", "serve", "--engine", "loopback", "--port", "0",
        "--host", "0.0.0.0", "--log-level", "WARNING", cwd=ROOT, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 20)
    assert line.startswith("omnicall is ready: open http://localhost:"), line
    addresses = [a for adapter in ifaddr.get_adapters() for a in adapter.ips
                 if isinstance(a.ip, str) and not a.ip.startswith(("127.", "169.254."))]
    for address in addresses:
        assert f"http://{address.ip}:" in line, line
    if addresses:
        assert "https" in line  # says why a phone on the network needs TLS


async def test_unknown_engine_model_path_exits_with_a_message() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "omnicall", "serve", "--engine", "qwen-omni", "--model",
        "/nonexistent/model", "--port", "0", cwd=ROOT, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert b"does not exist" in err
