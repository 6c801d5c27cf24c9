// omnicall page: getUserMedia -> RTCPeerConnection -> POST /offer; plays the assistant,
// shows captions, state and timings from the "events" data channel; reconnects by itself.
// Modes: "call" (/), "kiosk" (/kiosk: starts alone, big captions, resets when idle) and
// "companion" (/companion: phone paired with glasses, audio first, 1 fps low-res video).
"use strict";

const view = window.omnicallView;
const devices = window.omnicallDevices;
const params = new URLSearchParams(location.search);
const path = location.pathname.replace(/\/+$/, "");
const MODE = path === "/kiosk" || params.get("mode") === "kiosk" ? "kiosk"
  : path === "/companion" || params.get("mode") === "companion" ? "companion" : "call";
document.body.classList.add(MODE);
// The microphone's processing (echo cancellation, noise suppression, AGC) is on for people as
// devices.js sets it per mode; tests may turn it all off.
const processing = params.get("processing") !== "off";
const VIDEO = MODE === "companion" ? { width: 320, height: 240, frameRate: 1 }
  : { width: 640, height: 480, frameRate: 15 };
const COMPANION_FPS = 1;
// The self-view stays at the camera's 15 fps; the server samples --video-fps (2) frames a
// second, so the call sends 5: a third of the uplink and of the server's VP8 decoding.
const SEND_FPS = MODE === "companion" ? COMPANION_FPS : 5;
// The server scales frames to at most 448x336 before the model sees them: a 250 kbps cap
// (50 kbit a frame at 5 fps) keeps them sharp, and every packet not sent is one the server
// does not decrypt, parse and reassemble (bench/load.py replays this rate).
const SEND_MAX_BITRATE_BPS = MODE === "companion" ? 100_000 : 250_000;
const DISCONNECT_GRACE_MS = 2000;
// A hangup travels on the data channel (SCTP): closing the connection at once would drop it
// when its packet is lost (the retransmission never goes), and the server would keep the
// call for a resume. The connection stays open, sending nothing, until the server closes
// it (it got the hangup) or this long has passed (a few SCTP retransmissions).
const HANGUP_GRACE_MS = 3000;
const ATTRACT_AFTER_MS = 20_000;

const $ = (id) => document.getElementById(id);
const ui = {
  start: $("start"), stop: $("stop"), interrupt: $("interrupt"), mute: $("mute"), talk: $("talk"),
  camera: $("camera"), self: $("self"), remote: $("remote"), tapButton: $("tap-button"),
  mic: $("mic-select"), cam: $("cam-select"), speaker: $("speaker-select"),
  textForm: $("text-form"), textInput: $("text-input"), textSend: $("text-send"),
  download: $("download"),
};

// State visible to people (the page) and to tests (window.omnicall).
const state = {
  mode: MODE, phase: "idle", session: null, resumed: false, reconnects: 0, messages: [],
  pc: null, channel: null, stream: null, config: null, token: "", muted: false,
  cameraOn: true, lastActivity: Date.now(), lastSpeech: Date.now(), audioBlocked: false,
};
window.omnicall = state;

function readToken() {
  const match = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (match) {
    sessionStorage.setItem("omnicall-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search); // keep it out of logs
  }
  return sessionStorage.getItem("omnicall-token") || "";
}

async function loadConfig() {
  if (state.config) return state.config;
  try {
    const res = await fetch("/config");
    state.config = res.ok ? await res.json() : {};
  } catch {
    state.config = null; // server unreachable: the caller reports it
    throw new Error("the server cannot be reached");
  }
  return state.config;
}

/** `/config` says `video: false` (--no-video): the camera is never asked for nor sent. */
function videoAllowed() {
  return !(state.config && state.config.video === false);
}

/** The camera state shown next to the self view: live while a call's camera track runs. */
function refreshCamera() {
  const track = state.stream && state.stream.getVideoTracks()[0];
  view.setCameraLive(Boolean(videoAllowed() && state.cameraOn && track
    && track.readyState === "live" && track.enabled));
}

function applyServerConfig() {
  if (videoAllowed() || $("camera-note")) return;
  refreshCamera();
  state.cameraOn = false;
  ui.camera.disabled = true;
  ui.camera.setAttribute("aria-pressed", "false");
  ui.camera.textContent = "Camera off";
  ui.cam.closest("label").hidden = true;
  const note = document.createElement("span");
  note.id = "camera-note";
  note.className = "note";
  note.textContent = "camera off on this server";
  ui.camera.after(note);
  const attract = document.querySelector("#attract p:not(.attract-title)");
  if (attract) attract.textContent = "I can hear you. Ask me anything.";
}

function constraints() {
  return devices.constraints({ mode: MODE, processing, config: state.config, video: VIDEO,
                               cameraOn: state.cameraOn && videoAllowed(),
                               micId: ui.mic.value, camId: ui.cam.value });
}

async function openMedia() {
  return devices.open(constraints(), () => {
    view.log("camera unavailable; continuing with audio only");
    view.showError("No camera could be opened: the assistant will only hear you.");
  });
}

function waitForIceGathering(pc, timeoutMs = 3000) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => { pc.removeEventListener("icegatheringstatechange", check); resolve(); };
    const check = () => { if (pc.iceGatheringState === "complete") done(); };
    pc.addEventListener("icegatheringstatechange", check);
    setTimeout(done, timeoutMs);
  });
}

/** A camera message's thumbnail is shown, never kept: what the page keeps has its size only. */
function withoutImage(msg) {
  const { thumb, ...kept } = msg;
  kept.thumbChars = typeof thumb === "string" ? thumb.length : 0;
  return kept;
}

function onMessage(raw) {
  let msg;
  try { msg = JSON.parse(raw); } catch { return; }
  state.messages.push(msg.type === "camera" ? withoutImage(msg) : msg);
  if (state.messages.length > 1000) state.messages.splice(0, state.messages.length - 1000);
  view.show(msg);
  switch (msg.type) {
    case "turn":
      state.lastActivity = Date.now();
      if (msg.role === "user") state.lastSpeech = Date.now();
      break;
    case "state":
      state.session = msg.session;
      break;
    case "stats":
      state.lastStats = msg;
      break;
    case "goodbye":
      // the server ends the call and says why: a restart is worth waiting for, the rest not
      if (msg.reason === "shutdown") {
        view.showError(`${msg.message} Reconnecting when it is back…`);
        reconnect();
      } else {
        stop(false);
        view.showError(msg.message);
      }
      break;
    case "degrade":
      state.degrade = msg.level;
      break;
    default:
      break;
  }
}

class OfferRefused extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

/** One peer connection + offer/answer; ``resume`` asks the server to continue the call. */
async function connect(resume) {
  const config = await loadConfig();
  const pc = new RTCPeerConnection({ iceServers: config.iceServers || [] });
  state.pc = pc;
  for (const track of state.stream.getTracks()) {
    if (track.kind === "video" && !videoAllowed()) continue; // never offered
    const sender = pc.addTrack(track, state.stream);
    if (track.kind === "video") {
      const p = sender.getParameters();
      p.degradationPreference = MODE === "companion" ? "maintain-framerate" : "maintain-resolution";
      if (p.encodings && p.encodings.length) {
        p.encodings[0].maxFramerate = SEND_FPS;
        p.encodings[0].maxBitrate = SEND_MAX_BITRATE_BPS;
      }
      sender.setParameters(p).catch(() => {});
    }
  }
  const channel = pc.createDataChannel("events");
  state.channel = channel;
  channel.onmessage = (e) => onMessage(e.data);
  channel.onclose = () => { if (state.pc === pc && state.phase === "connected") reconnect(); };
  pc.ontrack = (e) => {
    ui.remote.srcObject = e.streams[0] || new MediaStream([e.track]);
    ui.remote.play().then(() => { state.audioBlocked = false; view.showTap(false); })
      .catch(() => {
        state.audioBlocked = true; // autoplay policy: a touch is needed to hear the assistant
        view.showTap(true);
        view.log("touch the page to enable sound");
      });
  };
  pc.onconnectionstatechange = () => onConnectionState(pc);
  window.omnicallNetwork?.watch(pc, () => state.pc === pc); // network_quality.js: indicator, camera
  await pc.setLocalDescription(await pc.createOffer());
  await waitForIceGathering(pc);
  const body = { sdp: pc.localDescription.sdp, type: pc.localDescription.type };
  if (resume && state.session) body.resume = state.session;
  if (MODE === "companion") body.video_fps = COMPANION_FPS;
  body.mode = MODE; // the server's --echo-cancel / --noise-suppression auto follow it
  const headers = { "Content-Type": "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const res = await fetch("/offer", { method: "POST", headers, body: JSON.stringify(body) });
  const answer = await res.json().catch(() => ({}));
  if (!res.ok) {
    pc.close();
    throw new OfferRefused(res.status, answer.error || res.statusText);
  }
  await pc.setRemoteDescription({ sdp: answer.sdp, type: answer.type });
  state.session = answer.session;
  state.resumed = Boolean(answer.resumed);
  return pc;
}

function onConnectionState(pc) {
  if (state.pc !== pc) return;
  const s = pc.connectionState;
  view.log(`connection ${s}`);
  if (s === "connected") {
    state.phase = "connected";
    ui.start.textContent = "Start call";
    state.lastActivity = Date.now();
    view.showError("");
    view.setState("listening");
    view.setStatus(state.reconnects ? (state.resumed ? "Reconnected. Go on…"
      : "Reconnected (a new conversation). Listening…") : "Connected. Listening…");
    ui.stop.disabled = false;
    ui.interrupt.disabled = false;
    ui.talk.disabled = false;
    ui.mute.disabled = false;
    ui.textInput.disabled = false;
    ui.textSend.disabled = false;
  } else if (s === "failed") {
    reconnect();
  } else if (s === "disconnected") {
    view.setStatus("Connection interrupted; trying to recover…");
    setTimeout(() => {
      if (state.pc === pc && pc.connectionState !== "connected") reconnect();
    }, DISCONNECT_GRACE_MS);
  }
}

function describeRefusal(err) {
  if (err.status === 503) return `The assistant is busy right now (${err.message}). Try again in a minute.`;
  if (err.status === 401 && state.token) {
    sessionStorage.removeItem("omnicall-token");
    state.token = "";
    return "The access token was not accepted: check the link you were given (it ends in #token=…) and open it again.";
  }
  if (err.status === 401) return "This assistant needs an access token: open the link you were given (it ends in #token=…).";
  if (err.status === 403) return `This page may not start calls on that server: ${err.message}`;
  if (err.status === 429) return "Too many attempts from this address; wait a minute and try again.";
  return err.message;
}

async function start() {
  view.showError("");
  ui.start.disabled = true;
  state.phase = "starting";
  view.setStatus("Asking for microphone and camera…");
  try {
    const config = await loadConfig();
    applyServerConfig();
    if (!videoAllowed()) view.setStatus("Asking for the microphone…");
    if (config.tokenRequired && !state.token && MODE !== "kiosk") {
      state.token = (window.prompt("Access token for this assistant:") || "").trim();
      if (state.token) sessionStorage.setItem("omnicall-token", state.token);
    }
    state.stream = await openMedia();
  } catch (err) {
    view.showError(err && err.name ? devices.explainError(err) : `Could not start: ${err.message}`);
    return failStart();
  }
  ui.self.srcObject = state.stream.getVideoTracks().length ? state.stream : null;
  state.stream.getVideoTracks().forEach((t) => t.addEventListener("ended", refreshCamera));
  refreshCamera();
  devices.list(ui).catch(() => {});
  view.setStatus("Connecting…");
  try {
    await connect(false);
  } catch (err) {
    view.showError(`Could not start the call: ${describeRefusal(err)}`);
    stop(false);
    return failStart();
  }
}

function failStart() {
  state.phase = "idle";
  ui.start.textContent = "Start call";
  ui.start.disabled = false;
  view.setStatus("Not connected.");
  if (MODE === "kiosk") setTimeout(start, 3000); // a kiosk keeps trying on its own
}

/** How long the page tries to get a dropped call back before it gives up and says so. */
function reconnectGiveUpMs() {
  const s = state.config && state.config.reconnectGiveUpS;
  return (typeof s === "number" && s > 0 ? s : 30) * 1000;
}

let reconnecting = null;
function reconnect() {
  if (reconnecting || state.phase === "idle") return reconnecting;
  reconnecting = (async () => {
    state.phase = "reconnecting";
    view.setState("idle");
    view.setStatus("Connection lost. Reconnecting…");
    const old = state.pc;
    state.pc = null;
    if (old) old.close(); // no hangup: the server keeps the conversation for a while
    const began = Date.now();
    let delay = 500;
    while (state.phase === "reconnecting") {
      try {
        const pc = await connect(true);
        state.reconnects += 1;
        const ok = await new Promise((resolve) => {
          const t0 = Date.now();
          const poll = setInterval(() => {
            if (pc.connectionState === "connected") { clearInterval(poll); resolve(true); }
            else if (Date.now() - t0 > 8000 || pc.connectionState === "failed") {
              clearInterval(poll); resolve(false);
            }
          }, 100);
        });
        if (ok) break;
        pc.close();
      } catch (err) {
        view.log(`reconnect failed: ${err.message || err}`);
      }
      if (Date.now() - began > reconnectGiveUpMs()) {
        stop(false);
        view.showError("Disconnected: the server cannot be reached. Check your network, "
          + "then press Reconnect.");
        ui.start.textContent = "Reconnect";
        view.setStatus("Not connected.");
        if (MODE === "kiosk") setTimeout(start, 10_000); // a kiosk keeps trying, slowly
        break;
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 5000);
    }
    reconnecting = null;
  })();
  return reconnecting;
}

function closeAfterHangup(pc, channel) {
  let timer = null;
  const close = () => { clearTimeout(timer); pc.close(); };
  timer = setTimeout(close, HANGUP_GRACE_MS);
  channel.addEventListener("close", close);
  pc.addEventListener("connectionstatechange", () => {
    if (pc.connectionState === "closed" || pc.connectionState === "failed") close();
  });
}

function stop(hangup = true) {
  const pc = state.pc;
  const channel = state.channel;
  state.pc = null; state.channel = null;
  if (pc && hangup && channel && channel.readyState === "open") {
    channel.send(JSON.stringify({ type: "hangup" }));
    closeAfterHangup(pc, channel); // microphone and camera stop now, below
  } else if (pc) {
    pc.close();
  }
  if (state.stream) state.stream.getTracks().forEach((t) => t.stop());
  state.stream = null;
  state.phase = "idle";
  view.cameraSeenEnd(); // the call is over: no thumbnail stays
  view.showFacts([]); // nor what was made out of it
  refreshCamera();
  ui.self.srcObject = null;
  ui.remote.srcObject = null;
  ui.start.disabled = false;
  ui.stop.disabled = true;
  ui.interrupt.disabled = true;
  talk.release();
  ui.talk.disabled = true;
  ui.mute.disabled = true;
  ui.textInput.disabled = true;
  ui.textSend.disabled = true;
  view.setState("idle");
  view.setStatus("Call ended. Press Start to talk again.");
}

function interrupt() {
  if (state.channel && state.channel.readyState === "open") {
    state.channel.send(JSON.stringify({ type: "interrupt" }));
    view.log("interrupt sent");
  }
}

/** A typed message goes into the same conversation; the answer is spoken and captioned. */
/** Save the conversation shown on the page (made here, from what the page received). */
function downloadTranscript() {
  const blob = new Blob([view.transcriptLines()], { type: "application/x-ndjson" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = `omnicall-${new Date().toISOString().replace(/[:.]/g, "-")}.jsonl`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

function sendText(event) {
  event.preventDefault();
  const text = ui.textInput.value.trim();
  if (!text || !state.channel || state.channel.readyState !== "open") return;
  state.channel.send(JSON.stringify({ type: "text", text }));
  ui.textInput.value = "";
  view.log(`you typed: ${text}`);
}

function toggleMute() {
  state.muted = !state.muted;
  if (state.stream) state.stream.getAudioTracks().forEach((t) => { t.enabled = !state.muted; });
  ui.mute.setAttribute("aria-pressed", String(state.muted));
  ui.mute.textContent = state.muted ? "Unmute" : "Mute";
}

function toggleCamera() {
  if (!videoAllowed()) return;
  state.cameraOn = !state.cameraOn;
  if (state.stream) state.stream.getVideoTracks().forEach((t) => { t.enabled = state.cameraOn; });
  ui.camera.setAttribute("aria-pressed", String(state.cameraOn));
  ui.camera.textContent = state.cameraOn ? "Camera on" : "Camera off";
  refreshCamera();
}

async function switchDevice(kind) {
  if (!state.stream || !state.pc || (kind === "video" && !videoAllowed())) return;
  const track = await devices.switchTrack(state.pc, state.stream, kind, constraints(), VIDEO);
  if (!track) return;
  if (kind === "video") track.addEventListener("ended", refreshCamera);
  refreshCamera();
  view.log(`${kind} device switched`);
}

/** Kiosk upkeep: attract screen when nobody talks, a fresh conversation after long idle. */
function kioskTick() {
  const idleMs = Date.now() - state.lastSpeech;
  const quietMs = Date.now() - state.lastActivity;
  view.showAttract(state.phase !== "connected" || quietMs > ATTRACT_AFTER_MS);
  const resetMs = ((state.config && state.config.kioskIdleS) || 90) * 1000;
  if (state.phase === "connected" && idleMs > resetMs) {
    view.log("idle: starting a fresh conversation");
    stop(true);
    view.clearCaptions();
    state.session = null;
    state.lastSpeech = Date.now();
    start();
  }
}

ui.start.addEventListener("click", start);
ui.stop.addEventListener("click", () => stop(true));
ui.interrupt.addEventListener("click", interrupt);
const talk = window.omnicallTalk.attach(ui.talk, (message) => {
  if (state.channel && state.channel.readyState === "open") state.channel.send(JSON.stringify(message));
}, (line) => view.log(line));
ui.textForm.addEventListener("submit", sendText);
ui.download.addEventListener("click", downloadTranscript);
ui.mute.addEventListener("click", toggleMute);
ui.camera.addEventListener("click", toggleCamera);
ui.mic.addEventListener("change", () => switchDevice("audio").catch((e) => view.log(e.message)));
ui.cam.addEventListener("change", () => switchDevice("video").catch((e) => view.log(e.message)));
ui.speaker.addEventListener("change", () => {
  if (typeof ui.remote.setSinkId === "function") {
    ui.remote.setSinkId(ui.speaker.value).catch((e) => view.log(`speaker: ${e.message}`));
  }
});
ui.tapButton.addEventListener("click", () => {
  ui.remote.play().then(() => { state.audioBlocked = false; }).catch(() => {});
  view.showTap(false);
  if (MODE === "kiosk" && document.documentElement.requestFullscreen) {
    document.documentElement.requestFullscreen().catch(() => {});
  }
  if (state.phase === "idle") start();
});
window.addEventListener("pagehide", () => stop(true));
// test hook: drop the network path without a hangup, as a Wi-Fi change would
state.simulateDrop = () => { if (state.pc) { state.pc.close(); reconnect(); } };

state.token = readToken();
// show at once whether this server takes the camera (start() asks again if this fails)
loadConfig().then(applyServerConfig).catch(() => {});
if (MODE === "kiosk") {
  view.setStatus("Starting…");
  kioskTick();
  setInterval(kioskTick, 1000);
  start();
} else if (params.get("autostart") === "1") {
  start();
}
