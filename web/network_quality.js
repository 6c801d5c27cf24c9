// omnicall page: the call's connection quality from RTCPeerConnection.getStats().
// - an indicator (#network-quality): good / fair / poor from audio loss, jitter and round-trip
//   time, the worse of the two directions; the thresholds are the server's
//   (app/network_quality.py QualityThresholds), so the page and the metrics agree;
// - a thin uplink lowers the camera before audio suffers: when the video sender is limited by
//   bandwidth (outbound-rtp qualityLimitationReason "bandwidth") or the available outgoing
//   bitrate stays below THIN_BPS (two samples in a row), the camera is sent at half resolution
//   and half frame rate (RTCRtpSender.setParameters); back to what it was after RECOVER_SAMPLES
//   roomy samples in a row (twice as many each time it has to lower again).
// Exposes window.omnicallNetwork = { classify, sampleFrom, cameraStep, applyCamera, watch }; the last
// sample is on window.omnicall.network (tests read it).
"use strict";

(() => {
  const LIMITS = { fairLoss: 0.02, poorLoss: 0.08, fairJitterS: 0.02, poorJitterS: 0.05,
    fairRttS: 0.25, poorRttS: 0.5 };
  const INTERVAL_MS = 2000;
  // available outgoing bitrate (the sender's bandwidth estimate) below which the camera would
  // take what the microphone needs (Opus ~40 kbps with its packet overhead); an aiortc server's
  // REMB keeps the estimate near 130 kbps even on loopback, so this is not set higher
  const THIN_BPS = 100_000;
  const RECOVERED_BPS = 150_000;
  const THIN_SAMPLES = 2; // 4 s
  const RECOVER_SAMPLES = 3; // 6 s, doubling each time it had to lower again, up to 1 min
  const MAX_RECOVER_SAMPLES = 30;
  const LABELS = { good: "Connection good", fair: "Connection fair", poor: "Connection poor" };

  /** "good" | "fair" | "poor" (null: nothing measured yet). */
  function classify(sample) {
    const worst = (a, b) => Math.max(a ?? 0, b ?? 0);
    const loss = worst(sample.lossIn, sample.lossOut);
    const jitter = worst(sample.jitterInS, sample.jitterOutS);
    const rtt = sample.rttS ?? 0;
    if ([sample.lossIn, sample.lossOut, sample.jitterInS, sample.jitterOutS, sample.rttS]
      .every((v) => v === undefined || v === null)) return null;
    if (loss >= LIMITS.poorLoss || jitter >= LIMITS.poorJitterS || rtt >= LIMITS.poorRttS) return "poor";
    if (loss >= LIMITS.fairLoss || jitter >= LIMITS.fairJitterS || rtt >= LIMITS.fairRttS) return "fair";
    return "good";
  }

  function lossSince(received, lost, before) {
    const expected = before ? (received - before.received) + (lost - before.lost) : received + lost;
    const missing = before ? lost - before.lost : lost;
    return expected > 0 ? Math.min(1, Math.max(0, missing / expected)) : undefined;
  }

  /** One sample from a getStats() report; ``prev`` carries the packet counts between samples. */
  function sampleFrom(report, prev = {}) {
    const s = { counts: {} };
    // the pair the transport sends on: Chromium flips it to "in-progress" while each consent
    // check is out, which on a thin uplink (checks queued behind video) is much of the time,
    // so "nominated && succeeded" alone missed the estimate on the very links it is for
    let selected;
    report.forEach((stat) => {
      if (stat.type === "transport" && stat.selectedCandidatePairId) selected = stat.selectedCandidatePairId;
    });
    const onPath = (pair) => (selected ? pair.id === selected
      : pair.nominated && pair.state === "succeeded");
    report.forEach((stat) => {
      const audio = stat.kind === "audio" || stat.mediaType === "audio";
      if (stat.type === "inbound-rtp" && audio) {
        s.jitterInS = stat.jitter;
        s.lossIn = lossSince(stat.packetsReceived || 0, stat.packetsLost || 0, prev.counts?.in);
        s.counts.in = { received: stat.packetsReceived || 0, lost: stat.packetsLost || 0 };
      } else if (stat.type === "remote-inbound-rtp" && audio) {
        s.jitterOutS = stat.jitter;
        s.lossOut = stat.fractionLost;
        if (stat.roundTripTime !== undefined) s.rttS = stat.roundTripTime;
      } else if (stat.type === "candidate-pair" && onPath(stat)) {
        if (s.rttS === undefined && stat.currentRoundTripTime !== undefined) s.rttS = stat.currentRoundTripTime;
        if (stat.availableOutgoingBitrate !== undefined) s.outgoingBps = stat.availableOutgoingBitrate;
      } else if (stat.type === "outbound-rtp" && stat.kind === "video") {
        s.videoLimitation = stat.qualityLimitationReason;
      }
    });
    s.quality = classify(s);
    return s;
  }

  /** The camera's next step: "lower", "restore" or null, from one sample and the state
   *  { lowered, thinSamples, goodSamples, recoverAfter } (updated in place). Lowered after
   *  THIN_SAMPLES thin samples in a row (not on a start-up blip); restored after recoverAfter
   *  roomy ones, which doubles each time it has to lower again (no see-saw). */
  function cameraStep(sample, cam) {
    const thin = sample.videoLimitation === "bandwidth"
      || (sample.outgoingBps !== undefined && sample.outgoingBps < THIN_BPS);
    cam.recoverAfter = cam.recoverAfter || RECOVER_SAMPLES;
    if (!cam.lowered) {
      cam.thinSamples = thin ? (cam.thinSamples || 0) + 1 : 0;
      if (cam.thinSamples < THIN_SAMPLES) return null;
      cam.lowered = true; cam.thinSamples = 0; cam.goodSamples = 0;
      if (cam.restoredOnce) cam.recoverAfter = Math.min(MAX_RECOVER_SAMPLES, cam.recoverAfter * 2);
      return "lower";
    }
    const roomy = !thin && (sample.outgoingBps === undefined || sample.outgoingBps >= RECOVERED_BPS);
    cam.goodSamples = roomy ? (cam.goodSamples || 0) + 1 : 0;
    if (cam.goodSamples < cam.recoverAfter) return null;
    cam.lowered = false; cam.goodSamples = 0; cam.restoredOnce = true;
    return "restore";
  }

  async function applyCamera(pc, step, cam) {
    const sender = pc.getSenders().find((x) => x.track && x.track.kind === "video");
    if (!sender) return;
    const p = sender.getParameters();
    if (!p.encodings || !p.encodings.length) return;
    const enc = p.encodings[0];
    if (step === "lower") {
      cam.base = { scale: enc.scaleResolutionDownBy, fps: enc.maxFramerate };
      enc.scaleResolutionDownBy = Math.max(2, (enc.scaleResolutionDownBy || 1) * 2);
      enc.maxFramerate = Math.max(1, Math.floor((enc.maxFramerate || 5) / 2));
    } else if (cam.base) {
      if (cam.base.scale === undefined) delete enc.scaleResolutionDownBy;
      else enc.scaleResolutionDownBy = cam.base.scale;
      if (cam.base.fps === undefined) delete enc.maxFramerate;
      else enc.maxFramerate = cam.base.fps;
    }
    await sender.setParameters(p);
  }

  function show(el, sample) {
    if (!el) return;
    const q = sample.quality;
    const pct = (x) => (x === undefined ? "?" : `${(100 * x).toFixed(1)} %`);
    const ms = (x) => (x === undefined ? "?" : `${Math.round(1000 * x)} ms`);
    el.title = `loss ${pct(Math.max(sample.lossIn ?? 0, sample.lossOut ?? 0))}, jitter `
      + `${ms(Math.max(sample.jitterInS ?? 0, sample.jitterOutS ?? 0))}, round trip ${ms(sample.rttS)}`;
    if (!q || el.dataset.quality === q) return; // announce changes only (aria-live)
    el.dataset.quality = q;
    el.textContent = LABELS[q];
    el.hidden = false;
  }

  /** Sample ``pc`` every 2 s while ``alive()``: the indicator, the camera, window.omnicall. */
  function watch(pc, alive, el = document.getElementById("network-quality")) {
    let prev = {};
    const cam = { lowered: false, thinSamples: 0, goodSamples: 0, base: null };
    const page = window.omnicall || {};
    const tick = async () => {
      if (!alive() || pc.connectionState === "closed") {
        clearInterval(timer);
        if (el) { el.hidden = true; delete el.dataset.quality; }
        return;
      }
      let report;
      try { report = await pc.getStats(); } catch { return; }
      const sample = sampleFrom(report, prev);
      prev = sample;
      page.network = { quality: sample.quality, lossIn: sample.lossIn, lossOut: sample.lossOut,
        jitterInS: sample.jitterInS, jitterOutS: sample.jitterOutS, rttS: sample.rttS,
        outgoingBps: sample.outgoingBps, cameraLowered: cam.lowered };
      show(el, sample);
      const step = cameraStep(sample, cam);
      if (step) {
        page.network.cameraLowered = cam.lowered;
        applyCamera(pc, step, cam).catch(() => {});
      }
    };
    const timer = setInterval(tick, INTERVAL_MS);
    tick();
    return () => clearInterval(timer);
  }

  window.omnicallNetwork = { classify, sampleFrom, cameraStep, applyCamera, watch, LIMITS };
})();
