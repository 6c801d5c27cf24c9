"""The page's connection-quality indicator and camera step-down (web/network_quality.js)
in real headless Chromium: a loopback call shows "good"; the classification (the
server's thresholds), the camera's lower/restore decisions and their effect on the real video
sender, evaluated in the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chromium import chromium_page, have_browser_tools, make_speech_wav, make_y4m
from tests.utils import running_server

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser_tools(), reason="needs chromium, espeak-ng, ffmpeg "
                       "(make system-deps installs them)"),
]

CLASSIFY_JS = """() => {
  const c = window.omnicallNetwork.classify;
  return [c({}), c({rttS: 0.03, jitterInS: 0.004, lossIn: 0}), c({lossOut: 0.05}),
          c({jitterInS: 0.03}), c({rttS: 0.3}), c({lossIn: 0.1}), c({jitterOutS: 0.06}),
          c({rttS: 0.8})];
}"""

CAMERA_STEPS_JS = """() => {
  const step = window.omnicallNetwork.cameraStep;
  const cam = {lowered: false};
  const thin = {videoLimitation: 'bandwidth'}, roomy = {outgoingBps: 500000};
  const samples = [{outgoingBps: 130000}, thin, roomy, thin, {outgoingBps: 80000},
                   {outgoingBps: 50000}, roomy, {outgoingBps: 120000}, roomy, roomy, roomy,
                   roomy, thin, thin, roomy, roomy, roomy, roomy, roomy, roomy];
  return samples.map(s => step(s, cam));
}"""

APPLY_JS = """async () => {
  const net = window.omnicallNetwork, pc = window.omnicall.pc;
  const enc = () => pc.getSenders().find(s => s.track && s.track.kind === 'video')
    .getParameters().encodings[0];
  const cam = {lowered: true};
  const before = {scale: enc().scaleResolutionDownBy, fps: enc().maxFramerate};
  await net.applyCamera(pc, 'lower', cam);
  const lowered = {scale: enc().scaleResolutionDownBy, fps: enc().maxFramerate};
  await net.applyCamera(pc, 'restore', cam);
  const restored = {scale: enc().scaleResolutionDownBy, fps: enc().maxFramerate};
  return {before, lowered, restored};
}"""


async def test_a_loopback_call_shows_a_good_connection_and_the_camera_steps_down(
        tmp_path: Path) -> None:
    wav = make_speech_wav("Hello there.", tmp_path / "speech.wav")
    y4m = make_y4m(tmp_path / "camera.y4m")
    async with running_server() as (url, _app), chromium_page(wav, y4m) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(url + "?processing=off")
        assert await page.is_hidden("#network-quality")  # nothing measured before a call
        await page.click("#start")
        await page.wait_for_function("window.omnicall.phase === 'connected'", timeout=20_000)
        await page.wait_for_function(
            "document.getElementById('network-quality').dataset.quality", timeout=15_000)
        quality = await page.get_attribute("#network-quality", "data-quality")
        text = await page.text_content("#network-quality")
        title = await page.get_attribute("#network-quality", "title")
        network = await page.evaluate("window.omnicall.network")
        classified = await page.evaluate(CLASSIFY_JS)
        steps = await page.evaluate(CAMERA_STEPS_JS)
        applied = await page.evaluate(APPLY_JS)
        await page.click("#stop")
        await page.wait_for_function(
            "document.getElementById('network-quality').hidden", timeout=10_000)
    assert not errors, errors
    assert quality == "good" and text == "Connection good", (quality, text, network)
    assert title is not None and title.startswith("loss ")
    assert network["quality"] == "good" and network["cameraLowered"] is False
    assert classified == [None, "good", "fair", "fair", "fair", "poor", "poor", "poor"]
    # lowered after two thin samples in a row; back after three roomy ones in a row, then
    # after six when it had to lower again
    assert steps == [None, None, None, None, "lower", None, None, None, None, None, "restore",
                     None, None, "lower", None, None, None, None, None, "restore"]
    assert applied["lowered"]["scale"] == 2 and applied["lowered"]["fps"] == 2
    assert applied["restored"] == applied["before"] and applied["before"]["fps"] == 5
