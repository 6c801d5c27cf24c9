"""End to end: real headless Chromium loads the real page, calls the server over loopback.

Fake microphone: speech made with espeak-ng; fake camera: an ffmpeg test pattern (.y4m).
Checks the server receives 16 kHz 80 ms frames and sampled video, and the page receives
non-silent assistant audio (inbound-rtp stats) and data-channel events.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import numpy as np
import pytest

from omnicall.app.app_state import CALLS_KEY
from omnicall.media.timebase import INPUT_FRAME_SAMPLES
from tests.chromium import chromium_page, have_browser_tools, make_speech_wav, make_y4m
from tests.utils import running_server, wait_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser_tools(), reason="needs chromium, espeak-ng, ffmpeg "
                       "(make system-deps installs them)"),
]

INBOUND_AUDIO_JS = """async () => {
  const pc = window.omnicall.pc;
  if (!pc) return null;
  const stats = await pc.getStats();
  for (const s of stats.values()) {
    if (s.type === 'inbound-rtp' && s.kind === 'audio')
      return {packets: s.packetsReceived, energy: s.totalAudioEnergy || 0,
              samples: s.totalSamplesReceived || 0};
  }
  return null;
}"""

OUTBOUND_VIDEO_JS = """async () => {
  const pc = window.omnicall.pc;
  const sender = pc.getSenders().find(s => s.track && s.track.kind === 'video');
  const cap = sender.getParameters().encodings[0].maxBitrate;
  for (const s of (await pc.getStats()).values())
    if (s.type === 'outbound-rtp' && s.kind === 'video')
      return {frames: s.framesSent, bytes: s.bytesSent, cap: cap};
  return null;
}"""


async def test_browser_call_end_to_end(tmp_path: Path) -> None:
    wav = make_speech_wav("Hello omnicall. Can you see the test pattern on my camera?",
                          tmp_path / "speech.wav")
    y4m = make_y4m(tmp_path / "camera.y4m")
    units: list[np.ndarray] = []
    video_shapes: list[tuple[int, ...]] = []
    async with running_server() as (url, app), chromium_page(wav, y4m) as page:
        registry = app[CALLS_KEY]
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await wait_for(lambda: len(registry) == 1, timeout_s=5)
        session = next(iter(registry.sessions.values()))
        original_push = session.engine_session.push

        def spy(unit):  # type: ignore[no-untyped-def]
            units.append(unit.audio)
            if unit.video is not None:
                video_shapes.append(unit.video.image.shape)
            return original_push(unit)

        session.input.pump._sink = spy
        await wait_for(lambda: len(units) >= 40 and len(video_shapes) >= 3, timeout_s=20)
        await page.wait_for_function(
            "window.omnicall.messages.some(m => m.type === 'stats')", timeout=10_000)
        inbound = await page.evaluate(INBOUND_AUDIO_JS)
        # the camera runs at 15 fps; the page sends 5 (the server samples 2), under a cap
        sent_before = await page.evaluate(OUTBOUND_VIDEO_JS)
        await page.wait_for_timeout(3000)
        sent_after = await page.evaluate(OUTBOUND_VIDEO_JS)
        sent_fps = (sent_after["frames"] - sent_before["frames"]) / 3
        sent_kbps = (sent_after["bytes"] - sent_before["bytes"]) * 8 / 3 / 1000
        status = await page.text_content("#status")
        await page.click("#stop")
        await wait_for(lambda: len(registry) == 0, timeout_s=10)
    assert not errors, errors
    assert all(len(u) == INPUT_FRAME_SAMPLES for u in units)
    speech = np.concatenate(units).astype(np.float64)
    assert np.sqrt(np.mean(speech ** 2)) > 300, "server heard silence"
    assert session.input.video_ingest is not None
    assert session.input.video_ingest.sampled_frames >= 4
    # the page sends 640x480 (Chromium may start lower while its bandwidth estimate ramps
    # up): kept at the camera's size, aspect kept, never scaled up
    assert (480, 640, 3) in set(video_shapes)
    assert all(h <= 480 and w <= 640 and w * 3 == h * 4 for h, w, _ in video_shapes)
    assert 2 <= sent_fps <= 6.5, sent_fps
    assert sent_after["cap"] == 250_000 and sent_kbps <= 250 * 1.2, (sent_after, sent_kbps)
    assert inbound is not None and inbound["packets"] > 50
    assert inbound["energy"] > 1e-4, f"page received silence: {inbound}"
    # the loopback engine speaks back at once: its turn messages (kept until the data channel
    # opened) may already have set the status to speaking
    assert any(word in (status or "") for word in ("Connected", "Listening", "speaking")), status


async def test_page_shows_clear_error_when_server_refuses(tmp_path: Path) -> None:
    from omnicall.app.config import ServerConfig
    cfg = ServerConfig(engine="loopback", ice_loopback=True, token="needed")
    async with running_server(cfg) as (url, _), chromium_page() as page:
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_selector("#error:not([hidden])", timeout=15_000)
        text = await page.text_content("#error")
    assert text is not None and "token" in text


async def test_browser_conversation_with_the_cpu_cascade(tmp_path: Path) -> None:
    """The default engine: a spoken question from the fake mic gets captions and speech."""
    from omnicall.app.config import ServerConfig
    from tests.chromium import question_wav

    wav = question_wav(tmp_path, "What is the capital of France?")
    cfg = ServerConfig(engine="cascade", ice_loopback=True)
    async with running_server(cfg) as (url, _), chromium_page(wav, make_y4m(
            tmp_path / "cam.y4m")) as page:
        await page.goto(url + "?processing=off")
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.wait_for_function(
            "window.omnicall.messages.some(m => m.type === 'turn' && m.role === 'assistant'"
            " && m.phase === 'end')", timeout=30_000)
        await page.wait_for_timeout(500)
        user_caption = await page.text_content("#user-caption")
        assistant_caption = await page.text_content("#assistant-caption")
        inbound = await page.evaluate(INBOUND_AUDIO_JS)
        messages = await page.evaluate("window.omnicall.messages")
        async with aiohttp.ClientSession() as http, http.get(url + "metrics") as resp:
            metrics_text = await resp.text()
    assert "omnicall_time_to_first_audio_seconds_count 1.0" in metrics_text  # /metrics
    assert 'omnicall_turns_total{result="answered"} 1.0' in metrics_text
    assert user_caption is not None and "capital" in user_caption.lower()
    assert assistant_caption is not None and len(assistant_caption.split()) >= 2
    assert inbound is not None and inbound["energy"] > 1e-3, inbound
    stages = {m["stage"] for m in messages if m["type"] == "timing"}
    assert {"speech_end", "end_of_turn", "first_audio_out"} <= stages
