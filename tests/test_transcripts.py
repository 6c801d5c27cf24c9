"""--transcripts: engine events become JSON Lines records, one file per call."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from omnicall.app.storage.transcripts import TranscriptCore, TranscriptFile, transcript_folder
from omnicall.engine.events import (
    AssistantAudio,
    AssistantText,
    CameraSeen,
    StageTiming,
    ToolCall,
    TurnEvent,
    UserTranscript,
)
from tests.utils import tone

STAMP = "2026-12-01T09:00:00.000+00:00"


def events() -> list:
    return [
        StageTiming(1, "speech_end", 10.0),
        UserTranscript("what ti", final=False, turn_id=1),
        UserTranscript("What time is it?", final=True, turn_id=1),
        StageTiming(1, "end_of_turn", 10.4),
        CameraSeen(1, 3, b"\xff\xd8\xff\xe0 a jpeg thumbnail", sharp=True),  # never a record
        ToolCall(1, "call_1", "local_time", {}, "It is 10:42", "", 1.5),
        AssistantText("It is ", 1),
        AssistantAudio(tone(300, 0.1, 24_000).astype("int16"), 24_000, 0, 1),
        AssistantText("10:42.", 1),
        StageTiming(1, "first_audio_out", 10.9),
        TurnEvent("assistant", "end", 1),
        AssistantText("Shall I go on", 2),
        TurnEvent("assistant", "end", 2, interrupted=True, heard_ms=740),
    ]


def test_turns_tools_and_timings_become_records() -> None:
    core = TranscriptCore(lambda: STAMP)
    records = [r for r in map(core.feed, events()) if r is not None]
    assert records == [
        {"type": "turn", "role": "user", "turn": 1, "text": "What time is it?", "at": STAMP},
        {"type": "tool", "turn": 1, "call_id": "call_1", "name": "local_time", "arguments": {},
         "output": "It is 10:42", "error": "", "ms": 1.5, "at": STAMP},
        {"type": "turn", "role": "assistant", "turn": 1, "text": "It is 10:42.",
         "interrupted": False, "heard_ms": None,
         "timings_ms": {"speech_end": 0.0, "end_of_turn": 400.0, "first_audio_out": 900.0},
         "at": STAMP},
        {"type": "turn", "role": "assistant", "turn": 2, "text": "Shall I go on",
         "interrupted": True, "heard_ms": 740, "timings_ms": {}, "at": STAMP},
    ]
    assert not core.reply_text and not core.stages  # nothing kept after the turn
    assert "thumbnail" not in json.dumps(records)  # the camera frame left no record


def test_open_turns_are_bounded() -> None:
    core = TranscriptCore(lambda: STAMP)
    for turn in range(100):  # replies that never end (a broken engine) do not pile up
        core.feed(AssistantText("x", turn))
        core.feed(StageTiming(turn, "speech_end", 1.0))
    assert len(core.reply_text) <= 8 and len(core.stages) <= 8


def test_one_owner_only_file_per_call_written_as_it_happens(tmp_path: Path) -> None:
    folder = transcript_folder(str(tmp_path / "calls"))
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    empty = TranscriptFile(folder, "never-spoke", "cascade")
    empty.close("connect_timeout")
    assert not list(folder.iterdir())  # a call without a turn leaves no file
    transcript = TranscriptFile(folder, "abc/../x", "cascade", stamp=lambda: STAMP)
    for event in events()[:3]:
        transcript.feed(event)
    lines = transcript.path.read_text().splitlines()  # on disk before the call ends
    assert len(lines) == 2
    for event in events()[3:]:
        transcript.feed(event)
    transcript.close("hangup")
    assert transcript.path.parent == folder and "/" not in transcript.path.name[:-6]
    assert stat.S_IMODE(os.stat(transcript.path).st_mode) == 0o600
    records = [json.loads(line) for line in transcript.path.read_text().splitlines()]
    assert [r["type"] for r in records] == ["call", "turn", "tool", "turn", "turn", "call"]
    assert records[0] == {"type": "call", "event": "start", "session": "abc/../x",
                          "engine": "cascade", "at": STAMP}
    assert records[-1] == {"type": "call", "event": "end", "reason": "hangup", "at": STAMP}


def test_a_failing_disk_stops_the_transcript_not_the_call(tmp_path: Path) -> None:
    transcript = TranscriptFile(tmp_path, "s", "cascade")
    transcript.path = Path("/proc/omnicall-no-such-dir/x.jsonl")  # cannot be created
    transcript.feed(UserTranscript("hello", final=True, turn_id=1))  # logged, not raised
    transcript.feed(UserTranscript("again", final=True, turn_id=2))
    transcript.close("hangup")
    assert transcript.failed
