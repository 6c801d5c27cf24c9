"""Voice to voice in the real call page: from the fake microphone's last sound to the first
reply sound the page hears, camera on and off, interleaved.

What a new user gets, measured as they would: ``omnicall serve`` (the CLI, its defaults),
headless Debian Chromium on the call page (``/``, its defaults: microphone processing on,
the camera at 640 x 480 sent at 5 fps), a fake microphone that asks ``--questions`` spoken
questions (the bundled Piper voice) and a fake camera of moving footage of a person
(:mod:`bench.footage`). The same page calls two servers in turn, run after run: the default
(camera on) and one started with ``--no-video`` (the page's camera is refused, the call is
audio only).

Both sides are timed in the page, on one clock: the microphone's track and the remote audio
(once the page's ``<audio>`` element plays it) go into one WebAudio processor, so a block of
each is stamped alike. A question ends at the microphone's last loud block before a second of
quiet; its reply starts at the first loud block of the remote audio after it. Replies are cut
by the page's own Interrupt button 2 s after they start, so the next question meets a quiet
line (a turn whose reply was still sounding when the question ended is not counted).

Stage timings (the server's ``timing`` messages, as the page receives them) are printed per
arm: where each millisecond goes with the camera on; and the CPU each arm used, the server's
and the rest's (headless Chromium: with the camera it draws the self-view and encodes VP8 on
the same two cores the server answers on, which a user's own device would not share).

Last line: ``RESULT camera_ms=X no_camera_ms=X camera_extra_ms=X camera_p95_ms=X
no_camera_p95_ms=X turns=N/N`` (medians; goal: camera_extra_ms <= 50).

    .venv/bin/python bench/page_v2v.py [--runs 2] [--questions 6]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.footage import write_y4m  # noqa: E402
from bench.voice_to_voice import QUESTIONS, breakdown, free_port, marks, pct  # noqa: E402
from tests.chromium import chromium_page  # noqa: E402
from tests.utils import piper_speech  # noqa: E402

LEAD_S = 8.0  # the page connects (and any greeting ends) before the first question
GAP_S = 7.0  # after each question: the reply, cut 2 s in, and quiet
LOUD = 0.02  # a block this loud (of full scale) is sound
QUIET_AFTER_S = 1.0  # a question has ended after this long without sound
QUIET_BEFORE_S = 0.3  # a reply counts when the line was quiet this long before the question ended
INTERRUPT_AFTER_MS = 2000

#: one WebAudio processor for the microphone (channel 0) and the remote audio (channel 1):
#: each block's peak per side, stamped with the context's clock; the Interrupt button is
#: clicked 2 s into each reply that follows the microphone's sound
TAP_JS = """
(() => {
  const rec = { blocks: [], interrupts: 0 };
  window.__v2v = rec;
  let ctx = null, merger = null, micOn = false, replyAt = null, lastMic = -1e9;
  function ensure() {
    if (ctx) return;
    ctx = new AudioContext();
    merger = ctx.createChannelMerger(2);
    const proc = ctx.createScriptProcessor(256, 2, 1);
    proc.onaudioprocess = (e) => {
      const t = ctx.currentTime;
      const peaks = [0, 1].map((c) => {
        const d = e.inputBuffer.getChannelData(c); let p = 0;
        for (let i = 0; i < d.length; i++) { const a = Math.abs(d[i]); if (a > p) p = a; }
        return p;
      });
      rec.blocks.push([t, peaks[0], peaks[1]]);
      if (peaks[0] > __LOUD__) { lastMic = t; micOn = true; replyAt = null; }
      if (micOn && peaks[1] > __LOUD__ && replyAt === null && t > lastMic) {
        replyAt = t; micOn = false;
        setTimeout(() => { const b = document.getElementById("interrupt");
          if (b && !b.disabled) { b.click(); rec.interrupts++; } }, __AFTER_MS__);
      }
    };
    merger.connect(proc); proc.connect(ctx.destination);
  }
  function tap(track, channel) {
    ensure();
    const src = ctx.createMediaStreamSource(new MediaStream([track]));
    src.connect(merger, 0, channel);
  }
  const gum = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  navigator.mediaDevices.getUserMedia = async (c) => {
    const stream = await gum(c);
    stream.getAudioTracks().forEach((t) => tap(t, 0));
    return stream;
  };
  const PC = window.RTCPeerConnection;
  window.RTCPeerConnection = function (...args) {
    const pc = new PC(...args);
    pc.addEventListener("track", (e) => { if (e.track.kind === "audio") tap(e.track, 1); });
    return pc;
  };
  window.RTCPeerConnection.prototype = PC.prototype;
})();
""".replace("__LOUD__", str(LOUD)).replace("__AFTER_MS__", str(INTERRUPT_AFTER_MS))


def microphone_wav(folder: Path, questions: list[str]) -> Path:
    """The fake microphone: quiet, then each question followed by :data:`GAP_S` of quiet
    (48 kHz mono)."""
    parts = [np.zeros(int(LEAD_S * 48_000), np.int16)]
    for question in questions:
        parts.append(piper_speech(question, rate=48_000, lead_s=0.0, tail_s=GAP_S))
    path = folder / "questions.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(48_000)
        out.writeframes(np.concatenate(parts).tobytes())
    return path


def cpu_s(pid: int | None = None) -> float:
    """CPU seconds used so far by process ``pid`` (all its threads), or by the whole machine
    (None), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    if pid is not None:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    return (sum(int(v) for v in cpu) - int(cpu[3]) - int(cpu[4])) / ticks  # less idle, iowait


@contextlib.asynccontextmanager
async def omnicall_server(*flags: str) -> AsyncIterator[tuple[str, int]]:
    """``omnicall serve`` on loopback (the CLI, its defaults plus ``flags``): its URL and
    process id."""
    port = free_port()
    exe = Path(sys.executable).with_name("omnicall")
    proc = await asyncio.create_subprocess_exec(
        str(exe), "serve", "--host", "127.0.0.1", "--port", str(port), "--ice-loopback",
        *flags, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True)
    assert proc.stdout is not None
    try:
        while b"is ready" not in (line := await asyncio.wait_for(proc.stdout.readline(), 180)):
            if not line:
                raise RuntimeError(f"omnicall serve {' '.join(flags)} did not start")
        yield f"http://127.0.0.1:{port}/", proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        await proc.wait()


def turns_of(blocks: list[list[float]]) -> tuple[list[float], int]:
    """Each question's end to its reply's first sound (ms), and the turns not counted."""
    t = np.array([b[0] for b in blocks])
    mic = np.array([b[1] for b in blocks]) > LOUD
    out = np.array([b[2] for b in blocks]) > LOUD
    ends = [i for i in np.flatnonzero(mic)
            if not mic[i + 1:][t[i + 1:] <= t[i] + QUIET_AFTER_S].any()
            and t[-1] > t[i] + QUIET_AFTER_S]
    latencies, skipped = [], 0
    for i in ends:
        before = out[(t > t[i] - QUIET_BEFORE_S) & (t <= t[i])]
        after = np.flatnonzero(out & (t > t[i]))
        if before.any() or not len(after):
            skipped += 1
            continue
        latencies.append(float(t[after[0]] - t[i]) * 1000)
    return latencies, skipped


async def one_run(url: str, mic: Path, camera: Path, questions: int
                  ) -> tuple[list[float], int, list[dict[str, Any]]]:
    async with chromium_page(mic, camera) as page:
        await page.add_init_script(TAP_JS)
        await page.goto(url)
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=30_000)
        await asyncio.sleep(LEAD_S + questions * (GAP_S + 3.0))
        blocks = await page.evaluate("window.__v2v.blocks")
        messages = await page.evaluate("window.omnicall.messages")
    latencies, skipped = turns_of(blocks)
    return latencies, skipped, messages


def stage_rows(messages: list[dict[str, Any]]) -> list[dict[str, float]]:
    """The server's stage timings per turn (as :func:`bench.voice_to_voice.breakdown` reads
    them), for turns that were answered with sound."""
    turns: dict[int, dict[str, float]] = {}
    for m in messages:
        if m.get("type") == "timing":
            turns.setdefault(int(m["turn"]), {})[m["stage"]] = float(m["ms"])
    rows = [r for r in turns.values() if {"speech_end", "first_audio_out", "asr_done",
                                          "llm_first_clause", "tts_first_chunk"} <= r.keys()]
    for r in rows:
        r["total"] = r["first_audio_out"] - r["speech_end"]  # no client side here
    return rows


async def main(runs: int, questions: int) -> None:
    asked = [QUESTIONS[i % len(QUESTIONS)] for i in range(questions)]
    results: dict[str, list[float]] = {"camera": [], "no camera": []}
    stages: dict[str, list[dict[str, float]]] = {"camera": [], "no camera": []}
    skipped = dict.fromkeys(results, 0)
    cpu = {name: [0.0, 0.0] for name in results}  # server, the rest (the browser): cores
    with tempfile.TemporaryDirectory(prefix="omnicall-page-v2v-") as tmp:
        mic = microphone_wav(Path(tmp), asked)
        camera = write_y4m(Path(tmp) / "camera.y4m")
        async with omnicall_server() as with_camera, omnicall_server("--no-video") as without:
            servers = {"camera": with_camera, "no camera": without}
            for r in range(runs):
                order = list(servers) if r % 2 == 0 else list(servers)[::-1]
                for name in order:
                    url, pid = servers[name]
                    began = time.monotonic(), cpu_s(), cpu_s(pid)
                    latencies, missed, messages = await one_run(url, mic, camera, questions)
                    wall = time.monotonic() - began[0]
                    server_cpu = cpu_s(pid) - began[2]
                    cpu[name][0] += server_cpu / wall / 2
                    cpu[name][1] += (cpu_s() - began[1] - server_cpu) / wall / 2
                    results[name] += latencies
                    skipped[name] += missed
                    stages[name] += stage_rows(messages)
                    print(f"{name:>9} run {r + 1}: " + " ".join(f"{ms:.0f}" for ms in latencies)
                          + (f" ({missed} not counted)" if missed else ""), flush=True)
                    for row in stage_rows(messages):
                        print("           " + marks(row), flush=True)
    for name, rows in stages.items():
        print(f"{name:>9}: n={len(results[name])} {breakdown(rows)}")
        print(f"{'':>9}  CPU, share of the machine's 2 cores during the runs: server "
              f"{100 * cpu[name][0] / runs:.0f} %, the rest (headless Chromium) "
              f"{100 * cpu[name][1] / runs:.0f} %")
    cam, bare = (statistics.median(results[n]) for n in ("camera", "no camera"))
    print("goal: camera_extra_ms <= 50 (the page, camera on against off)")
    print(f"RESULT camera_ms={cam:.0f} no_camera_ms={bare:.0f} camera_extra_ms={cam - bare:.0f} "
          f"camera_p95_ms={pct(results['camera'], 0.95):.0f} "
          f"no_camera_p95_ms={pct(results['no camera'], 0.95):.0f} "
          f"turns={len(results['camera'])}/{len(results['no camera'])}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="page runs per arm")
    parser.add_argument("--questions", type=int, default=6, help="questions per run")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.questions))
