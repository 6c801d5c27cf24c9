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
  talk: calls go on until ``--talk-s`` is reached or ``--echo-calls`` are made;
- **interruptions**: the person (the bundled Piper voice or espeak-ng en-gb+f3, alternating)
  says a real interruption over the greeting 1-4 s after its first sound reached the client,
  in a room with the echo at -10 dB (``--overlap-echo-db``; ``none``: a headset):
  ``detected`` when the greeting's end event says it was interrupted and its sound stopped
  at the client; ``detect_ms_median`` from the speech's onset to the last frame with the
  greeting's sound, on the microphone's and the receiver's sample clocks (one timeline:
  received sample r is heard at microphone sample base + r), so it includes the network,
  aiortc's receive buffer and the server's decision;
- **backchannels**: "mm-hmm", "yeah", "okay", "right", "uh-huh" over the greeting in the same
  room: ``kept`` when the greeting was not interrupted by 1.5 s after the backchannel ended;
- **recognition**: Whisper tiny.en (the cascade's, offline) on ``--wer-requests`` requests of
  bench/asr_wer.py in two voices (Piper, espeak-ng en-us): ``wer_clean`` on the speech
  alone, ``wer_noisy`` on it in babble at 10 dB SNR (six espeak-ng voices talking at once,
  synthesized: no recording can be downloaded here), after :func:`clean_input`, the server's
  input chain before its ASR (none today).

A trial whose greeting had already stopped (a false barge-in on the echo) before the person
spoke is ``spoiled``: not counted in ``detected`` or ``kept``, and printed.
``erle_db`` and ``cpu_pct_per_call`` are the echo canceller's and the input chain's: ``nan``
while the server has none. Last line:

``RESULT false_barge_ins=N talk_s=S barge_ins=N detected=N detect_ms_median=X backchannels=N
kept=N wer_clean=X wer_noisy=X erle_db=X cpu_pct_per_call=X``

Goals (issue 33): 0 false barge-ins over >= 180 s; >= 95 % of >= 20 interruptions detected,
median <= 300 ms; >= 90 % of >= 20 backchannels kept; wer_noisy <= 1.3 x wer_clean;
erle_db >= 20; cpu_pct_per_call <= 3.

    .venv/bin/python bench/room.py [--talk-s 180] [--interruptions 20] [--backchannels 20]
    .venv/bin/python bench/room.py --talk-s 60 --interruptions 6 --backchannels 6  # quick
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnicall.app.config import ServerConfig  # noqa: E402
from tests.room import (  # noqa: E402
    FRAME,
    RATE,
    Room,
    RoomMic,
    RoomSpec,
    assistant_turns,
    loud_frames,
    sound_stop,
)
from tests.utils import connect_client, espeak_speech, piper_speech, running_server  # noqa: E402

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


def clean_input(audio16k: np.ndarray) -> np.ndarray:
    """The server's input chain before its ASR (echo cancellation, noise suppression): none
    today, so the audio as it came."""
    return audio16k


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


async def open_call(url: str, spec: RoomSpec) -> Call:
    mic = RoomMic(Room(spec), record=False)
    client = await connect_client(url, mic)
    mic.hear(client.received)
    return Call(mic, client)


async def settle(call: Call) -> None:
    settled = len(call.client.received) + SETTLE_FRAMES
    await until(lambda: len(call.client.received) >= settled, 15)


async def echo_call(url: str, spec: RoomSpec) -> tuple[int, float]:
    """No person: (false barge-ins, seconds of the assistant's voice received)."""
    call = await open_call(url, spec)
    try:
        await until(lambda: call.greeting()[1] is not None, 90)
        await settle(call)
    finally:
        await call.client.close()
    false = sum(1 for m in assistant_turns(call.client.messages)
                if m.get("phase") == "end" and m.get("interrupted"))
    talk_s = float(loud_frames(call.client.received).sum()) * FRAME / RATE
    return false, talk_s


@dataclass
class Trial:
    spoiled: bool
    cut: bool  # the greeting's end said interrupted (after the person spoke)
    detect_ms: float | None  # onset -> the greeting's last received sound (interruptions)


async def speak_over(url: str, spec: RoomSpec, speech: np.ndarray, after_s: float,
                     wait_s: float) -> Trial:
    """The person says ``speech`` ``after_s`` into the greeting's sound; the verdict is read
    ``wait_s`` after the speech ends (or at the greeting's end, if sooner)."""
    call = await open_call(url, spec)
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
    return Trial(False, cut, detect_ms)


def moments(n: int) -> list[float]:
    return [FIRST_AFTER_S + (LAST_AFTER_S - FIRST_AFTER_S) * i / max(1, n - 1) for i in range(n)]


def word_errors(requests: int) -> tuple[float, float]:
    from bench.asr_wer import REQUESTS
    from omnicall.engine.cascade.asr import WhisperAsr
    from tests.cascade_fixtures import edit_distance, words

    asr = WhisperAsr()
    babble = Room(RoomSpec(seed=100, echo_db=None, noise="babble", snr_db=10.0))
    quiet = Room(RoomSpec(echo_db=None))
    errors = {"clean": 0, "noisy": 0}
    total = 0
    for i, text in enumerate(REQUESTS[:requests]):
        for voice, speech in (("piper", piper_speech(text, lead_s=0.3, tail_s=0.3)),
                              ("espeak", espeak_speech(text, "en-us", lead_s=0.3,
                                                       tail_s=0.3))):
            # each utterance over another stretch of the crowd
            noisy = babble.render(speech, rate=16_000, noise_from=i * 37_000).mic
            clean = quiet.render(speech, rate=16_000).mic
            total += len(words(text))
            for kind, audio in (("clean", clean), ("noisy", noisy)):
                heard = asr.transcribe(clean_input(audio))
                errors[kind] += edit_distance(words(text), words(heard))
            print(f"  wer {voice:>6}: {text!r}", flush=True)
    return errors["clean"] / total, errors["noisy"] / total


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--talk-s", type=float, default=180.0,
                        help="seconds of the assistant talking into the room, no person")
    parser.add_argument("--echo-calls", type=int, default=0,
                        help="most calls for --talk-s (0: enough for it if none is cut, +2)")
    parser.add_argument("--interruptions", type=int, default=20)
    parser.add_argument("--backchannels", type=int, default=20)
    parser.add_argument("--wer-requests", type=int, default=24,
                        help="requests (each in 2 voices) for wer_clean / wer_noisy")
    parser.add_argument("--overlap-echo-db", default="-10",
                        help="the echo's level in the interruption and backchannel rooms, "
                             "or 'none' (a headset: no echo)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    overlap_echo = None if args.overlap_echo_db == "none" else float(args.overlap_echo_db)
    logging.basicConfig(level=logging.WARNING)

    config = ServerConfig(engine="cascade", ice_loopback=True, resume_window_s=0,
                          greeting=GREETING)
    false_barge_ins, talk_s = 0, 0.0
    detected, detect_ms, barge_ins, spoiled = 0, [], 0, {"interruptions": 0, "backchannels": 0}
    kept, backchannels = 0, 0
    async with running_server(config) as (url, _app):
        calls = args.echo_calls or math.ceil(args.talk_s / 30) + 2
        for k in range(calls):
            if talk_s >= args.talk_s:
                break
            spec = RoomSpec.drawn(args.seed + k, echo_db=0.0 if k % 2 == 0 else -10.0)
            false, talk = await echo_call(url, spec)
            false_barge_ins, talk_s = false_barge_ins + false, talk_s + talk
            print(f"echo {spec.describe()}: {talk:.1f} s of talk, {false} false barge-in(s)",
                  flush=True)
        for k, after_s in enumerate(moments(args.interruptions)):
            spec = RoomSpec.drawn(args.seed + 1000 + k, echo_db=overlap_echo)
            text = INTERRUPTIONS[k % len(INTERRUPTIONS)]
            trial = await speak_over(url, spec, person(text, k), after_s, wait_s=1.0)
            if trial.spoiled:
                spoiled["interruptions"] += 1
            else:
                barge_ins += 1
                if trial.detect_ms is not None:
                    detected += 1
                    detect_ms.append(trial.detect_ms)
            verdict = "spoiled (the greeting had stopped)" if trial.spoiled else \
                f"detected in {trial.detect_ms:.0f} ms" if trial.detect_ms is not None else \
                "cut, sound not stopped in bound" if trial.cut else "missed"
            print(f"interruption {text!r} at {after_s:.1f} s, {spec.describe()}: {verdict}",
                  flush=True)
        for k, after_s in enumerate(moments(args.backchannels)):
            spec = RoomSpec.drawn(args.seed + 2000 + k, echo_db=overlap_echo)
            text = BACKCHANNELS[k % len(BACKCHANNELS)]
            trial = await speak_over(url, spec, person(text, k), after_s, wait_s=KEPT_AFTER_S)
            if trial.spoiled:
                spoiled["backchannels"] += 1
            else:
                backchannels += 1
                kept += not trial.cut
            verdict = "spoiled (the greeting had stopped)" if trial.spoiled else \
                "cut" if trial.cut else "kept"
            print(f"backchannel {text!r} at {after_s:.1f} s, {spec.describe()}: {verdict}",
                  flush=True)
    wer_clean, wer_noisy = word_errors(args.wer_requests) if args.wer_requests else \
        (math.nan, math.nan)
    median = statistics.median(detect_ms) if detect_ms else math.nan
    print(f"asked: talk_s={args.talk_s:.0f} interruptions={args.interruptions} "
          f"backchannels={args.backchannels}; spoiled: {spoiled}")
    print(f"RESULT false_barge_ins={false_barge_ins} talk_s={talk_s:.1f} barge_ins={barge_ins} "
          f"detected={detected} detect_ms_median={median:.0f} backchannels={backchannels} "
          f"kept={kept} wer_clean={wer_clean:.3f} wer_noisy={wer_noisy:.3f} erle_db=nan "
          f"cpu_pct_per_call=nan")


if __name__ == "__main__":
    asyncio.run(main())
