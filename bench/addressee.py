"""Who it answers at a busy kiosk: the person facing its camera, and nobody else.

Real aiortc calls to the cascade (the embedded default, in this process) that say they are the
kiosk page (offer ``mode``: ``kiosk``; ``--addressee auto`` is the camera there). Each call's
microphone is a seeded kiosk room (tests/room.py: the assistant's own voice back at -6 dB
through a loudspeaker path, street noise 20 dB under the person); its camera is a real face at kiosk
distance (tests/talking_face.py) whose mouth moves with what the person in front says, and
with nothing else. Each round, in one call:

1. the person asks a question (the bundled Piper voice): ``taken`` when an answer starts;
2. a bystander says a sentence while nothing plays, 6 dB under the person: someone off camera,
   the same with the person looking away (no face turned to the camera), or a TV-like voice
   (espeak-ng, in turn): ``answered_bystanders`` when an answer starts for it;
3. the person asks again, and a bystander speaks over the answer 1 s into its sound:
   ``cut_by_bystanders`` when the answer's end says it was interrupted.

Then, in a call of its own with no camera (no addressee to watch: every voice is answered), the
person asks once more. ``added_ms``: the median of the person's turns with the camera watched,
less that without it (end of speech to the answer's first sound at the client, on the
microphone's and the receiver's sample clocks), so it holds what the watching and the camera's
looks cost the answer.

``RESULT user_turns=N taken=N bystander_turns=N answered_bystanders=N cut_by_bystanders=N
added_ms=X``. Goals: taken >= 95 % of user_turns; 0 answered and 0 cut over >= 20 bystander
sentences; added_ms <= 50.

    .venv/bin/python bench/addressee.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnicall.app.config import ServerConfig  # noqa: E402
from omnicall.client import connect  # noqa: E402
from tests.room import (  # noqa: E402
    FRAME,
    RATE,
    Room,
    RoomMic,
    RoomSpec,
    Said,
    active_rms,
    assistant_turns,
    loud_frames,
)
from tests.talking_face import FaceCamera  # noqa: E402
from tests.utils import espeak_speech, piper_speech, running_server  # noqa: E402

QUESTIONS = [
    "Where is the special exhibition?", "How much is a ticket?", "When does the cafe close?",
    "Is there a cloakroom here?", "What time does the museum close?",
    "Where can I buy a guide book?", "Are dogs allowed inside?", "Where are the toilets?",
    "Is there a lift to the second floor?", "Can I take photos in the galleries?",
    "Where does the guided tour start?", "Do you have an audio guide?",
]
BYSTANDER_LINES = [
    "Did you see the game last night?", "I think we should get coffee first.",
    "My sister called me this morning.", "Look, the bus is already here.",
    "We could meet them at six tomorrow.", "That jacket looks really warm.",
    "I left my umbrella in the car.", "The traffic was terrible today.",
    "Shall we have lunch after this?", "It is much colder than yesterday.",
    "He said the film was too long.", "I need to call the office later.",
]
KINDS = ("off camera", "looking away", "tv")
BYSTANDER_DB = -6.0  # a bystander's level, re the person's
OVER_AFTER_S = 1.0  # the bystander speaks over the answer this long into its sound
ANSWER_WAIT_S = 20.0  # an answer starts within this, or it was not taken
QUIET_WAIT_S = 6.0  # a bystander's sentence answered: an answer starts within this after it


@dataclass
class Kiosk:
    """One call: its room's microphone, its camera, and what its person says (the camera's
    mouth follows only that)."""

    mic: RoomMic
    client: Any
    person: list[Said] = field(default_factory=list)
    facing: bool = True

    def openness(self) -> float:
        """How open the person's mouth is now: their speech's loudness at the microphone's
        current sample, against its active level."""
        m = self.mic.sent
        for said in self.person:
            if said.start <= m < said.end:
                window = said.samples[max(0, m - said.start - 960):m - said.start + 960]
                level = active_rms(said.samples)
                return float(min(1.0, np.sqrt(np.mean(window ** 2)) / max(level, 1.0)))
        return 0.0

    def answers(self) -> list[dict[str, Any]]:
        return [m for m in assistant_turns(self.client.messages) if m.get("phase") == "start"]

    def ends(self) -> list[dict[str, Any]]:
        return [m for m in assistant_turns(self.client.messages) if m.get("phase") == "end"]

    def first_sound_ms(self, said: Said) -> float | None:
        """The last sound of ``said`` (within 20 dB of its level) to the first received frame
        with the assistant's voice after it, on the microphone's clock (received sample r is
        heard at mic sample base + r)."""
        base = self.mic.base
        if base is None:
            return None
        level = active_rms(said.samples)
        voiced = np.flatnonzero(np.abs(said.samples) > level * 0.1)  # within 20 dB of it
        end = said.start + int(voiced[-1]) + 1 if len(voiced) else said.end
        loud = np.flatnonzero(loud_frames(self.client.received))
        after = [k for k in loud if base + k * FRAME >= end]
        return None if not after else (base + after[0] * FRAME - end) * 1000 / RATE


async def until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    for _ in range(int(timeout_s / 0.02)):
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


async def open_kiosk(url: str, seed: int, camera: bool) -> Kiosk:
    spec = RoomSpec.drawn(seed, echo_db=-6.0, noise="street", snr_db=20.0)
    mic = RoomMic(Room(spec), record=False)
    kiosk = Kiosk(mic, None)
    video = FaceCamera(kiosk.openness, lambda: kiosk.facing) if camera else None
    kiosk.client = await connect(url, mic, video, body={"mode": "kiosk"})
    mic.hear(kiosk.client.received)
    await asyncio.sleep(1.5)  # connected, the echo canceller's first second
    return kiosk


def speech(text: str, voice: str = "piper") -> np.ndarray:
    if voice == "piper":
        return piper_speech(text, rate=RATE, lead_s=0.0, tail_s=0.2)
    return espeak_speech(text, voice, rate=RATE, lead_s=0.0, tail_s=0.2)


async def ask(kiosk: Kiosk, question: str) -> tuple[Said, bool]:
    """The person asks: (what they said, whether an answer started)."""
    before = len(kiosk.answers())
    said = kiosk.mic.say(speech(question))
    kiosk.person.append(said)
    taken = await until(lambda: len(kiosk.answers()) > before, ANSWER_WAIT_S)
    return said, taken


async def answered_out(kiosk: Kiosk) -> None:
    """Until the last answer ended (and a moment of quiet after it)."""
    await until(lambda: len(kiosk.ends()) >= len(kiosk.answers()), 60)
    await asyncio.sleep(1.0)


def bystander(kind: str, line: str) -> np.ndarray:
    return speech(line, "en-us+m3" if kind == "tv" else "en-gb+f3")


async def round_(kiosk: Kiosk, k: int, out: dict[str, Any]) -> None:
    kind = KINDS[k % len(KINDS)]
    said, taken = await ask(kiosk, QUESTIONS[(2 * k) % len(QUESTIONS)])
    out["user_turns"] += 1
    out["taken"] += taken
    await answered_out(kiosk)
    latency = kiosk.first_sound_ms(said) if taken else None
    if latency is not None:
        out["camera_ms"].append(latency)
    # a bystander, nothing playing
    before = len(kiosk.answers())
    kiosk.facing = kind != "looking away"
    line = kiosk.mic.say(bystander(kind, BYSTANDER_LINES[(2 * k) % len(BYSTANDER_LINES)]),
                         level_db=BYSTANDER_DB)
    await until(lambda: kiosk.mic.sent >= line.end, 20)
    answered = await until(lambda: len(kiosk.answers()) > before, QUIET_WAIT_S)
    out["bystander_turns"] += 1
    out["answered_bystanders"] += answered
    print(f"round {k}: question {'taken' if taken else 'NOT TAKEN'}"
          f"{f' ({latency:.0f} ms)' if latency is not None else ''}; bystander ({kind}) "
          f"{'ANSWERED' if answered else 'not answered'}", flush=True)
    if answered:
        await answered_out(kiosk)
    kiosk.facing = True
    # the person asks again; a bystander speaks over the answer
    said, taken = await ask(kiosk, QUESTIONS[(2 * k + 1) % len(QUESTIONS)])
    out["user_turns"] += 1
    out["taken"] += taken
    if not taken:
        return
    base = kiosk.mic.base or 0
    heard = await until(lambda: any(base + f * FRAME >= said.end for f in np.flatnonzero(
        loud_frames(kiosk.client.received))), 20)
    if not heard:
        return
    await asyncio.sleep(OVER_AFTER_S)
    ends = len(kiosk.ends())
    if ends >= len(kiosk.answers()):
        print(f"round {k}: the answer ended before the bystander could speak over it")
        return
    turn = kiosk.answers()[-1].get("turn")
    kiosk.mic.say(bystander(kind, BYSTANDER_LINES[(2 * k + 1) % len(BYSTANDER_LINES)]),
                  level_db=BYSTANDER_DB)
    await answered_out(kiosk)
    end = next((m for m in kiosk.ends() if m.get("turn") == turn), {})
    cut = bool(end.get("interrupted"))
    out["bystander_turns"] += 1
    out["cut_by_bystanders"] += cut
    print(f"round {k}: question {'taken' if taken else 'NOT TAKEN'}; bystander ({kind}) over "
          f"the answer: {'CUT IT' if cut else 'answer went on'}", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10,
                        help="rounds (2 questions, 2 bystander sentences each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out: dict[str, Any] = {"user_turns": 0, "taken": 0, "bystander_turns": 0,
                           "answered_bystanders": 0, "cut_by_bystanders": 0, "camera_ms": [],
                           "plain_ms": []}
    cfg = ServerConfig(engine="cascade", ice_loopback=True)
    async with running_server(cfg) as (url, _app):
        for k in range(args.rounds):
            kiosk = await open_kiosk(url, args.seed + k, camera=True)
            try:
                await round_(kiosk, k, out)
            finally:
                await kiosk.client.hang_up()
            plain = await open_kiosk(url, args.seed + 100 + k, camera=False)
            try:
                said, taken = await ask(plain, QUESTIONS[(2 * k) % len(QUESTIONS)])
                await answered_out(plain)
                latency = plain.first_sound_ms(said) if taken else None
                if latency is not None:
                    out["plain_ms"].append(latency)
                    print(f"round {k}: no camera: {latency:.0f} ms", flush=True)
            finally:
                await plain.client.hang_up()
    camera = statistics.median(out["camera_ms"]) if out["camera_ms"] else float("nan")
    plain = statistics.median(out["plain_ms"]) if out["plain_ms"] else float("nan")
    print(f"the person's first questions: camera watched {camera:.0f} ms median "
          f"(n={len(out['camera_ms'])}), no camera {plain:.0f} ms (n={len(out['plain_ms'])})")
    print("goals: taken >= 95 % of user_turns; 0 answered and 0 cut over >= 20 bystander "
          "sentences; added_ms <= 50")
    print(f"RESULT user_turns={out['user_turns']} taken={out['taken']} "
          f"bystander_turns={out['bystander_turns']} "
          f"answered_bystanders={out['answered_bystanders']} "
          f"cut_by_bystanders={out['cut_by_bystanders']} added_ms={camera - plain:.0f}")


if __name__ == "__main__":
    asyncio.run(main())
