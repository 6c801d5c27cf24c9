"""A real room: the assistant's own voice, background noise and backchannels over real calls.

Real aiortc calls to the cascade (the embedded default, in this process) whose microphone is a
seeded room (tests/room.py): the person's speech + the assistant's received voice played back
through a loudspeaker path (delay 50-250 ms and RT60 0.2-0.5 s drawn per call, a numpy room
impulse response, mild clipping) + background noise. The assistant talks first: the cascade's
``--greeting``, a kiosk's long welcome (~35 s of the bundled Piper voice). Four measures:

- **echo**: calls with no person speaking, the echo at 0 dB and -10 dB relative to the
  person's level, alternating: each interrupted assistant turn is a false barge-in
  (``false_barge_ins``) over ``talk_s``, the seconds of the assistant's voice the client
  received. A call ends with the greeting (played out or cut), so a cut greeting gives less
  talk: calls go on until ``--talk-s`` is reached or ``--echo-calls`` are made. With
  ``--echo-noise babble|street`` their rooms also have that noise 10 dB under the person's
  level (then ``erle_db`` counts the noise as echo left: not the single-talk figure);
- **interruptions**: the person (the bundled Piper voice or espeak-ng en-gb+f3, alternating)
  says a real interruption over the greeting 1-4 s after its first sound reached the client,
  in a room with the echo at -10 dB (``--overlap-echo-db``; ``none``: a headset):
  ``detected`` when the greeting's end event says it was interrupted and its sound stopped
  at the client; ``detect_ms_median`` from the speech's onset to the last frame with the
  greeting's sound, on the microphone's and the receiver's sample clocks (one timeline:
  received sample r is heard at microphone sample base + r), so it includes the network,
  aiortc's receive buffer and the server's decision; ``duck_ms_median``, over interruptions
  and backchannels, from the moment the microphone sent the speech's onset to the moment
  the server's paced track sent the greeting's first lowered frame (the playout meter's
  ``ducked_at_s``; one process, one monotonic clock): the "at once" of ducking (with
  ``--duck pause``, the frame it faded out on);
- **backchannels**: "mm-hmm", "yeah", "okay", "right", "uh-huh" over the greeting in the same
  room: ``kept`` when the greeting was not interrupted by 1.5 s after the backchannel ended;
  with ``--duck pause``, ``held_ms_backchannel_median``: how long the greeting was held
  silent over each (the paced track's ``held_frames``), and ``held_s_echo``: the seconds it
  was held on the echo calls (sound that was no one's words: gaps for nothing);
- **recognition**: the cascade's Whisper (``--asr``: tiny.en, or the bundled base; offline) on
  ``--wer-requests`` requests of bench/asr_wer.py in two voices (Piper, espeak-ng en-us):
  ``wer_clean`` on the speech alone, ``wer_noisy`` on it in babble at 10 dB SNR (six
  espeak-ng voices talking at once, synthesized: no recording can be downloaded here; or
  ``--wer-noise street``), after :func:`clean_input`, the server's
  input chain before its ASR: the call's ``EchoCanceller`` with the settings a call of this
  bench gets (``ServerConfig.room_settings``), fed the utterance in 80 ms frames after
  ``WARMUP_S`` of the same room's sound (its noise, or silence) as a call would have heard
  first (the suppressor learns the noise), that lead cut off again; none when both are off.

The server's input chain (``--echo-cancel``, ``--noise-suppression``: ``auto`` is on only for
the kiosk and companion pages, and this bench's clients name none unless ``--page-mode``; the
suppressor is off unless asked for, as the server's default):
the server runs in this process, so :class:`ChainMeter` wraps
``omnicall.media.echo_canceller.EchoCanceller``'s ``far_end`` and ``near_end`` (at class
level, before the server starts) to time them and to record what each call's canceller took
and gave:

- ``cpu_pct_per_call``: the thread CPU time (``time.thread_time``) spent in those two, AEC3's
  render and capture and the suppressor with the Python framing, over the seconds of
  microphone audio they cleaned (10 ms per near-end block), summed over every call;
- ``erle_db``: echo return loss enhancement after convergence, on the echo calls (no person,
  no noise: the microphone is the echo alone): ``10 log10`` of the canceller's input power
  over its output power, on its 80 ms frames from ``CONVERGE_S`` after the echo's first
  sound, those within 30 dB of the call's loudest (the echo, not the pauses); the output's
  power is floored at an int16 sample's rounding (1/12 per sample, so a silenced output
  reads about 90 dB, not infinity). The median over the echo calls; each call's is printed.

``nan`` for both when no call runs a canceller (both off; ``erle_db`` also when no echo call
talked ``CONVERGE_S`` past its first sound). A trial whose greeting had already stopped (a
false barge-in on the echo) before the person spoke is ``spoiled``: not counted in
``detected`` or ``kept``, and printed. Last line:

``RESULT false_barge_ins=N talk_s=S barge_ins=N detected=N detect_ms_median=X duck_ms_median=X
held_s_echo=X held_ms_backchannel_median=X backchannels=N kept=N wer_clean=X wer_noisy=X
erle_db=X cpu_pct_per_call=X``

Goals: 0 false barge-ins over >= 180 s; >= 95 % of >= 20 interruptions detected,
median <= 300 ms; >= 90 % of >= 20 backchannels kept; wer_noisy <= 1.3 x wer_clean;
erle_db >= 20; cpu_pct_per_call <= 3.

    .venv/bin/python bench/room.py [--talk-s 180] [--interruptions 20] [--backchannels 20]
    .venv/bin/python bench/room.py --talk-s 60 --interruptions 6 --backchannels 6  # quick
    .venv/bin/python bench/room.py ... --echo-cancel on --noise-suppression on  # the chain
    .venv/bin/python bench/room.py ... --page-mode kiosk  # auto, as the kiosk page gets it
    .venv/bin/python bench/room.py ... --page-mode kiosk --duck pause  # held, not lowered
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.room_chain import ChainMeter, erle_db, word_errors  # noqa: E402
from omnicall.app.app_state import CALLS_KEY  # noqa: E402
from omnicall.app.call.watchdog import STALL_MESSAGE  # noqa: E402
from omnicall.app.config import ROOM_SWITCHES, ServerConfig  # noqa: E402
from omnicall.engine.cascade.settings import CascadeSettings  # noqa: E402
from omnicall.media.timebase import OPUS_FRAME_MS  # noqa: E402
from tests.room import (  # noqa: E402
    FRAME,
    RATE,
    RoomMic,
    RoomSpec,
    Said,
    assistant_turns,
    loud_frames,
    room_call,
    sound_stop,
)
from tests.utils import espeak_speech, piper_speech, running_server  # noqa: E402

GREETING = (
    "Welcome to the city museum. I am the visitor assistant, and I can help you find your way. "
    "The permanent collection is on the first and second floors, with paintings from the "
    "sixteenth century to today. The special exhibition about the history of the harbor is in "
    "the east wing, and it stays open until six in the evening. Lockers for coats and bags are "
    "next to the main stairs, and they take coins or a card. The cafe on the ground floor "
    "serves lunch until three, and there is a quiet room for families behind the gift shop. "
    "Guided tours in English start every hour at the information desk, and they take about "
    "forty five minutes. If you need a wheelchair or a stroller, please ask at the front desk. "
    "You can ask me about tickets, the exhibitions, the opening hours, or how to get to any "
    "room in the building.")
INTERRUPTIONS = (
    "Wait, stop please.", "Sorry, where are the toilets?", "Hold on, how much is a ticket?",
    "Excuse me, is the cafe open now?", "Stop, I just need the exit.",
    "Can you tell me about the harbor exhibition?", "No wait, where do I leave my coat?",
    "Hang on, when does the next tour start?")
BACKCHANNELS = ("Mm-hmm.", "Yeah.", "Okay.", "Right.", "Uh-huh.")
FIRST_AFTER_S, LAST_AFTER_S = 1.0, 4.0  # when the person speaks, after the greeting's sound
SETTLE_FRAMES = 40  # received frames after the verdict (what was sent by then is decoded)
KEPT_AFTER_S = 1.5  # a backchannel kept: the greeting still going this long after it
DETECT_BOUND_S = 3.0  # an interruption detected: the greeting's sound stopped within this
PAGE_MODES = ("none", "call", "kiosk", "companion")  # what the bench's offers say (none: no mode)
ECHO_NOISE_SNR_DB = 10.0  # --echo-noise: the noise this far under the person's level
REPLY_TIMEOUT_S = 90.0  # the server's stall watchdog: longer than the greeting plays


def person(text: str, k: int) -> np.ndarray:
    if k % 2 == 0:
        return piper_speech(text, rate=RATE, lead_s=0.0, tail_s=0.2)
    return espeak_speech(text, "en-gb+f3", rate=RATE, lead_s=0.0, tail_s=0.2)


@dataclass
class Call:
    mic: RoomMic
    client: Any

    def greeting(self) -> tuple[int | None, dict[str, Any] | None]:
        """The greeting's turn id and its end event (None until it ended)."""
        turns = assistant_turns(self.client.messages)
        start = next((m for m in turns if m.get("phase") == "start"), None)
        if start is None:
            return None, None
        end = next((m for m in turns if m.get("phase") == "end"
                    and m.get("turn") == start.get("turn")), None)
        return start.get("turn"), end

    def first_sound(self) -> int | None:
        loud = np.flatnonzero(loud_frames(self.client.received))
        return int(loud[0]) if len(loud) else None


async def until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    for _ in range(int(timeout_s / 0.02)):
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


async def open_call(url: str, spec: RoomSpec, mode: str | None = None) -> Call:
    return Call(*await room_call(url, spec, mode))


async def settle(call: Call) -> None:
    settled = len(call.client.received) + SETTLE_FRAMES
    await until(lambda: len(call.client.received) >= settled, 15)


def cut_turns(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """(assistant turns cut by the caller's side: barge-ins, turns cut by the server's stall
    watchdog: its error, then the turn's end, ``CallWatchdog.stall_messages``)."""
    cut: set[Any] = set()
    stalled: set[Any] = set()
    after_stall = False
    for m in messages:
        if m.get("type") == "error" and m.get("message") == STALL_MESSAGE:
            after_stall = True
            continue
        if m.get("type") == "turn" and m.get("role") == "assistant" \
                and m.get("phase") == "end" and m.get("interrupted"):
            (stalled if after_stall else cut).add(m.get("turn"))
        after_stall = False
    return len(cut - stalled), len(stalled)


async def echo_call(app: web.Application, url: str, spec: RoomSpec, mode: str | None
                    ) -> tuple[int, int, float, float]:
    """No person: (false barge-ins, stalls, seconds of the assistant's voice received,
    seconds it was held silent: ``--duck pause`` on sound that was no interruption)."""
    call = await open_call(url, spec, mode)
    try:
        await until(lambda: call.greeting()[1] is not None, 90)
        await settle(call)
        held = held_s(app, call)
    finally:
        await call.client.close()
    false, stalls = cut_turns(call.client.messages)
    talk_s = float(loud_frames(call.client.received).sum()) * FRAME / RATE
    return false, stalls, talk_s, held


@dataclass
class Trial:
    spoiled: bool
    cut: bool  # the greeting's end said interrupted (after the person spoke)
    detect_ms: float | None  # onset -> the greeting's last received sound (interruptions)
    duck_ms: float | None = None  # onset sent -> the server sent the greeting ducked
    held_s: float = 0.0  # the greeting held silent (``--duck pause``)


def server_session(app: web.Application, call: Call) -> Any:
    """The server's side of the call (the server runs in this process), or None."""
    session_id = next((m.get("session") for m in call.client.messages
                       if m.get("type") == "state"), None)
    return app[CALLS_KEY].sessions.get(session_id) if session_id else None


def held_s(app: web.Application, call: Call) -> float:
    """Seconds of silence the server's paced track sent in place of a held reply
    (``--duck pause``; 0 with ``lower``)."""
    session = server_session(app, call)
    return 0.0 if session is None else \
        session.output.paced_track.held_frames * OPUS_FRAME_MS / 1000


def duck_ms(app: web.Application, call: Call, said: Said) -> float | None:
    """From the moment the microphone sent the speech's onset to the moment the server's
    paced track sent the greeting's first ducked frame (its playout meter's
    ``ducked_at_s``; with ``--duck pause`` the frame it faded out on): one process, one
    monotonic clock."""
    turn_id, _ = call.greeting()
    session = server_session(app, call)
    if session is None or turn_id is None:
        return None
    record = session.output.meter.reply(turn_id)
    onset_s = call.mic.sent_at_s(said.onset)
    if record is None or record.ducked_at_s is None or record.ducked_at_s < onset_s:
        return None
    return float((record.ducked_at_s - onset_s) * 1000)


async def speak_over(app: web.Application, url: str, spec: RoomSpec, speech: np.ndarray,
                     after_s: float, wait_s: float, mode: str | None) -> Trial:
    """The person says ``speech`` ``after_s`` into the greeting's sound; the verdict is read
    ``wait_s`` after the speech ends (or at the greeting's end, if sooner)."""
    call = await open_call(url, spec, mode)
    mic = call.mic
    try:
        if not await until(lambda: call.first_sound() is not None, 60):
            raise AssertionError("no greeting")
        first = call.first_sound()
        assert first is not None
        heard = first + round(after_s * RATE / FRAME)
        await until(lambda: len(call.client.received) >= heard, 30)
        if call.greeting()[1] is not None:
            return Trial(True, False, None)
        said = mic.say(speech)
        await until(lambda: mic.sent >= said.end + wait_s * RATE
                    or call.greeting()[1] is not None, 30)
        await settle(call)
        ducked_ms = duck_ms(app, call, said)
        held = held_s(app, call)
    finally:
        await call.client.close()
    _, end = call.greeting()
    cut = end is not None and bool(end.get("interrupted"))
    detect_ms = None
    if cut and mic.base is not None:
        onset = said.onset - mic.base  # on the received stream's clock
        stop = sound_stop(loud_frames(call.client.received), onset // FRAME)
        if stop is not None and stop * FRAME - onset <= DETECT_BOUND_S * RATE:
            detect_ms = (stop * FRAME - onset) * 1000 / RATE
    return Trial(False, cut, detect_ms, ducked_ms, held)


def moments(n: int) -> list[float]:
    return [FIRST_AFTER_S + (LAST_AFTER_S - FIRST_AFTER_S) * i / max(1, n - 1) for i in range(n)]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--talk-s", type=float, default=180.0,
                        help="seconds of the assistant talking into the room, no person")
    parser.add_argument("--echo-calls", type=int, default=0,
                        help="most calls for --talk-s (0: enough for it if none is cut, +2)")
    parser.add_argument("--echo-noise", choices=("none", "babble", "street"), default="none",
                        help="background noise in the echo calls' rooms, at "
                             f"{ECHO_NOISE_SNR_DB:.0f} dB under the person's level (what "
                             "the VAD hears beside the echo: ducks or holds for nothing)")
    parser.add_argument("--interruptions", type=int, default=20)
    parser.add_argument("--backchannels", type=int, default=20)
    parser.add_argument("--wer-requests", type=int, default=24,
                        help="requests (each in 2 voices) for wer_clean / wer_noisy")
    parser.add_argument("--wer-noise", choices=("babble", "street"), default="babble",
                        help="the noise of wer_noisy, at 10 dB SNR")
    parser.add_argument("--asr", default=CascadeSettings.asr,
                        help="the server's --asr, and the model of wer_clean / wer_noisy "
                             "('' = the bundled tiny.en; base: the bundled Whisper base)")
    parser.add_argument("--asr-beam-size", type=int, default=CascadeSettings.asr_beam_size,
                        help="the server's --asr-beam-size, and that of wer_clean / wer_noisy")
    parser.add_argument("--overlap-echo-db", default="-10",
                        help="the echo's level in the interruption and backchannel rooms, "
                             "or 'none' (a headset: no echo)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--echo-cancel", choices=ROOM_SWITCHES, default="auto",
                        help="the server's --echo-cancel (auto: on only for the kiosk and "
                             "companion pages; see --page-mode)")
    parser.add_argument("--noise-suppression", choices=ROOM_SWITCHES,
                        default=ServerConfig.noise_suppression,
                        help="the server's --noise-suppression (default: the server's; auto: "
                             "as --echo-cancel)")
    parser.add_argument("--duck", choices=("lower", "pause"), default=ServerConfig.duck,
                        help="the server's --duck: the reply lowered or paused while the "
                             "caller's sound over it is heard for words")
    parser.add_argument("--page-mode", choices=PAGE_MODES, default="none",
                        help="the page mode the offers name (none: no mode, as the baseline)")
    parser.add_argument("--reply-timeout-s", type=float, default=REPLY_TIMEOUT_S,
                        help="the server's --reply-timeout-s (90 here, as in the runs on "
                             "record; its default of 20 once cancelled the ~35 s greeting "
                             "as stalled while it played out, fixed since); a stall is "
                             "printed, never counted as a false barge-in")
    args = parser.parse_args()
    overlap_echo = None if args.overlap_echo_db == "none" else float(args.overlap_echo_db)
    mode = None if args.page_mode == "none" else args.page_mode
    logging.basicConfig(level=logging.WARNING)

    config = ServerConfig(engine="cascade", ice_loopback=True, resume_window_s=0,
                          greeting=GREETING, echo_cancel=args.echo_cancel,
                          noise_suppression=args.noise_suppression,
                          reply_timeout_s=args.reply_timeout_s, duck=args.duck,
                          asr=args.asr, asr_beam_size=args.asr_beam_size)
    room = config.room_settings(mode)
    print(f"server chain: echo cancellation {'on' if room.echo_cancellation else 'off'}, "
          f"noise suppression {'on' if room.noise_suppression else 'off'} "
          f"(--echo-cancel {args.echo_cancel} --noise-suppression {args.noise_suppression}, "
          f"page mode {args.page_mode})", flush=True)
    false_barge_ins, talk_s, echo_held_s = 0, 0.0, 0.0
    erles: list[float] = []
    stalled_calls = 0
    meter = ChainMeter()
    meter.install()
    try:
        async with running_server(config) as (url, app):
            calls = args.echo_calls or math.ceil(args.talk_s / 20) + 2
            for k in range(calls):
                if talk_s >= args.talk_s:
                    break
                spec = RoomSpec.drawn(args.seed + k, echo_db=0.0 if k % 2 == 0 else -10.0,
                                      noise=args.echo_noise, snr_db=ECHO_NOISE_SNR_DB)
                meter.recording = True
                false, stalls, talk, held = await echo_call(app, url, spec, mode)
                echo_held_s += held
                meter.recording = False
                call_erle = [erle_db(i, o) for i, o in meter.take()]
                erles += [e for e in call_erle if not math.isnan(e)]
                false_barge_ins, talk_s = false_barge_ins + false, talk_s + talk
                stalled_calls += stalls > 0
                shown = ", ".join(f"ERLE {e:.1f} dB" for e in call_erle) or "no canceller"
                stalled = f", cut as stalled by the server's watchdog {stalls}x" if stalls \
                    else ""
                print(f"echo {spec.describe()}: {talk:.1f} s of talk, {false} false "
                      f"barge-in(s){stalled}, {shown}, held {held:.2f} s", flush=True)
            outcome = await trials(app, url, args, overlap_echo, mode)
    finally:
        meter.remove()
    cpu_pct = meter.cpu_pct()
    print(f"chain: {len(meter.cancellers)} call(s) with a canceller, {meter.call_s():.1f} s of "
          f"microphone audio cleaned, {meter.cpu_s:.2f} s of CPU in it; {meter.stats()}",
          flush=True)
    wer_clean, wer_noisy = word_errors(args.wer_requests, room, args.asr, args.wer_noise,
                                       args.asr_beam_size) \
        if args.wer_requests else (math.nan, math.nan)
    detect_ms = outcome.detect_ms
    median = statistics.median(detect_ms) if detect_ms else math.nan
    duck = statistics.median(outcome.duck_ms) if outcome.duck_ms else math.nan
    held_bc = statistics.median(outcome.held_ms) if outcome.held_ms else math.nan
    erle = statistics.median(erles) if erles else math.nan
    print(f"asked: talk_s={args.talk_s:.0f} interruptions={args.interruptions} "
          f"backchannels={args.backchannels}; spoiled: {outcome.spoiled}; echo calls whose "
          f"greeting the stall watchdog cut: {stalled_calls}")
    print(f"RESULT false_barge_ins={false_barge_ins} talk_s={talk_s:.1f} "
          f"barge_ins={outcome.barge_ins} detected={len(detect_ms)} "
          f"detect_ms_median={median:.0f} duck_ms_median={duck:.0f} "
          f"held_s_echo={echo_held_s:.2f} held_ms_backchannel_median={held_bc:.0f} "
          f"backchannels={outcome.backchannels} "
          f"kept={outcome.kept} wer_clean={wer_clean:.3f} wer_noisy={wer_noisy:.3f} "
          f"erle_db={erle:.1f} cpu_pct_per_call={cpu_pct:.2f}")


@dataclass
class Outcome:
    barge_ins: int = 0
    detect_ms: list[float] = field(default_factory=list)  # one per detected interruption
    duck_ms: list[float] = field(default_factory=list)  # one per ducked trial
    held_ms: list[float] = field(default_factory=list)  # one per backchannel not spoiled
    backchannels: int = 0
    kept: int = 0
    spoiled: dict[str, int] = field(
        default_factory=lambda: {"interruptions": 0, "backchannels": 0})


async def trials(app: web.Application, url: str, args: argparse.Namespace,
                 overlap_echo: float | None, mode: str | None) -> Outcome:
    """The interruptions, then the backchannels, over the greeting in the overlap room."""
    outcome = Outcome()
    spoiled = outcome.spoiled
    for k, after_s in enumerate(moments(args.interruptions)):
        spec = RoomSpec.drawn(args.seed + 1000 + k, echo_db=overlap_echo)
        text = INTERRUPTIONS[k % len(INTERRUPTIONS)]
        trial = await speak_over(app, url, spec, person(text, k), after_s, wait_s=1.0,
                                 mode=mode)
        if trial.spoiled:
            spoiled["interruptions"] += 1
        else:
            outcome.barge_ins += 1
            outcome.duck_ms += [] if trial.duck_ms is None else [trial.duck_ms]
            if trial.detect_ms is not None:
                outcome.detect_ms.append(trial.detect_ms)
        verdict = "spoiled (the greeting had stopped)" if trial.spoiled else \
            f"detected in {trial.detect_ms:.0f} ms" if trial.detect_ms is not None else \
            "cut, sound not stopped in bound" if trial.cut else "missed"
        print(f"interruption {text!r} at {after_s:.1f} s, {spec.describe()}: {verdict}",
              flush=True)
    for k, after_s in enumerate(moments(args.backchannels)):
        spec = RoomSpec.drawn(args.seed + 2000 + k, echo_db=overlap_echo)
        text = BACKCHANNELS[k % len(BACKCHANNELS)]
        trial = await speak_over(app, url, spec, person(text, k), after_s,
                                 wait_s=KEPT_AFTER_S, mode=mode)
        if trial.spoiled:
            spoiled["backchannels"] += 1
        else:
            outcome.backchannels += 1
            outcome.kept += not trial.cut
            outcome.held_ms.append(trial.held_s * 1000)
            outcome.duck_ms += [] if trial.duck_ms is None else [trial.duck_ms]
        verdict = "spoiled (the greeting had stopped)" if trial.spoiled else \
            "cut" if trial.cut else f"kept (held {trial.held_s * 1000:.0f} ms)"
        print(f"backchannel {text!r} at {after_s:.1f} s, {spec.describe()}: {verdict}",
              flush=True)
    return outcome


if __name__ == "__main__":
    asyncio.run(main())
