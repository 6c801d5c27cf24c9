"""How many camera frames go to the model on a call, against one a second.

A two-minute call, about 30 % of it the caller speaking (turns of 2-6 s, a fixed schedule
from ``--seed``), run through the media plane's own video path and the shared frame policy:

- camera frames arrive at the page's send rate (5 fps) and go through the server's
  :class:`~omnicall.media.ingest.VideoIngestCore` (sampled at ``--video-fps``, 2, onto the
  80 ms audio clock, scaled to fit 448 x 336 by swscale), its :class:`VideoRing` and the
  :class:`Aligner`, which hands each 80 ms unit its frame, exactly as in a call;
- each unit's frame goes to :class:`~omnicall.engine.conversation.camera.Camera` ``see`` with
  whether the caller is speaking, and each turn's end to ``end_turn`` with its words (every
  third turn asks to look: "what am I holding in my hand?").

``frames_naive`` is one frame a second for the whole call (what a fixed-rate sender would
send); ``ratio`` is ``frames_sent / frames_naive`` (goal: <= 0.25, while every turn still
carries a frame from its last second: ``turns_fresh == turns``). ``bytes_per_min`` and
``kbps`` are the JPEG bytes that went to the model (at the policy's sizes and quality),
``naive_kbps`` the same for the naive sender's frames at the normal size.

The footage (``--source``):

- ``photo`` (default): camera footage built from a real photograph
  (``tests/data/astronaut.jpg``, NASA, public domain): a 640 x 480 window on it, ``--mount
  hand`` (default: a phone held in the hand) moved by hand tremor (a few px at 2-8 Hz and
  +-0.3 degrees) and slow drift (+-12 px), with two re-aims of the camera during quiet
  stretches; ``--mount desk`` (a laptop's camera) moved only by the caller shifting in the
  chair (+-4 px over 8 s); both with exposure drift (+-6 % over 40 s) and two auto-exposure
  steps, Gaussian sensor noise (sigma 4), and an object (a patch cut from the photo, masked
  round) brought into view during each turn that asks to look and taken away after it;
- ``video``: a real video file (``--video PATH``, anything PyAV decodes), taken at the
  page's 5 fps and looped to fill the call. Tried with ``tools/mtmd/test-3.mp4`` of the
  llama.cpp sources that the pinned ``llama_cpp_python`` sdist ships (a 10 s, 720 x 358 clip
  of computer animation with a cut every 1-2 s: a hard case, nothing like a webcam); get it
  with ``pip download --no-deps --no-binary :all: llama_cpp_python==0.3.36`` and
  ``tar xzf llama_cpp_python-0.3.36.tar.gz --wildcards '*/tools/mtmd/test-3.mp4'``.

``--speaking-fps`` and ``--duplicate-mad`` try other frame-policy settings (defaults: the
policy's own).

Last line: ``RESULT frames_sent=N frames_naive=N ratio=X dup_skipped=N bytes_per_min=N
kbps=X naive_kbps=X turns=N turns_fresh=N speaking=X source=NAME speaking_fps=X
duplicate_mad=X``.

    .venv/bin/python bench/vision.py [--source photo --mount hand|desk]
        [--source video --video PATH] [--seconds 120] [--speaking-fps F] [--duplicate-mad D]

``--offline``: what the offline default (no model that sees) makes out of the camera, over
the scenes of ``tests/scenes.py`` with known answers (held objects in ten colours on three
walls, eight printed labels, people near and far, none to three): each scene is the camera
of a call for a 2 s turn (its frames through the ingest, ring and aligner as above, then the
frame policy), and at the turn's end the real look (``engine/cascade/camera/looker.py``: faces,
colours, what changed; the text read by the PP-OCR models when the words ask to read) on its
own worker, as in a call. ``colour_right``: the held object's colour is the first name of the
"thing in the middle" fact said (of ``colour_scenes``); ``text_right``: the lines read are
the label's (of ``text_scenes``); ``people_right``: the people fact said has the right count
(of all scenes). ``look_ms_*``: what the look adds at the end of a turn whose words do not
ask to read (the frame policy's pick, its JPEG, the look); ``read_ms_*``: the same with the
text read (goals: colour and people >= 90 %, text >= 80 %, look <= 150 ms, read <= 1 s).
Last line: ``RESULT scenes=N colour_right=N text_right=N people_right=N look_ms_p50=X
look_ms_p95=X read_ms_p50=X read_ms_p95=X colour_scenes=N text_scenes=N``.

    .venv/bin/python bench/vision.py --offline
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.footage import LOOK, SEND_FPS, HandHeldPhoto, Turn  # noqa: E402
from omnicall.engine.conversation.camera import FRESH_WITHIN_S, Camera  # noqa: E402
from omnicall.engine.conversation.frame_policy import encode_jpeg  # noqa: E402
from omnicall.engine.conversation.settings import FramePolicySettings  # noqa: E402
from omnicall.media.aligner import Aligner  # noqa: E402
from omnicall.media.audio_ring import AudioRing  # noqa: E402
from omnicall.media.ingest import VideoIngestCore  # noqa: E402
from omnicall.media.timebase import FRAME_MS, INPUT_FRAME_SAMPLES, VIDEO_TIME_BASE  # noqa: E402
from omnicall.media.video_ring import VideoRing  # noqa: E402

INGEST_SIZE = (448, 336)  # the server's --video-width / --video-height
UNIT_S = FRAME_MS / 1000
WORDS = ("Tell me about the weather tomorrow.", "And what about the weekend?")

Rgb = npt.NDArray[np.uint8]


def schedule(seconds: float, speaking: float, seed: int) -> list[Turn]:
    """Turns of 2-6 s filling ``speaking`` of the call, with quiet gaps of random share
    between them (and before the first, after the last)."""
    rng = np.random.default_rng(seed)
    n = max(1, round(seconds * speaking / 4.0))  # 4 s a turn on average
    lengths = rng.uniform(2.0, 6.0, n)
    lengths = np.clip(lengths * (seconds * speaking / lengths.sum()), 2.0, 6.0)
    gaps = rng.uniform(0.5, 1.5, n + 1)
    gaps *= (seconds - lengths.sum()) / gaps.sum()
    turns, at = [], 0.0
    for i in range(n):
        at += float(gaps[i])
        words = LOOK if i % 3 == 1 else WORDS[i % 2]
        turns.append(Turn(round(at, 2), round(at + float(lengths[i]), 2), words))
        at += float(lengths[i])
    return turns


def photo_frames(footage: HandHeldPhoto, seconds: float) -> Iterator[tuple[float, Rgb]]:
    for k in range(int(seconds * SEND_FPS)):
        t = k / SEND_FPS
        yield t, footage.frame(t)


def video_frames(path: Path, seconds: float) -> Iterator[tuple[float, Rgb]]:
    """The file's frames at the page's send rate, looped until ``seconds``."""
    due, offset = 0.0, 0.0
    while due < seconds:
        last = offset
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            for frame in container.decode(stream):
                if frame.pts is None or stream.time_base is None:
                    continue
                t = offset + float(frame.pts * stream.time_base)
                last = t
                if t + 1e-6 >= due:
                    yield due, frame.to_ndarray(format="rgb24")
                    due += 1 / SEND_FPS
                    if due >= seconds:
                        return
        if last <= offset:
            raise SystemExit(f"{path}: no video frames")
        offset = last + 1 / SEND_FPS


def wire_frame(image: Rgb, t: float) -> av.VideoFrame:
    """A decoded camera frame as the server's VP8 decoder hands it over (yuv420p, 90 kHz)."""
    frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuv420p")
    frame.pts = round(t * 90_000)
    frame.time_base = VIDEO_TIME_BASE
    return frame


#: what the caller says in each kind of scene (a label: a question that asks to read)
OFFLINE_WORDS = {"colour": "What colour is this?", "text": "What does this say?",
                 "people": "Is anyone behind me?"}
PEOPLE_COUNT = re.compile(r"^(no one|one person|(\d+) people)")


def people_said(facts: tuple[str, ...]) -> int | None:
    """The count in the people fact said (None: none said)."""
    for fact in facts:
        found = PEOPLE_COUNT.match(fact)
        if found:
            return 0 if found[1] == "no one" else 1 if found[1] == "one person" else \
                int(found[2])
    return None


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


async def offline(settings: FramePolicySettings) -> None:
    """The ``--offline`` bench (see the module docstring)."""
    import asyncio
    import time

    from omnicall.engine.cascade.camera.faces import FaceFacts
    from omnicall.engine.cascade.camera.looker import Looker
    from omnicall.engine.cascade.camera.text_reader import TextReader
    from omnicall.engine.cascade.settings import CascadeSettings
    from tests.scenes import scenes

    min_confidence = CascadeSettings.camera_fact_confidence
    looker = Looker(FaceFacts(min_confidence), TextReader(min_confidence=min_confidence),
                    read_timeout_s=CascadeSettings.camera_read_timeout_s)
    await asyncio.get_running_loop().run_in_executor(
        None, looker.warm_up, np.zeros((336, 448, 3), np.uint8))
    colour_right = text_right = people_right = colour_scenes = text_scenes = 0
    look_ms: list[float] = []
    read_ms: list[float] = []
    all_scenes = scenes()
    for scene in all_scenes:
        kind = "text" if scene.text else "colour" if scene.colour else "people"
        words = OFFLINE_WORDS[kind]
        camera = Camera(settings)
        audio, ring = AudioRing(), VideoRing()
        ingest = VideoIngestCore(ring, 2.0, INGEST_SIZE, lambda: Fraction(0))
        aligner = Aligner(audio, ring)
        for index in range(int(2.0 / UNIT_S)):  # a 2 s turn before a still camera
            now = index * UNIT_S
            if index % 3 == 0:
                ingest.feed(wire_frame(scene.image, now))
            audio.write(np.zeros(INPUT_FRAME_SAMPLES, np.int16))
            unit = aligner.next_unit()
            if unit is not None and unit.video is not None:
                camera.see(unit.video, now, speaking=True)
        started = time.perf_counter()
        sighting = camera.end_turn(2.0, words)  # the turn's end: the pick, then the look
        assert sighting is not None
        read = sighting.selection.sharp and kind == "text"
        sight = await looker.look(sighting.selection.image, None, read)
        took_ms = (time.perf_counter() - started) * 1000
        (read_ms if read else look_ms).append(took_ms)
        said = tuple(f.text for f in sight.said(min_confidence)) if sight else ()
        if scene.colour:
            colour_scenes += 1
            held = next((f for f in said if f.startswith("the thing in the middle is mostly ")),
                        "")
            colour_right += held.removeprefix("the thing in the middle is mostly ").split(
                " and ")[0] == scene.colour
        if scene.text:
            text_scenes += 1
            lines = tuple(line.text for line in sight.lines) if sight else ()
            text_right += lines == scene.text
        people = people_said(said)
        people_right += people == scene.people
        print(f"{scene.name[:44]:44s} {took_ms:6.0f} ms{' read' if read else '     '} | "
              + "; ".join(said), flush=True)
    looker.close()
    print(f"RESULT scenes={len(all_scenes)} colour_right={colour_right} "
          f"text_right={text_right} people_right={people_right} "
          f"look_ms_p50={percentile(look_ms, 50):.0f} look_ms_p95={percentile(look_ms, 95):.0f} "
          f"read_ms_p50={percentile(read_ms, 50):.0f} read_ms_p95={percentile(read_ms, 95):.0f} "
          f"colour_scenes={colour_scenes} text_scenes={text_scenes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=("photo", "video"), default="photo")
    parser.add_argument("--video", type=Path, help="a video file (with --source video)")
    parser.add_argument("--mount", choices=("hand", "desk"), default="hand",
                        help="photo: a hand-held phone, or a camera on a stand")
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--speaking", type=float, default=0.30)
    parser.add_argument("--video-fps", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=23)
    defaults = FramePolicySettings()
    parser.add_argument("--speaking-fps", type=float, default=defaults.speaking_fps,
                        help="the frame policy's rate while the caller speaks")
    parser.add_argument("--duplicate-mad", type=float, default=defaults.duplicate_mad,
                        help="the frame policy's duplicate threshold")
    parser.add_argument("--offline", action="store_true",
                        help="what the offline default makes out of scenes with known answers")
    args = parser.parse_args()
    if args.offline:
        import asyncio

        asyncio.run(offline(FramePolicySettings(speaking_fps=args.speaking_fps,
                                                duplicate_mad=args.duplicate_mad)))
        return
    if args.source == "video" and (args.video is None or not args.video.is_file()):
        raise SystemExit("--source video needs --video PATH (see this file's docstring)")
    turns = schedule(args.seconds, args.speaking, args.seed)
    frames = video_frames(args.video, args.seconds) if args.source == "video" else \
        photo_frames(HandHeldPhoto(turns, args.seconds, args.seed, args.mount == "hand"),
                     args.seconds)

    settings = FramePolicySettings(speaking_fps=args.speaking_fps,
                                   duplicate_mad=args.duplicate_mad)
    camera = Camera(settings)
    audio, ring = AudioRing(), VideoRing()
    ingest = VideoIngestCore(ring, args.video_fps, INGEST_SIZE, lambda: Fraction(0))
    aligner = Aligner(audio, ring)
    pending = next(frames, None)
    next_turn, fresh, naive_bytes, naive_next_s = 0, 0, 0, 0.0
    per_turn_sent, retired = 0, 0
    for index in range(int(args.seconds / UNIT_S)):
        now = index * UNIT_S
        while pending is not None and pending[0] < now + UNIT_S - 1e-9:
            ingest.feed(wire_frame(pending[1], pending[0]))
            pending = next(frames, None)
        audio.write(np.zeros(INPUT_FRAME_SAMPLES, np.int16))
        unit = aligner.next_unit()
        assert unit is not None and unit.index == index
        turn = turns[next_turn] if next_turn < len(turns) else None
        if turn is not None and now >= turn.end_s:  # the listener: end of this turn
            sighting = camera.end_turn(now, turn.words)
            assert sighting is not None
            retired += len(camera.retire())
            age = now - sighting.selection.at_s
            fresh += age <= FRESH_WITHIN_S
            print(f"turn {next_turn + 1}: {turn.start_s:6.2f}-{turn.end_s:6.2f} s "
                  f"{'looks ' if turn.looks else '      '}frames sent in the turn "
                  f"{per_turn_sent}, end frame {age:.2f} s old"
                  f"{' (reused)' if sighting.reused else ''}"
                  f"{' sharp' if sighting.selection.sharp else ''}", flush=True)
            next_turn += 1
            per_turn_sent = 0
            turn = turns[next_turn] if next_turn < len(turns) else None
        speaking = turn is not None and turn.start_s <= now < turn.end_s
        if unit.video is not None:
            if camera.see(unit.video, now, speaking) is not None:
                per_turn_sent += speaking
                retired += len(camera.retire())
            if now + 1e-9 >= naive_next_s:  # the naive sender: a frame a second
                naive_bytes += len(encode_jpeg(unit.video.image, settings.size,
                                               settings.jpeg_quality))
                naive_next_s += 1.0
    policy = camera.policy
    minutes = args.seconds / 60
    naive = int(args.seconds)
    spoken = sum(t.end_s - t.start_s for t in turns) / args.seconds
    print(f"sampled {ingest.sampled_frames} frames at {args.video_fps:g} fps from "
          f"{int(args.seconds * SEND_FPS)} sent at {SEND_FPS}; offered {policy.frames_offered}, "
          f"rate-skipped {policy.rate_skipped}, duplicates skipped {policy.dup_skipped}, "
          f"sent {policy.frames_sent} ({policy.jpeg_bytes / max(1, policy.frames_sent):.0f} "
          f"bytes each); {retired} retired from the context (at most {settings.max_images} kept)")
    print(f"RESULT frames_sent={policy.frames_sent} frames_naive={naive} "
          f"ratio={policy.frames_sent / naive:.3f} dup_skipped={policy.dup_skipped} "
          f"bytes_per_min={policy.jpeg_bytes / minutes:.0f} "
          f"kbps={policy.jpeg_bytes * 8 / args.seconds / 1000:.1f} "
          f"naive_kbps={naive_bytes * 8 / args.seconds / 1000:.1f} turns={len(turns)} "
          f"turns_fresh={fresh} speaking={spoken:.2f} "
          f"source={args.source if args.source == 'video' else 'photo-' + args.mount} "
          f"speaking_fps={settings.speaking_fps:g} duplicate_mad={settings.duplicate_mad:g}")


if __name__ == "__main__":
    main()
