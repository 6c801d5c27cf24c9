"""``--record DIR``: each call's recording, opt-in, and how long it is kept.

A recorded call leaves two files in the folder with one name: ``<started>-<session>.wav``,
both sides on the call's clock (:mod:`omnicall.media.call_recording`), and
``<started>-<session>.jsonl``, its transcript and turn timings (the ``--transcripts``
records, each with ``call_s``: its second in the WAV). Both are owner-only. The page is told
the call is recorded (the ``state`` message's ``recording``) and shows it. Files older than
``--record-keep-h`` are deleted when the server starts and every hour after.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from omnicall.app.storage.transcripts import TranscriptFile
from omnicall.media.call_recording import CallRecording
from omnicall.media.clock import Clock

logger = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 3600.0
SUFFIXES = (".wav", ".jsonl")


@dataclass
class Recorded:
    """One call's recording and the transcript beside it."""

    audio: CallRecording
    transcript: TranscriptFile

    def close(self, reason: str, now_s: float) -> None:
        self.audio.close(now_s)
        self.transcript.close(reason)


def start_recording(folder: Path, session_id: str, engine: str, clock: Clock) -> Recorded:
    """The call's files (created with their first write: a call that never spoke leaves a
    WAV of its silence only once a stats tick passed)."""
    start_s = clock.now()
    transcript = TranscriptFile(folder, session_id, engine,
                                call_s=lambda: clock.now() - start_s)
    return Recorded(CallRecording(transcript.path.with_suffix(".wav"), start_s), transcript)


def delete_old(folder: Path, keep_s: float, now: float | None = None) -> int:
    """Delete the recordings (and their transcripts) older than ``keep_s`` (by their
    modification time); returns how many files went."""
    now = time.time() if now is None else now
    deleted = 0
    for path in folder.iterdir():
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        try:
            if now - path.stat().st_mtime > keep_s:
                path.unlink()
                deleted += 1
        except OSError as exc:  # gone meanwhile, or not ours to delete: try again later
            logger.warning("recording %s not deleted: %s", path, exc)
    return deleted


async def keep_deleting_old(folder: Path, keep_s: float, clock: Clock) -> None:
    """The app's task: old recordings deleted now and every hour."""
    while True:
        deleted = delete_old(folder, keep_s)
        if deleted:
            logger.info("deleted %d recording files older than %.0f h", deleted, keep_s / 3600)
        await clock.sleep(SWEEP_INTERVAL_S)
