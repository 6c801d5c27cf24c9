"""Real headless Debian Chromium for end-to-end tests (driven by Python playwright).

Playwright's own browser download is never used: ``executable_path`` points at the Debian
build. Fake camera/microphone come from files the tests make with espeak-ng and ffmpeg.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

BASE_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
    "--autoplay-policy=no-user-gesture-required", "--allow-loopback-in-peer-connection",
]


def have_browser_tools() -> bool:
    return all(shutil.which(t) for t in ("chromium", "espeak-ng", "ffmpeg"))


def make_speech_wav(text: str, path: Path, lead_silence_s: float = 0.5) -> Path:
    """Spoken ``text`` as 48 kHz mono 16-bit WAV with leading silence."""
    raw = path.with_suffix(".raw.wav")
    subprocess.run(["espeak-ng", "-w", str(raw), text], check=True, capture_output=True)
    subprocess.run(["ffmpeg", "-y", "-loglevel", "error", "-f", "lavfi", "-t",
                    str(lead_silence_s), "-i", "anullsrc=r=48000:cl=mono", "-i", str(raw),
                    "-filter_complex", "[1:a]aresample=48000[s];[0:a][s]concat=n=2:v=0:a=1",
                    "-ac", "1", "-ar", "48000", "-sample_fmt", "s16", str(path)],
                   check=True, capture_output=True)
    raw.unlink()
    return path


def question_wav(folder: Path, text: str) -> Path:
    """``text`` in the bundled Piper voice as a 48 kHz WAV for Chromium's fake microphone
    (1 s of silence before, 0.5 s after)."""
    import wave

    from tests.utils import piper_speech

    speech = piper_speech(text, rate=48_000, lead_s=1.0, tail_s=0.5)
    path = folder / "question.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(48_000)
        out.writeframes(speech.tobytes())
    return path


def make_y4m(path: Path, seconds: float = 4, size: str = "640x480", fps: int = 15) -> Path:
    subprocess.run(["ffmpeg", "-y", "-loglevel", "error", "-f", "lavfi", "-i",
                    f"testsrc=size={size}:rate={fps}", "-t", str(seconds), "-pix_fmt",
                    "yuv420p", str(path)], check=True, capture_output=True)
    return path


@contextlib.asynccontextmanager
async def chromium_page(audio_file: Path | None = None, video_file: Path | None = None,
                        extra_flags: list[str] | None = None) -> AsyncIterator[Any]:
    """Yield a playwright page in a fresh headless Chromium; closes everything after."""
    from playwright.async_api import async_playwright

    flags = list(BASE_FLAGS)
    for path in (audio_file, video_file):
        if path is not None and not path.is_absolute():
            raise ValueError(f"Chromium needs absolute fake-media paths, got {path}")
    if audio_file is not None:
        flags.append(f"--use-file-for-fake-audio-capture={audio_file}%noloop")
    if video_file is not None:
        flags.append(f"--use-file-for-fake-video-capture={video_file}")
    flags += extra_flags or []
    with tempfile.TemporaryDirectory(prefix="omnicall-chromium-") as profile:
        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=flags)
            try:
                page = context.pages[0] if context.pages else await context.new_page()
                yield page
            finally:
                await context.close()
