"""``--transcripts DIR``: one JSON Lines file per call - its turns, stage timings and tool
calls - for the operator's records. Off by default: it keeps what people said (docs/operations.md,
Privacy).

One line per record, written as it happens (a call that ends abruptly keeps what it had):

- ``{"type": "call", "event": "start", "session": .., "engine": .., "at": ISO-8601}``
- ``{"type": "turn", "role": "user", "turn": N, "text": .., "at": ..}``
- ``{"type": "tool", "turn": N, "name": .., "arguments": {..}, "output": .., "error": ..,
  "ms": ..}``
- ``{"type": "turn", "role": "assistant", "turn": N, "text": .., "interrupted": bool,
  "heard_ms": ms of the reply the caller heard (None: unknown), "timings_ms": {stage: ms
  since the turn's first stage}, "at": ..}``
- ``{"type": "call", "event": "end", "reason": .., "at": ..}``

No image is ever written: a frame that went to the model (``CameraSeen``) leaves no record,
not even its id (what the caller's camera saw is not the operator's record to keep).

:class:`TranscriptCore` turns engine events into records (pure, tested by feeding events);
:class:`TranscriptFile` appends them to the call's file.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from omnicall.engine.events import (
    AssistantText,
    CameraSeen,
    EngineEvent,
    StageTiming,
    ToolCall,
    TurnEvent,
    UserTranscript,
)

logger = logging.getLogger(__name__)

MAX_TEXT_CHARS = 8000  # one reply's text kept per record
MAX_OPEN_TURNS = 8  # turns whose reply text is still being collected
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")

Record = dict[str, Any]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class TranscriptCore:
    """Engine events in, transcript records out (no I/O)."""

    def __init__(self, stamp: Callable[[], str] = now_iso) -> None:
        self.stamp = stamp
        self.reply_text: dict[int, str] = {}
        self.stages: dict[int, dict[str, float]] = {}

    def feed(self, event: EngineEvent) -> Record | None:
        if isinstance(event, CameraSeen):
            return None  # never stored: no image, no trace of one
        if isinstance(event, UserTranscript):
            if event.final and event.text.strip():
                return {"type": "turn", "role": "user", "turn": event.turn_id,
                        "text": event.text.strip()[:MAX_TEXT_CHARS], "at": self.stamp()}
        elif isinstance(event, AssistantText):
            text = self.reply_text.get(event.turn_id, "") + event.delta
            self.reply_text[event.turn_id] = text[:MAX_TEXT_CHARS]
            self._bound(self.reply_text)
        elif isinstance(event, StageTiming):
            self.stages.setdefault(event.turn_id, {})[event.stage] = event.at_s
            self._bound(self.stages)
        elif isinstance(event, ToolCall):
            return {"type": "tool", "turn": event.turn_id, "call_id": event.call_id,
                    "name": event.name, "arguments": event.arguments,
                    "output": event.output[:MAX_TEXT_CHARS], "error": event.error,
                    "ms": round(event.ms, 1), "at": self.stamp()}
        elif isinstance(event, TurnEvent) and event.role == "assistant" and event.phase == "end":
            text = self.reply_text.pop(event.turn_id, "").strip()
            stages = self.stages.pop(event.turn_id, {})
            origin = min(stages.values(), default=0.0)
            return {"type": "turn", "role": "assistant", "turn": event.turn_id, "text": text,
                    "interrupted": event.interrupted, "heard_ms": event.heard_ms,
                    "timings_ms": {k: round((v - origin) * 1000, 1) for k, v in
                                   sorted(stages.items(), key=lambda kv: kv[1])},
                    "at": self.stamp()}
        return None

    @staticmethod
    def _bound(kept: dict[int, Any]) -> None:
        while len(kept) > MAX_OPEN_TURNS:
            kept.pop(next(iter(kept)))


class TranscriptFile:
    """The JSON Lines file of one call, appended line by line (small writes to a local
    file: done on the event loop, flushed per line so a crash loses nothing). The file is
    created with the first turn: calls that never got that far leave no file. A resumed
    call goes on in a new file with the same session id."""

    def __init__(self, folder: Path, session_id: str, engine: str,
                 stamp: Callable[[], str] = now_iso,
                 call_s: Callable[[], float] | None = None) -> None:
        """``call_s``: seconds since the call's recording started, put in every record
        (``--record``: the records line up with the recording's WAV)."""
        self.core = TranscriptCore(stamp)
        self.call_s = call_s
        started = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        self.path = folder / f"{started}-{_SAFE.sub('_', session_id)[:64]}.jsonl"
        self.file: TextIO | None = None
        self.failed = False
        self.opening: Record = {"type": "call", "event": "start", "session": session_id,
                                "engine": engine, "at": stamp()}

    def feed(self, event: EngineEvent) -> None:
        record = self.core.feed(event)
        if record is not None:
            self.write(record)

    def write(self, record: Record) -> None:
        if self.failed:
            return
        try:
            if self.file is None:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                self.file = os.fdopen(fd, "a", encoding="utf-8")
                self.file.write(json.dumps(self.opening, ensure_ascii=False) + "\n")
            if self.call_s is not None:
                record = {**record, "call_s": round(self.call_s(), 3)}
            self.file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            self.file.flush()
        except OSError as exc:  # a full disk must not end the call: stop writing, say so
            logger.warning("transcript %s: %s; no more lines are written", self.path, exc)
            self.failed = True
            self._close_file()

    def close(self, reason: str) -> None:
        if self.file is None:
            return
        self.write({"type": "call", "event": "end", "reason": reason, "at": self.core.stamp()})
        self._close_file()

    def _close_file(self) -> None:
        if self.file is not None:
            try:
                self.file.close()
            except OSError as exc:
                logger.warning("transcript %s: %s", self.path, exc)
            self.file = None


def transcript_folder(path: str) -> Path:
    """``--transcripts``: the folder, created (owner-only) if missing; OSError if unusable."""
    folder = Path(path)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"cannot write to {folder}")
    return folder
