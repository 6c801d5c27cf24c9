"""A call's recording (media/call_recording.py): both sides placed on the call's clock, a
late piece still in place, nothing kept without bound, a failing disk never raising."""

from __future__ import annotations

import os
import stat
import wave
from pathlib import Path

import numpy as np

from omnicall.media.call_recording import (
    ASSISTANT,
    CALLER,
    MAX_PIECES,
    RECORD_RATE_HZ,
    CallRecording,
    StereoTimeline,
)


def ones(n: int, value: int) -> np.ndarray:
    return np.full(n, value, np.int16)


def test_each_side_lands_where_it_was_on_the_calls_clock() -> None:
    timeline = StereoTimeline(start_s=10.0)
    timeline.add(CALLER, ones(1280, 7), end_s=10.08)  # the first 80 ms of the caller
    timeline.add(ASSISTANT, ones(320, 9), end_s=10.06)  # 20 ms sent 40 ms in
    out = timeline.drain(now_s=10.6, hold_s=0.5)  # up to 100 ms
    assert out.shape == (1600, 2)
    assert (out[:1280, 0] == 7).all() and (out[1280:, 0] == 0).all()
    assert (out[640:960, 1] == 9).all() and (out[:640, 1] == 0).all() \
        and (out[960:, 1] == 0).all()
    assert timeline.drain(now_s=10.6).shape == (0, 2)  # nothing new yet


def test_a_late_piece_finds_its_place_until_it_was_written() -> None:
    timeline = StereoTimeline(start_s=0.0)
    timeline.add(ASSISTANT, ones(320, 3), end_s=0.52)  # straddles the first drain
    first = timeline.drain(now_s=1.0)  # written up to 0.5 s
    timeline.add(CALLER, ones(1280, 5), end_s=0.9)  # late, but not yet written
    timeline.add(CALLER, ones(160, 4), end_s=0.3)  # too late: its place was written
    second = timeline.drain(now_s=1.5)
    joined = np.concatenate([first, second])
    assert len(joined) == RECORD_RATE_HZ
    assert (joined[8000:8320, 1] == 3).all()  # both halves of the piece, in place
    assert (joined[13120:14400, 0] == 5).all()  # the 80 ms that ended at 0.9 s
    assert timeline.dropped_samples == 160


def test_what_waits_is_bounded() -> None:
    timeline = StereoTimeline(start_s=0.0)
    for n in range(MAX_PIECES + 10):  # never drained
        timeline.add(ASSISTANT, ones(320, 1), end_s=100.0 + n * 0.02)
    assert len(timeline._pieces[ASSISTANT]) == MAX_PIECES
    assert timeline.dropped_samples == 10 * 320


def test_the_file_is_a_stereo_wav_of_both_sides(tmp_path: Path) -> None:
    path = tmp_path / "call.wav"
    recording = CallRecording(path, start_s=0.0)
    for n in range(50):  # a second of the caller, a second of the assistant after it
        recording.caller(ones(1280, 1000), arrived_s=(n + 1) * 0.08)
    recording.write(now_s=2.0)
    for n in range(50):
        recording.assistant(ones(960, 2000), sent_s=4.0 + (n + 1) * 0.02)
    recording.close(now_s=5.5)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with wave.open(str(path)) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (2, 16_000, 2)
        audio = np.frombuffer(wav.readframes(wav.getnframes()), np.int16).reshape(-1, 2)
    assert len(audio) == 5.5 * 16_000
    caller = np.nonzero(np.abs(audio[:, 0]) > 500)[0]
    assistant = np.nonzero(np.abs(audio[:, 1]) > 500)[0]
    assert caller[0] < 50 and abs(caller[-1] - 4.0 * 16_000) < 50
    assert abs(assistant[0] - 4.0 * 16_000) < 200 and abs(assistant[-1] - 5.0 * 16_000) < 200


def test_a_disk_that_fails_stops_the_recording_without_raising(tmp_path: Path) -> None:
    recording = CallRecording(tmp_path / "gone" / "call.wav", start_s=0.0)
    recording.caller(ones(1280, 1), arrived_s=0.08)
    recording.write(now_s=1.0)
    assert recording.failed
    recording.caller(ones(1280, 1), arrived_s=0.9)
    recording.close(now_s=2.0)  # nothing raised, nothing written
    assert not (tmp_path / "gone").exists()
