"""Real headless Chromium on the real page, every packet of its call through the impairing
relay (bench/udp_relay.py): seeded loss both ways and a 3 s outage both ways in the middle
of the conversation. The page is loaded from the relay's signaling proxy, so its offer and
the server's answer are both rewritten and neither peer can reach the other around the
relay. A second call has its uplink capped at 80 kbps: the page lowers its camera and the
caller's voice still gets through.

The caller's voice is played into the call from the test (a Web Audio source put on the
page's audio sender), so each question is spoken when the test says, not when a fake
microphone file happens to reach it. The engine is examples/parrot.py: real turn-taking
(the VAD), a caption ("Squawk!") and a spoken reply for every turn, no model to wait for.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from bench.impair import Impairment
from bench.udp_relay import UdpRelay, signaling_proxy
from examples.parrot import ParrotEngine
from omnicall.app.app_state import CALLS_KEY
from omnicall.app.config import ServerConfig
from omnicall.engine.conversation.settings import TurnSettings
from tests.chromium import chromium_page, have_browser_tools
from tests.test_browser_e2e import INBOUND_AUDIO_JS
from tests.utils import piper_speech, running_server, serving, wait_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser_tools(), reason="needs chromium, espeak-ng, ffmpeg "
                       "(make system-deps installs them)"),
]

OUTAGE_S = 3.0
HANGUP_OUTAGE_S = 0.6

# the test's voice: 48 kHz int16 PCM (base64) played into the page's audio sender, which is
# moved from the fake microphone onto a Web Audio destination the first time (silence in
# between, like a quiet microphone); resolves when played
SAY_JS = """async (b64) => {
  const w = window;
  if (!w.testMouth) {
    const ctx = new AudioContext({ sampleRate: 48000 });
    await ctx.resume();
    const dest = ctx.createMediaStreamDestination();
    // a silent source always playing: with none, the track carries no audio at all between
    // questions (and the server would take the caller for gone)
    const hush = ctx.createConstantSource();
    hush.offset.value = 0;
    hush.connect(dest);
    hush.start();
    const sender = w.omnicall.pc.getSenders().find(s => s.track && s.track.kind === 'audio');
    await sender.replaceTrack(dest.stream.getAudioTracks()[0]);
    w.testMouth = { ctx, dest };
  }
  const { ctx, dest } = w.testMouth;
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const pcm = new Int16Array(bytes.buffer);
  const buffer = ctx.createBuffer(1, pcm.length, 48000);
  const channel = buffer.getChannelData(0);
  for (let i = 0; i < pcm.length; i++) channel[i] = pcm[i] / 32768;
  const source = ctx.createBufferSource();
  source.buffer = buffer;
  source.connect(dest);
  await new Promise((resolve) => { source.onended = resolve; source.start(); });
  return true;
}"""

# every connection state the page's peer connection goes through from now on
WATCH_JS = """() => {
  const pc = window.omnicall.pc;
  window.testStates = [];
  window.testPc = pc;
  pc.addEventListener('connectionstatechange', () => window.testStates.push(pc.connectionState));
}"""


def reply_ended_js(turn: int) -> str:
    return ("window.omnicall.messages.some(m => m.type === 'turn' && m.role === 'assistant'"
            f" && m.phase === 'end' && m.turn === {turn})")


async def say(page: Any, text: str) -> None:
    speech = piper_speech(text, rate=48_000, lead_s=0.2, tail_s=0.0)
    await page.evaluate(SAY_JS, base64.b64encode(speech.tobytes()).decode())


async def test_a_browser_call_rides_out_loss_and_a_3_s_outage_through_the_relay() -> None:
    relay = await UdpRelay(up=Impairment(loss=0.03), down=Impairment(loss=0.03),
                           seed=24).start()
    engine = ParrotEngine(TurnSettings(turn_model="fixed"))
    config = ServerConfig(engine="loopback", ice_loopback=True)  # the default timeouts
    try:
        async with running_server(config, engine=engine) as (url, app), \
                serving(signaling_proxy(relay, url)) as port, chromium_page() as page:
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(f"http://127.0.0.1:{port}/?processing=off")
            await page.click("#start")
            await page.wait_for_function("window.omnicall.phase === 'connected'",
                                         timeout=20_000)
            await page.evaluate(WATCH_JS)
            session_id = await page.evaluate("window.omnicall.session")
            sessions = app[CALLS_KEY].sessions
            await wait_for(lambda: session_id in sessions, timeout_s=10)
            session = sessions[session_id]
            # the server knows the page only as the relay: no path around it
            ice = session.pc.getTransceivers()[0].receiver.transport.transport \
                .iceGatherer._connection
            assert {(c.host, c.port) for c in ice.remote_candidates} == \
                {relay.address("server")}

            await say(page, "Hello there, parrot.")
            await page.wait_for_function(reply_ended_js(1), timeout=20_000)

            relay.begin_outage(OUTAGE_S)
            await asyncio.sleep(OUTAGE_S + 0.5)
            # the page rides it out on the same connection (Chromium calls a silent link
            # 'disconnected' only after ~5 s, and the page reconnects 2 s after that)
            await page.wait_for_function(
                "window.omnicall.pc?.connectionState === 'connected'", timeout=10_000)
            assert await page.evaluate(
                "window.omnicall.reconnects === 0 && window.omnicall.pc === window.testPc")
            before = await page.evaluate(INBOUND_AUDIO_JS)
            await say(page, "Are you still there?")
            await page.wait_for_function(reply_ended_js(2), timeout=30_000)
            after = await page.evaluate(INBOUND_AUDIO_JS)
            page_state = await page.evaluate(
                "({reconnects: window.omnicall.reconnects, phase: window.omnicall.phase,"
                " same: window.omnicall.pc === window.testPc, states: window.testStates,"
                " session: window.omnicall.session,"
                " caption: document.getElementById('assistant-caption').textContent,"
                " said: window.omnicall.messages.filter(m => m.type === 'assistant_text')"
                ".map(m => [m.turn, m.delta])})")
            assert sessions.get(session_id) is session  # never closed or resumed
            # hang up inside a short outage: the hangup's first packet is lost, and the page
            # keeps its connection until SCTP's retransmission gets it through (a page that
            # closed at once would leave the call to be parked for a resume)
            relay.begin_outage(HANGUP_OUTAGE_S)
            await page.click("#stop")
            await wait_for(lambda: len(sessions) == 0, timeout_s=10)
    finally:
        relay.close()
    assert not errors, errors
    summary = relay.summary()
    for direction in ("up", "down"):
        assert summary[direction]["delivered"] > 300, summary
        assert summary[direction].get("loss", 0) > 0 and summary[direction]["outage"] > 0, \
            summary
    # the page went on with the same call: no reconnect, no new peer connection
    assert page_state["reconnects"] == 0 and page_state["same"], page_state
    assert page_state["phase"] == "connected" and page_state["session"] == session_id
    # the turn after the outage was answered: captioned, and its sound reached the page
    assert [2, "Squawk!"] in page_state["said"], page_state
    assert "Squawk" in (page_state["caption"] or ""), page_state
    assert after["energy"] - before["energy"] > 1e-4, (before, after)
    assert session.close_reason == "hangup"


# a thin uplink: the page -> server direction capped at 80 kbps behind a 0.8 s queue (the
# downlink is left alone). Opus speech takes ~45 kbps of it with its packet headers, so a
# camera at its 250 kbps cap overflows the queue and Chromium's estimate falls under the
# page's 100 kbps step-down threshold; the camera must give way before the voice does.
THIN_UPLINK_BPS = 80_000
THIN_UPLINK_QUEUE_BYTES = 8_000

# what the page's video sender is set to now, and its flag on window.omnicall.network
CAMERA_JS = """() => {
  const sender = window.omnicall.pc.getSenders().find(s => s.track && s.track.kind === 'video');
  const enc = sender.getParameters().encodings[0];
  return {scale: enc.scaleResolutionDownBy ?? null, fps: enc.maxFramerate ?? null,
          lowered: Boolean(window.omnicall.network?.cameraLowered)};
}"""

# every 2 s: seconds since the call connected, Chromium's estimate (kbps), the video sender's
# limitation, the width it encodes, and whether the page has lowered the camera (for the
# assertion messages: what the estimate did, not only that the step came or not)
TRACE_JS = """() => {
  const pc = window.omnicall.pc, t0 = performance.now();
  window.testTrace = [];
  setInterval(async () => {
    const row = {t: Math.round((performance.now() - t0) / 1000)};
    const stats = [...(await pc.getStats()).values()];
    const pair = stats.find(s => s.type === 'transport')?.selectedCandidatePairId;
    for (const s of stats) {
      if (s.id === pair && s.availableOutgoingBitrate !== undefined)
        row.kbps = Math.round(s.availableOutgoingBitrate / 1000);
      if (s.type === 'outbound-rtp' && s.kind === 'video') {
        row.limit = s.qualityLimitationReason;
        row.width = s.frameWidth;
      }
    }
    row.lowered = Boolean(window.omnicall.network?.cameraLowered);
    window.testTrace.push(row);
  }, 2000);
}"""

LOWERED_JS = ("(() => { const s = window.omnicall.pc.getSenders().find(s => s.track"
              " && s.track.kind === 'video'); const e = s.getParameters().encodings[0];"
              " return window.omnicall.network?.cameraLowered === true"
              " && e.scaleResolutionDownBy === 2; })()")

# the page reads the estimate and the round trip from the pair the transport has selected,
# also while a consent check is out on it (Chromium calls it "in-progress" then: on a thin
# uplink, with the checks queued behind the video, much of the time)
SELECTED_PAIR_JS = """() => window.omnicallNetwork.sampleFrom([
  {type: 'transport', id: 'T', selectedCandidatePairId: 'P1'},
  {type: 'candidate-pair', id: 'P0', state: 'succeeded', nominated: true,
   availableOutgoingBitrate: 900000, currentRoundTripTime: 0.9},
  {type: 'candidate-pair', id: 'P1', state: 'in-progress', nominated: true,
   availableOutgoingBitrate: 60000, currentRoundTripTime: 0.3}])"""

LAST_TURN_JS = "Math.max(0, ...window.omnicall.messages.map(m => m.turn || 0))"


async def test_a_thin_browser_uplink_lowers_the_camera_and_the_voice_gets_through() -> None:
    relay = await UdpRelay(up=Impairment(rate_bps=THIN_UPLINK_BPS,
                                         queue_bytes=THIN_UPLINK_QUEUE_BYTES),
                           seed=24).start()
    engine = ParrotEngine(TurnSettings(turn_model="fixed"))
    config = ServerConfig(engine="loopback", ice_loopback=True)
    try:
        async with running_server(config, engine=engine) as (url, app), \
                serving(signaling_proxy(relay, url)) as port, chromium_page() as page:
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(f"http://127.0.0.1:{port}/?processing=off")
            selected_pair = await page.evaluate(SELECTED_PAIR_JS)
            await page.click("#start")
            await page.wait_for_function("window.omnicall.phase === 'connected'",
                                         timeout=20_000)
            await page.evaluate(TRACE_JS)
            # the test's silent mouth on the audio sender from now on (not the fake
            # microphone's beeps): the uplink carries what a quiet caller sends
            await page.evaluate(SAY_JS, base64.b64encode(bytes(960 * 2)).decode())
            session_id = await page.evaluate("window.omnicall.session")
            sessions = app[CALLS_KEY].sessions
            await wait_for(lambda: session_id in sessions, timeout_s=10)
            session = sessions[session_id]

            # the camera steps down: two thin samples in a row (4 s) once the estimate
            # has fallen; generous, the estimate takes a few seconds to come down
            try:
                await page.wait_for_function(LOWERED_JS, timeout=30_000)
                camera_lowered = await page.evaluate(CAMERA_JS)
            except Exception:  # noqa: BLE001 - reported with the trace below
                camera_lowered = await page.evaluate(CAMERA_JS)

            # the voice still gets through the same thin uplink: a turn answered
            last_turn = await page.evaluate(LAST_TURN_JS)
            before = await page.evaluate(INBOUND_AUDIO_JS)
            await say(page, "Can you still hear me?")
            await page.wait_for_function(reply_ended_js(last_turn + 1), timeout=30_000)
            after = await page.evaluate(INBOUND_AUDIO_JS)
            page_state = await page.evaluate(
                "({reconnects: window.omnicall.reconnects, phase: window.omnicall.phase,"
                " caption: document.getElementById('assistant-caption').textContent,"
                " said: window.omnicall.messages.filter(m => m.type === 'assistant_text')"
                ".map(m => [m.turn, m.delta]), trace: window.testTrace})")
            assert sessions.get(session_id) is session
            await page.click("#stop")
            await wait_for(lambda: len(sessions) == 0, timeout_s=10)
    finally:
        relay.close()
    assert not errors, errors
    assert selected_pair["outgoingBps"] == 60000 and selected_pair["rttS"] == 0.3, selected_pair
    summary = relay.summary()
    trace = page_state["trace"]
    # the camera went to half resolution and half its 5 fps
    assert camera_lowered["lowered"] and camera_lowered["scale"] == 2 \
        and camera_lowered["fps"] == 2, (camera_lowered, trace, summary)
    # the cap did its work on the uplink (its queue overflowed), and only there
    assert summary["up"].get("queue", 0) > 0 and summary["down"].get("dropped", 0) == 0, \
        summary
    # and the voice went on: the turn after the step-down was captioned and heard
    assert page_state["reconnects"] == 0 and page_state["phase"] == "connected", page_state
    assert [last_turn + 1, "Squawk!"] in page_state["said"], page_state
    assert "Squawk" in (page_state["caption"] or ""), page_state
    assert after["energy"] - before["energy"] > 1e-4, (before, after, trace)
    assert session.close_reason == "hangup"
