"""End of user speech -> first reply audio at the client, over real WebRTC.

A real aiortc client (with the same low-latency receive buffer the server uses, standing in
for a browser's) speaks questions synthesized by the bundled Piper voice, in real time, to
two servers in this process, turn by turn, alternating:

- omnicall: the default CPU cascade (speculative reply during the VAD hangover, partial ASR,
  first clause to TTS, LLM yielding to TTS);
- naive: the same models in sequence, used the stock way: full-utterance ASR
  (faster-whisper's default 30 s window) after a 400 ms hangover, the camera looked at, LLM
  until the whole first sentence, then TTS (stock Piper: the whole sentence in one run of the
  voice).

The client sends what the call page sends: its microphone and a moving camera (footage of a
person, 640 x 480 at the page's 5 fps: :mod:`bench.footage`), to both. The omnicall server is
also called without the camera, turn by turn between the others (the same questions, the same
server process), so the camera's cost is measured in the same run: ``camera_extra_ms`` is
the median with the camera less the median without (``--no-camera``: no camera at all, the
audio-only figure of earlier records). The comparing modes below (``--ab``, ``--against``,
``--tools``, ``--llm-url``, ``--servers``) send the same camera on every call too, unless
``--no-camera`` (until 2026-12-07 they sent none).

Each server runs in its own process (as in deployment: the client's WebRTC work must not
share a GIL with the engine). Latency is measured on the client's clock: from the send time
of the last speech sample to the arrival of the first reply frame with sound. The per-stage
breakdown comes from the server's timing events (relative to each turn's speech start). A
second, idle call stays connected to the omnicall server throughout; the late output frames
its server-side stats report are printed (one busy call must not starve another).
Last line: ``RESULT median_ms=<> p95_ms=<> naive_ms=<> ratio=<median/naive> camera_ms=<>
no_camera_ms=<> camera_extra_ms=<>`` (median, p95, naive and ratio: with the camera on).

    .venv/bin/python bench/voice_to_voice.py [--turns 10] [--no-camera]

The same measure in the real page (headless Chromium, its fake microphone and camera):
``bench/page_v2v.py``.

Two variants compare the cascade with itself, on the same spoken requests, interleaved:

- ``--tools``: requests that need a tool (the example tools, which return at once) to a
  server without tools (a plain answer) and to one with ``--tools examples.tools`` (only
  turns where the tool was called count):
  ``RESULT plain_ms=<> tool_ms=<> tool_extra_ms=<> tool_turns=<n>/<asked>``;
- ``--llm-url``: the in-process model vs the same GGUF behind llama.cpp's OpenAI-compatible
  server (started here): ``RESULT local_ms=<> url_ms=<> url_extra_ms=<>``;
- ``--llm-url --vision``: a tiny random VLM (LLaVA classes, built here) on ``transformers
  serve``, a camera on the client; the cascade without the camera, with ``--llm-vision``
  (the frames at the turn's end only) and with its early prefill (frames sent as the user
  speaks): ``RESULT text_ms=<> vision_ms=<> vision_extra_ms=<> early_ms=<> early_extra_ms=<>``;
- ``--servers``: the in-process ASR and voice vs the same models behind real
  OpenAI-compatible speech servers on loopback (faster-whisper-server on the bundled tiny.en,
  local-tts-studio on the bundled Piper voice: ``--asr-url``, ``--tts-url``):
  ``RESULT local_ms=<> servers_ms=<> servers_extra_ms=<> asr_extra_ms=<> tts_extra_ms=<>``
  (asr: asr_start to asr_done; tts: the first clause to its first sound; medians); then
  the ASR alone on the questions' audio, in one process, interleaved: the cascade's own
  (its window padded to the utterance), the same model padded to Whisper's 30 s window as
  faster-whisper (and so the server) always pads, and the server through ``--asr-url``'s
  client: ``RESULT asr_local_ms=<> asr_30s_window_ms=<> asr_server_ms=<> asr_protocol_ms=<>``
  (protocol: the server over the same 30 s window run here: upload, HTTP, the server's own
  work around the model);
- ``--ab SETTING=VALUE``: the default cascade vs one with a setting of
  :class:`omnicall.engine.cascade.settings.CascadeSettings` changed (``--ab llm_threads=2``; a
  nested one's field with a dot: ``--ab turns.turn_model=smart``), an A/B
  in one run on a noisy machine: ``RESULT a_ms=<> b_ms=<> b_over_a=<>``;
- ``--against CHECKOUT``: this checkout's cascade vs another checkout's (a worktree of an
  earlier commit; each server runs its own tree's code), interleaved:
  ``RESULT this_ms=<> other_ms=<> this_over_other=<>``.

The end of turn itself (offline) is measured by ``bench/turn_cutoffs.py``; how whole the
spoken replies sound, by ``bench/reply_wer.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import other_tree  # noqa: E402
from bench.footage import FootageTrack  # noqa: E402
from omnicall.app.config import ServerConfig  # noqa: E402
from omnicall.client import Microphone, connect  # noqa: E402
from omnicall.engine.base import EngineSession, SessionOptions  # noqa: E402
from omnicall.engine.cascade.clauses import ClauseSplitter  # noqa: E402
from omnicall.engine.cascade.engine import CascadeEngine  # noqa: E402
from omnicall.engine.cascade.session import CascadeSession  # noqa: E402
from omnicall.engine.cascade.tts import PiperTts  # noqa: E402
from omnicall.engine.conversation.settings import TurnSettings  # noqa: E402
from omnicall.media.receive_jitter import install_low_latency_audio  # noqa: E402
from omnicall.media.video_ring import RgbImage  # noqa: E402
from tests.utils import piper_speech  # noqa: E402

QUESTIONS = [
    "What is the capital of France?",
    "How many legs does a spider have?",
    "What color is a ripe banana?",
    "Can you recommend a good book?",
    "What is the tallest mountain in the world?",
    "How do I boil an egg?",
    "What is two plus three?",
    "Tell me something about the moon.",
    "What do cats like to eat?",
    "Which ocean is the largest?",
    "What time of year is best for skiing?",
    "How many days are in a week?",
]
TOOL_QUESTIONS = [  # requests the example tools answer (their own examples)
    "What time is it?",
    "When does the museum open?",
    "What's the date today?",
    "How much is a ticket?",
]
LOUD = 800


class NaiveSession(CascadeSession):
    """The same models, run one after the other once the turn has ended."""

    async def on_lull(self) -> None:
        return  # no transcript before the turn has ended

    async def on_pause(self) -> None:
        return  # no speculation: the reply starts when the turn has ended

    def _maybe_partial(self) -> None:
        return

    def _look_ahead(self, image: RgbImage, speaking: bool) -> None:
        return  # the camera is looked at once the turn has ended

    def new_splitter(self) -> ClauseSplitter:
        return ClauseSplitter(min_words=10_000, max_chars=10_000,  # whole sentences only
                              first_max_words=None)


class NaiveEngine(CascadeEngine):
    def _load(self) -> None:
        super()._load()
        self.asr.short_window = False  # stock faster-whisper: always a 30 s window
        self.tts = PiperTts()  # stock Piper: a whole sentence per run of the voice

    def open_session(self, session_id: str, options: SessionOptions) -> EngineSession:
        return NaiveSession(session_id, options, self.runtime)


class Ear:
    def __init__(self) -> None:
        self.frames: list[tuple[float, float]] = []  # arrival time, peak

    async def run(self, track: MediaStreamTrack) -> None:
        try:
            while True:
                frame = await track.recv()
                peak = float(np.abs(frame.to_ndarray()).max())
                self.frames.append((time.monotonic(), peak))
                if len(self.frames) > 20_000:
                    del self.frames[:10_000]
        except MediaStreamError:
            return

    def first_sound_after(self, t: float) -> float | None:
        return next((at for at, peak in self.frames if at > t and peak > LOUD), None)


async def converse(name: str, url: str, questions: list[str],
                   results: dict[str, list[dict[str, float]]], camera: bool = False) -> None:
    mouth, ear = Microphone(), Ear()
    call = await connect(url, mouth, FootageTrack() if camera else None)
    for transceiver in call.pc.getTransceivers():
        install_low_latency_audio(transceiver.receiver)
    receiver_track = next(t.receiver.track for t in call.pc.getTransceivers())
    for task in call.tasks:
        task.cancel()
    call.tasks = [asyncio.ensure_future(ear.run(receiver_track))]
    spoken = {q: piper_speech(q, rate=48_000, lead_s=0.2, tail_s=0.0) for q in questions}
    await asyncio.sleep(2.0)
    for question in questions:
        ended = len([m for m in call.messages if m.get("type") == "turn"
                     and m.get("role") == "assistant" and m.get("phase") == "end"])
        mark = len(call.messages)
        mouth.say(spoken[question])
        for _ in range(800):  # up to 40 s for the reply to be spoken
            if len([m for m in call.messages if m.get("type") == "turn" and
                    m.get("role") == "assistant" and m.get("phase") == "end"]) > ended:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.6)
        end_at = mouth.speech_end_at
        heard_at = ear.first_sound_after(end_at) if end_at else None
        timings = {m["stage"]: m["ms"] for m in call.messages[mark:] if m["type"] == "timing"}
        if end_at is None or heard_at is None or "first_audio_out" not in timings:
            print(f"{name}: no reply for {question!r}", flush=True)
            continue
        total_ms = (heard_at - end_at) * 1000
        results[name].append({"total": total_ms, **timings})
        print(f"{name:>8}: {total_ms:7.1f} ms  {question}  [{marks(timings)}]", flush=True)
    await call.hang_up()


def marks(timings: dict[str, float]) -> str:
    """A turn's stages, each as ms after the server's speech end."""
    end = timings.get("speech_end", 0.0)
    return " ".join(f"{stage}=+{timings[stage] - end:.0f}" for stage in (
        "end_of_turn", "asr_done", "look_start", "look_done", "llm_first_token",
        "llm_first_clause", "tts_first_chunk", "first_audio_out") if stage in timings)


def breakdown(rows: list[dict[str, float]]) -> str:
    def med(a: str, b: str) -> float:
        vals = [max(0.0, r[b] - r[a]) for r in rows if a in r and b in r]
        return statistics.median(vals) if vals else float("nan")
    hangover = med("speech_end", "end_of_turn")
    asr_tail = statistics.median([max(0.0, r["asr_done"] - r["end_of_turn"]) for r in rows])
    llm = statistics.median([r["llm_first_clause"] - max(r["asr_done"], r["end_of_turn"])
                             for r in rows])
    tts = med("llm_first_clause", "tts_first_chunk")
    out_wait = statistics.median([r["first_audio_out"] - max(r["tts_first_chunk"],
                                                             r["end_of_turn"]) for r in rows])
    speech_to_out = statistics.median([r["first_audio_out"] - r["speech_end"] for r in rows])
    transport = statistics.median([r["total"] - (r["first_audio_out"] - r["speech_end"])
                                   for r in rows])
    look = med("look_start", "look_done")
    return (f"end of turn (hangover, then its audio's arrival) {hangover:.0f} | "
            f"ASR tail {asr_tail:.0f} | look {look:.0f} | LLM first clause "
            f"{llm:.0f} | TTS first chunk {tts:.0f} | release wait {out_wait:.0f} | "
            f"server speech end->first audio out {speech_to_out:.0f} | VAD lag+transport+client "
            f"{transport:.0f} (ms, medians; stages overlap when speculative)")


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, round(q * (len(v) - 1)))]


def setting_override(text: str) -> dict[str, Any]:
    """``name=value[,name=value...]`` -> {name: value typed as the CascadeSettings field}
    (ValueError if no such field)."""
    from omnicall.engine.cascade.settings import CascadeSettings

    if "," in text:
        return {k: v for part in text.split(",") for k, v in setting_override(part).items()}
    name, equals, value = text.partition("=")
    name, dot, inner = name.partition(".")  # turns.turn_model: a field of a nested setting
    fields = [f.name for f in dataclasses.fields(CascadeSettings)]
    if name not in fields or not equals:
        raise ValueError(f"--ab {text!r}: use NAME=VALUE with NAME one of {', '.join(fields)} "
                         "(or NAME.FIELD for a nested one: turns.turn_model=fixed)")
    default = getattr(CascadeSettings(), name)
    if dot:
        if not dataclasses.is_dataclass(default) or isinstance(default, type):
            raise ValueError(f"--ab {text!r}: {name} has no fields")
        return {name: dataclasses.replace(default, **_typed(default, inner, value))}
    return _typed(CascadeSettings(), name, value)


def _typed(settings: Any, name: str, value: str) -> dict[str, Any]:
    """``value`` as the type of ``settings``'s field ``name``."""
    if name not in {f.name for f in dataclasses.fields(settings)}:
        raise ValueError(f"--ab: {type(settings).__name__} has no field {name!r}")
    default = getattr(settings, name)
    return {name: type(default)(value) if not isinstance(default, bool)
            else value.lower() in ("1", "true", "yes")}


async def serve(kind: str, port: int, llm_url: str = "", override: str = "") -> None:
    """Child process: one server on loopback until killed."""
    from aiohttp import web

    from omnicall.app.engine_settings import cascade_settings
    from omnicall.app.http.server import create_app

    logging.basicConfig(level=logging.INFO, format=f"[{kind}] %(asctime)s %(name)s %(message)s")
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    config = ServerConfig(engine="cascade", ice_loopback=True, llm_url=llm_url,
                          tools="examples.tools" if kind == "tools" else "")
    settings = cascade_settings(config)
    if override:
        settings = dataclasses.replace(settings, **setting_override(override))
    # the stock way ends turns after a fixed 400 ms of silence
    naive = dataclasses.replace(settings, turns=TurnSettings(turn_model="fixed"))
    engine = NaiveEngine(naive, progress=None) if kind == "naive" else CascadeEngine(
        settings, progress=None)
    app = create_app(config, engine=engine)
    runner = web.AppRunner(app, handle_signals=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("READY", flush=True)
    await asyncio.Event().wait()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start_server(kind: str, llm_url: str = "", override: str = "", tree: Path = ROOT
                       ) -> tuple[asyncio.subprocess.Process, str]:
    """A server process of this bench, or of the same bench in another checkout ``tree``
    (``--against``: its own code, this venv)."""
    port = free_port()
    args = ("--serve", kind, "--port", str(port), "--llm-url-of-server", llm_url,
            "--override-of-server", override)
    script = "bench/voice_to_voice.py"
    argv = [sys.executable, str(tree / script), *args] if tree == ROOT else \
        other_tree.command(tree, script, *args)  # its own omnicall, not this venv's link
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, cwd=tree)
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 120)
    if b"READY" not in line:
        raise RuntimeError(f"{kind} server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{port}/"


async def main(turns: int, camera: bool = True) -> None:
    """omnicall with the camera, omnicall without it and the naive cascade with it, the same
    questions in batches, interleaved (``camera=False``: no camera anywhere)."""
    logging.basicConfig(level=logging.WARNING)
    arms = ["omnicall", "no camera", "naive"] if camera else ["omnicall", "naive"]
    results: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    omni_proc, omni_url = await start_server("cascade")
    naive_proc, naive_url = await start_server("naive")
    urls = {"omnicall": omni_url, "no camera": omni_url, "naive": naive_url}
    try:
        idle = await connect(omni_url, Microphone())
        batch = max(1, turns // 2)
        for r in range(0, turns, batch):
            qs = [QUESTIONS[(r + i) % len(QUESTIONS)] for i in range(min(batch, turns - r))]
            order = arms if (r // batch) % 2 == 0 else [*arms[1::-1], *arms[2:]]
            for name in order:
                await converse(name, urls[name], qs, results,
                               camera=camera and name != "no camera")
        stats = [m for m in idle.messages if m.get("type") == "stats"]
        idle_late = stats[-1]["late_frames"] if stats else -1
        idle_sent = stats[-1]["sent_frames"] if stats else -1
        await idle.close()
    finally:
        for proc in (omni_proc, naive_proc):
            proc.terminate()
            await proc.wait()
    for name, rows in results.items():
        totals = [r["total"] for r in rows]
        print(f"{name:>9}: n={len(totals)} median={statistics.median(totals):.0f} ms "
              f"p95={pct(totals, 0.95):.0f} ms min={min(totals):.0f} max={max(totals):.0f}")
        print(f"           {breakdown(rows)}")
    print(f"idle second call during all turns: {idle_late} late output frames of {idle_sent}")
    med = statistics.median([r["total"] for r in results["omnicall"]])
    p95 = pct([r["total"] for r in results["omnicall"]], 0.95)
    naive_med = statistics.median([r["total"] for r in results["naive"]])
    print("goals (camera on): median <= 550 ms, p95 <= 750 ms, <= 0.35 x the naive cascade, "
          "camera_extra_ms <= 30")
    line = (f"RESULT median_ms={med:.0f} p95_ms={p95:.0f} naive_ms={naive_med:.0f} "
            f"ratio={med / naive_med:.2f}")
    if camera:
        bare = statistics.median([r["total"] for r in results["no camera"]])
        line += f" camera_ms={med:.0f} no_camera_ms={bare:.0f} camera_extra_ms={med - bare:.0f}"
    print(line)


async def compare(turns: int, a: tuple[str, ...], b: tuple[str, ...],
                  questions: list[str], b_tree: Path = ROOT, camera: bool = True
                  ) -> dict[str, list[dict[str, float]]]:
    """Two servers (name, kind, llm_url[, setting override]), the same spoken questions,
    interleaved, each call with the page's moving camera unless ``camera`` is False;
    ``b_tree``: the second one's checkout."""
    results: dict[str, list[dict[str, float]]] = {a[0]: [], b[0]: []}
    procs = []
    try:
        urls = {}
        for (name, kind, llm_url, *override), tree in ((a, ROOT), (b, b_tree)):
            proc, urls[name] = await start_server(kind, llm_url, *override, tree=tree)
            procs.append(proc)
        for r in range(turns):
            qs = [questions[r % len(questions)]]
            for name in (a[0], b[0]) if r % 2 == 0 else (b[0], a[0]):
                await converse(name, urls[name], qs, results, camera=camera)
    finally:
        for proc in procs:
            proc.terminate()
            await proc.wait()
    return results


async def main_tools(turns: int, camera: bool = True) -> None:
    logging.basicConfig(level=logging.WARNING)
    results = await compare(turns, ("plain", "cascade", ""), ("tool", "tools", ""),
                            TOOL_QUESTIONS, camera=camera)
    plain = [r["total"] for r in results["plain"]]
    used = [r["total"] for r in results["tool"] if "tool_start" in r]
    for name, rows in results.items():
        print(f"{name:>8}: n={len(rows)} {breakdown(rows)}")
    print("goal: tool_extra_ms <= 300")
    print(f"RESULT plain_ms={statistics.median(plain):.0f} tool_ms={statistics.median(used):.0f}"
          f" tool_extra_ms={statistics.median(used) - statistics.median(plain):.0f} "
          f"tool_turns={len(used)}/{len(results['tool'])}")


async def main_llm_url(turns: int, camera: bool = True) -> None:
    from omnicall.engine.bundled_models import smollm2_gguf

    logging.basicConfig(level=logging.WARNING)
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()), "--host",
        "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1",
        "--n_threads_batch", "2", stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        await asyncio.sleep(4.0)
        results = await compare(turns, ("local", "cascade", ""), ("url", "cascade", url),
                                QUESTIONS, camera=camera)
    finally:
        server.terminate()
        await server.wait()
    local = statistics.median([r["total"] for r in results["local"]])
    remote = statistics.median([r["total"] for r in results["url"]])
    for name, rows in results.items():
        print(f"{name:>8}: n={len(rows)} {breakdown(rows)}")
    print("goal: url_extra_ms <= 60")
    print(f"RESULT local_ms={local:.0f} url_ms={remote:.0f} url_extra_ms={remote - local:.0f}")


async def main_servers(turns: int, camera: bool = True) -> None:
    """--servers: the cascade's own ASR and voice vs the same models behind real
    OpenAI-compatible servers on loopback (faster-whisper-server on the bundled tiny.en,
    local-tts-studio on the bundled Piper voice; --asr-url and --tts-url), interleaved."""
    import contextlib
    import tempfile

    from tests.speech_servers import faster_whisper_server, piper_speech_server

    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        asr = stack.enter_context(faster_whisper_server(folder=Path(tmp) / "asr"))
        tts = stack.enter_context(piper_speech_server(folder=Path(tmp) / "tts"))
        override = f"asr_url={asr.base_url},tts_url={tts.base_url}"
        results = await compare(turns, ("local", "cascade", ""),
                                ("servers", "cascade", "", override), QUESTIONS,
                                camera=camera)
        alone = await asr_alone(asr.base_url)

    def median(name: str, start: str, end: str) -> float:
        return statistics.median([r[end] - r[start] for r in results[name]
                                  if start in r and end in r])

    totals = {name: statistics.median([r["total"] for r in rows])
              for name, rows in results.items()}
    for name, rows in results.items():
        print(f"{name:>8}: n={len(rows)} ASR {median(name, 'asr_start', 'asr_done'):.0f} ms "
              f"| {breakdown(rows)}")
    asr_extra = median("servers", "asr_start", "asr_done") - median("local", "asr_start",
                                                                    "asr_done")
    tts_extra = median("servers", "llm_first_clause", "tts_first_chunk") - median(
        "local", "llm_first_clause", "tts_first_chunk")
    print("goal: servers_extra_ms <= 80 (loopback, the same models)")
    print(f"RESULT local_ms={totals['local']:.0f} servers_ms={totals['servers']:.0f} "
          f"servers_extra_ms={totals['servers'] - totals['local']:.0f} "
          f"asr_extra_ms={asr_extra:.0f} tts_extra_ms={tts_extra:.0f}")
    print(f"RESULT asr_local_ms={alone['local']:.0f} asr_30s_window_ms={alone['30s']:.0f} "
          f"asr_server_ms={alone['server']:.0f} "
          f"asr_protocol_ms={alone['server'] - alone['30s']:.0f}")


async def asr_alone(base_url: str, rounds: int = 3) -> dict[str, float]:
    """Median time to transcribe each question (16 kHz, as the listener keeps a turn): the
    cascade's ASR, the same model with the 30 s window, and the server (``--asr-url``'s
    client), one after another per utterance, order rotating."""
    from omnicall.engine.cascade.asr import WhisperAsr
    from omnicall.engine.cascade.servers.asr_server import AsrServer

    local, padded = WhisperAsr(short_window=True), WhisperAsr(short_window=False)
    server = AsrServer(base_url, timeout_s=10.0)
    arms: dict[str, Callable[[np.ndarray], Awaitable[object]]] = {
        "local": lambda audio: asyncio.to_thread(local.transcribe, audio),
        "30s": lambda audio: asyncio.to_thread(padded.transcribe, audio),
        "server": server.transcribe,
    }
    spoken = [piper_speech(q, rate=16_000, lead_s=0.2, tail_s=0.1) for q in QUESTIONS]
    times: dict[str, list[float]] = {name: [] for name in arms}
    order = list(arms)
    try:
        for name in order:  # warm: the first call of each is not timed
            await arms[name](spoken[0])
        for r in range(rounds):
            for i, audio in enumerate(spoken):
                k = (r + i) % len(order)
                for name in order[k:] + order[:k]:
                    start = time.perf_counter()
                    await arms[name](audio)
                    times[name].append((time.perf_counter() - start) * 1000)
    finally:
        await server.aclose()
    for name, ms in times.items():
        print(f"ASR alone, {name:>6}: n={len(ms)} median {statistics.median(ms):.0f} ms "
              f"(min {min(ms):.0f}, max {max(ms):.0f})")
    return {name: statistics.median(ms) for name, ms in times.items()}


async def main_vision(turns: int) -> None:
    """--llm-url --vision: the same tiny VLM behind ``transformers serve``, answering without
    the camera, with the turn's frames sent at its end, and with them sent early too."""
    import tempfile

    from tests.llm_servers import build_tiny_vlm, transformers_serve

    logging.basicConfig(level=logging.WARNING)
    arms = (("text", ""), ("vision", "llm_vision=true,llm_vision_early=false"),
            ("early", "llm_vision=true"))
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in arms}
    with tempfile.TemporaryDirectory() as tmp, \
            transformers_serve(build_tiny_vlm(Path(tmp) / "vlm"), Path(tmp) / "serve.log") as vlm:
        procs = []
        try:
            urls = {}
            for name, override in arms:
                proc, urls[name] = await start_server("cascade", vlm.base_url, override)
                procs.append(proc)
            for r in range(turns):
                order = [name for name, _ in arms]
                order = order[r % 3:] + order[:r % 3]  # each arm first as often
                for name in order:
                    await converse(name, urls[name], [QUESTIONS[r % len(QUESTIONS)]],
                                   results, camera=True)
        finally:
            for proc in procs:
                proc.terminate()
                await proc.wait()
    medians = {name: statistics.median([r["total"] for r in rows]) for name, rows in
               results.items()}
    for name, rows in results.items():
        print(f"{name:>8}: n={len(rows)} {breakdown(rows)}")
    print("goal: vision_extra_ms <= 60 with early prefill (early_extra_ms)")
    print(f"RESULT text_ms={medians['text']:.0f} vision_ms={medians['vision']:.0f} "
          f"vision_extra_ms={medians['vision'] - medians['text']:.0f} "
          f"early_ms={medians['early']:.0f} "
          f"early_extra_ms={medians['early'] - medians['text']:.0f}")


async def main_ab(turns: int, override: str, camera: bool = True) -> None:
    setting_override(override)  # a bad setting fails here, not in the child
    logging.basicConfig(level=logging.WARNING)
    results = await compare(turns, ("default", "cascade", ""), (override, "cascade", "", override),
                            QUESTIONS, camera=camera)
    a = statistics.median([r["total"] for r in results["default"]])
    b = statistics.median([r["total"] for r in results[override]])
    for name, rows in results.items():
        totals = [r["total"] for r in rows]
        print(f"{name:>16}: n={len(rows)} median={statistics.median(totals):.0f} "
              f"p95={pct(totals, 0.95):.0f} | {breakdown(rows)}")
    print(f"RESULT a_ms={a:.0f} b_ms={b:.0f} b_over_a={b / a:.2f}")


async def main_against(turns: int, tree: Path, camera: bool = True) -> None:
    """This checkout's cascade against another checkout's (a worktree of an earlier commit:
    ``git worktree add ../parent HEAD~3``), interleaved turn by turn."""
    logging.basicConfig(level=logging.WARNING)
    results = await compare(turns, ("this", "cascade", ""), ("other", "cascade", ""),
                            QUESTIONS, b_tree=tree, camera=camera)
    medians = {name: statistics.median([r["total"] for r in rows])
               for name, rows in results.items()}
    for name, rows in results.items():
        totals = [r["total"] for r in rows]
        print(f"{name:>8}: n={len(rows)} median={medians[name]:.0f} p95={pct(totals, 0.95):.0f}"
              f" | {breakdown(rows)}")
    print(f"RESULT this_ms={medians['this']:.0f} other_ms={medians['other']:.0f} "
          f"this_over_other={medians['this'] / medians['other']:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10, help="spoken turns per engine")
    parser.add_argument("--no-camera", action="store_true",
                        help="no camera at all (the audio-only figure); default: the page's "
                             "moving camera on every call (and, in the default mode, the same "
                             "server without it interleaved)")
    parser.add_argument("--tools", action="store_true", help="a tool's answer vs a plain one")
    parser.add_argument("--llm-url", action="store_true",
                        help="the LLM behind llama.cpp's server vs in-process")
    parser.add_argument("--vision", action="store_true",
                        help="with --llm-url: a tiny VLM on transformers serve, without the "
                             "camera, with --llm-vision, and with its early prefill")
    parser.add_argument("--servers", action="store_true",
                        help="the ASR and voice in-process vs the same models behind "
                             "OpenAI-compatible speech servers (--asr-url, --tts-url)")
    parser.add_argument("--ab", metavar="SETTING=VALUE", default="",
                        help="the default cascade vs one with this CascadeSettings change")
    parser.add_argument("--against", metavar="CHECKOUT", type=Path,
                        help="this checkout's cascade vs another checkout's, interleaved")
    parser.add_argument("--serve", choices=["cascade", "naive", "tools"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--llm-url-of-server", default="", help=argparse.SUPPRESS)
    parser.add_argument("--override-of-server", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.port, args.llm_url_of_server,
                          args.override_of_server))
    elif args.ab:
        asyncio.run(main_ab(args.turns, args.ab, camera=not args.no_camera))
    elif args.against:
        asyncio.run(main_against(args.turns, args.against.resolve(), camera=not args.no_camera))
    elif args.tools:
        asyncio.run(main_tools(args.turns, camera=not args.no_camera))
    elif args.servers:
        asyncio.run(main_servers(args.turns, camera=not args.no_camera))
    elif args.llm_url and args.vision:
        asyncio.run(main_vision(args.turns))
    elif args.llm_url:
        asyncio.run(main_llm_url(args.turns, camera=not args.no_camera))
    else:
        asyncio.run(main(args.turns, camera=not args.no_camera))
