// omnicall page: the view of a call made with the client library (client/omnicall.js, which
// holds the connection: getUserMedia's constraints, RTCPeerConnection, POST /offer, the
// "events" data channel, hangup, reconnection with resume). Here: the buttons, captions,
// state and timings (view.js), the device pickers (devices.js), the network badge
// (network_quality.js), push-to-talk's keys (talk.js), the token from the URL, the modes.
// Modes: "call" (/), "kiosk" (/kiosk: starts alone, big captions, resets when idle) and
// "companion" (/companion: phone paired with glasses, audio first, 1 fps low-res video).
import { OmnicallCall, fetchConfig, mediaConstraints, openMedia as openStream }
  from "./client/omnicall.js";

const view = window.omnicallView;
const devices = window.omnicallDevices;
const params = new URLSearchParams(location.search);
const path = location.pathname.replace(/\/+$/, "");
const MODE = path === "/kiosk" || params.get("mode") === "kiosk" ? "kiosk"
  : path === "/companion" || params.get("mode") === "companion" ? "companion" : "call";
document.body.classList.add(MODE);
// The microphone's processing (echo cancellation, noise suppression, AGC) is on for people as
// the library sets it per mode; tests may turn it all off.
const processing = params.get("processing") !== "off";
// the mode's camera (companion: 320x240 at 1 fps; else 640x480 at 15 fps, 5 of them sent)
const VIDEO = mediaConstraints({ mode: MODE }).video;
const ATTRACT_AFTER_MS = 20_000;

const $ = (id) => document.getElementById(id);
const ui = {
  start: $("start"), stop: $("stop"), interrupt: $("interrupt"), mute: $("mute"), talk: $("talk"),
  camera: $("camera"), self: $("self"), remote: $("remote"), tapButton: $("tap-button"),
  mic: $("mic-select"), cam: $("cam-select"), speaker: $("speaker-select"),
  textForm: $("text-form"), textInput: $("text-input"), textSend: $("text-send"),
  download: $("download"),
};

// State visible to people (the page) and to tests (window.omnicall); the connection's own
// (pc, channel, session, resumed, reconnects) is read from the call.
let pastReconnects = 0; // of the calls before this one
const state = {
  mode: MODE, phase: "idle", messages: [], call: null, stream: null, config: null, token: "",
  muted: false, cameraOn: true, lastActivity: Date.now(), lastSpeech: Date.now(),
  audioBlocked: false,
  get pc() { return this.call ? this.call.pc : null; },
  get channel() { return this.call ? this.call.channel : null; },
  get session() { return this.call ? this.call.session : null; },
  get resumed() { return Boolean(this.call && this.call.resumed); },
  get reconnects() { return pastReconnects + (this.call ? this.call.reconnects : 0); },
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
    state.config = await fetchConfig("/");
  } catch (err) {
    state.config = null; // server unreachable: the caller reports it
    throw err;
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
  return mediaConstraints({ mode: MODE, processing, config: state.config,
                            camera: state.cameraOn && videoAllowed(),
                            micId: ui.mic.value, camId: ui.cam.value });
}

async function openMedia() {
  return openStream(constraints(), () => {
    view.log("camera unavailable; continuing with audio only");
    view.showError("No camera could be opened: the assistant will only hear you.");
  });
}

/** A camera message's thumbnail is shown, never kept: what the page keeps has its size only. */
function withoutImage(msg) {
  const { thumb, ...kept } = msg;
  kept.thumbChars = typeof thumb === "string" ? thumb.length : 0;
  return kept;
}

function onMessage(msg) {
  state.messages.push(msg.type === "camera" ? withoutImage(msg) : msg);
  if (state.messages.length > 1000) state.messages.splice(0, state.messages.length - 1000);
  view.show(msg);
  switch (msg.type) {
    case "turn":
      state.lastActivity = Date.now();
      if (msg.role === "user") state.lastSpeech = Date.now();
      break;
    case "stats":
      state.lastStats = msg;
      break;
    case "goodbye":
      // the server ends the call and says why: the call reconnects after a restart ("ended"
      // follows otherwise)
      view.showError(msg.reason === "shutdown" ? `${msg.message} Reconnecting when it is back…`
        : msg.message);
      break;
    case "degrade":
      state.degrade = msg.level;
      break;
    default:
      break;
  }
}

function onConnected() {
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
}

function onEnded({ reason }) {
  if (reason === "goodbye") {
    stop(false); // the goodbye's message is shown
  } else if (reason === "unreachable") {
    stop(false);
    view.showError("Disconnected: the server cannot be reached. Check your network, "
      + "then press Reconnect.");
    ui.start.textContent = "Reconnect";
    view.setStatus("Not connected.");
    if (MODE === "kiosk") setTimeout(start, 10_000); // a kiosk keeps trying, slowly
  } // hangup, closed, failed: this page did it (stop, start)
}

/** What the page shows of the call's life: ``call`` is the page's call while it is one. */
function watchCall(call) {
  const mine = (fn) => (detail) => { if (state.call === call) fn(detail); };
  call.on("message", mine(onMessage));
  call.on("connectionstatechange", mine(({ state: s }) => view.log(`connection ${s}`)));
  call.on("connected", mine(onConnected));
  call.on("disconnected", mine(() => view.setStatus("Connection interrupted; trying to recover…")));
  call.on("reconnecting", mine(() => {
    state.phase = "reconnecting";
    view.setState("idle");
    view.setStatus("Connection lost. Reconnecting…");
  }));
  call.on("reconnectfailed", mine(({ error }) => view.log(`reconnect failed: ${error.message || error}`)));
  call.on("ended", mine(onEnded));
  call.on("peerconnection", mine(({ pc }) => {
    window.omnicallNetwork?.watch(pc, () => state.pc === pc); // network_quality.js: indicator, camera
  }));
  call.on("track", mine(({ stream }) => {
    ui.remote.srcObject = stream;
    ui.remote.play().then(() => { state.audioBlocked = false; view.showTap(false); })
      .catch(() => {
        state.audioBlocked = true; // autoplay policy: a touch is needed to hear the assistant
        view.showTap(true);
        view.log("touch the page to enable sound");
      });
  }));
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
  if (state.call) pastReconnects += state.call.reconnects;
  state.call = new OmnicallCall({ url: "/", mode: MODE, token: state.token, config: state.config,
                                  stream: state.stream });
  watchCall(state.call);
  try {
    await state.call.start();
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

/** The call ends: with a hangup (the server keeps nothing), or without (``hangup`` false:
 *  the call failed, or the server ended it). Microphone and camera stop at once. */
function stop(hangup = true) {
  const call = state.call;
  if (call && call.state !== "ended") {
    if (hangup) call.hangUp(); else call.close();
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
  if (state.call && state.call.interrupt()) view.log("interrupt sent");
}

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

/** A typed message goes into the same conversation; the answer is spoken and captioned. */
function sendText(event) {
  event.preventDefault();
  const text = ui.textInput.value.trim();
  if (!text || !state.call || !state.call.sendText(text)) return;
  ui.textInput.value = "";
  view.log(`you typed: ${text}`);
}

function toggleMute() {
  state.muted = !state.muted;
  if (state.stream && state.call) state.call.mute(state.muted);
  ui.mute.setAttribute("aria-pressed", String(state.muted));
  ui.mute.textContent = state.muted ? "Unmute" : "Mute";
}

function toggleCamera() {
  if (!videoAllowed()) return;
  state.cameraOn = !state.cameraOn;
  if (state.stream && state.call) state.call.setCamera(state.cameraOn);
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
    state.lastSpeech = Date.now();
    start();
  }
}

ui.start.addEventListener("click", start);
ui.stop.addEventListener("click", () => stop(true));
ui.interrupt.addEventListener("click", interrupt);
const talk = window.omnicallTalk.attach(ui.talk, (held) => { if (state.call) state.call.talk(held); },
  (line) => view.log(line));
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
state.simulateDrop = () => { if (state.pc) { state.pc.close(); state.call.reconnect(); } };

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
