// omnicall call page: getUserMedia -> RTCPeerConnection -> POST /offer; plays the
// assistant's audio, shows captions and turn events from the "events" data channel.
"use strict";

const params = new URLSearchParams(location.search);
// Echo cancellation, noise suppression and AGC stay ON for people; tests may turn them off.
const processing = params.get("processing") !== "off";
const MAX_EVENTS = 200;

const $ = (id) => document.getElementById(id);
const ui = {
  start: $("start"), stop: $("stop"), interrupt: $("interrupt"), camera: $("camera"),
  status: $("status"), error: $("error"), self: $("self"), remote: $("remote"),
  userCaption: $("user-caption"), assistantCaption: $("assistant-caption"), events: $("events"),
};

// State visible to people (the page) and to tests (window.omnicall).
const state = { phase: "idle", session: null, messages: [], pc: null, channel: null, stream: null };
window.omnicall = state;

function setStatus(text) { ui.status.textContent = text; }
function showError(text) { ui.error.textContent = text; ui.error.hidden = !text; }

function logEvent(text) {
  const li = document.createElement("li");
  li.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  ui.events.prepend(li);
  while (ui.events.childElementCount > MAX_EVENTS) ui.events.lastElementChild.remove();
}

function explainMediaError(err) {
  switch (err && err.name) {
    case "NotAllowedError":
      return "Microphone/camera permission was denied. Allow access in the address bar, then press Start again.";
    case "NotFoundError":
      return "No microphone was found. Connect one and press Start again.";
    case "NotReadableError":
      return "The microphone or camera is in use by another program. Close it and try again.";
    case "SecurityError":
      return "The browser only allows the microphone on https:// or localhost pages.";
    default:
      return `Could not open the microphone: ${err && err.message ? err.message : err}`;
  }
}

async function openMedia() {
  const audio = { echoCancellation: processing, noiseSuppression: processing,
                  autoGainControl: processing, channelCount: 1 };
  const video = ui.camera.checked ? { width: 640, height: 480, frameRate: 15 } : false;
  try {
    return await navigator.mediaDevices.getUserMedia({ audio, video });
  } catch (err) {
    if (video && (err.name === "NotFoundError" || err.name === "NotReadableError")) {
      logEvent("camera unavailable; continuing with audio only");
      return await navigator.mediaDevices.getUserMedia({ audio, video: false });
    }
    throw err;
  }
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

function onMessage(raw) {
  let msg;
  try { msg = JSON.parse(raw); } catch { return; }
  state.messages.push(msg);
  if (state.messages.length > 1000) state.messages.splice(0, state.messages.length - 1000);
  switch (msg.type) {
    case "transcript": {
      ui.userCaption.textContent = msg.text;
      ui.userCaption.classList.toggle("partial", !msg.final);
      if (msg.final) logEvent(`you: ${msg.text}`);
      break;
    }
    case "assistant_text":
      ui.assistantCaption.textContent += msg.delta;
      break;
    case "turn":
      if (msg.role === "assistant" && msg.phase === "start") {
        ui.assistantCaption.textContent = "";
        setStatus("Assistant is speaking…");
      } else if (msg.role === "assistant" && msg.phase === "end") {
        setStatus(msg.interrupted ? "Interrupted. Listening…" : "Listening…");
      } else if (msg.role === "user" && msg.phase === "start") {
        setStatus("Listening to you…");
      } else if (msg.role === "user" && msg.phase === "end") {
        setStatus("Thinking…");
      }
      logEvent(`${msg.role} turn ${msg.phase}${msg.interrupted ? " (interrupted)" : ""}`);
      break;
    case "timing":
      logEvent(`turn ${msg.turn}: ${msg.stage} at +${msg.ms} ms`);
      break;
    case "error":
      showError(`The assistant reported a problem: ${msg.message}`);
      logEvent(`error: ${msg.message}`);
      break;
    case "state":
      state.session = msg.session;
      logEvent(`server session ${msg.session} ${msg.state}`);
      break;
    case "stats":
      state.lastStats = msg;
      break;
    case "degrade": {
      const words = { normal: "back to normal", text_first: "busy: answering in text first",
                      fallback: "very busy: using a lighter assistant" };
      state.degrade = msg.level;
      logEvent(`server ${words[msg.level] || msg.level}`);
      if (msg.level !== "normal") setStatus(`The server is ${words[msg.level]}.`);
      break;
    }
    default:
      break;
  }
}

async function start() {
  showError("");
  ui.start.disabled = true;
  state.phase = "starting";
  setStatus("Asking for microphone and camera…");
  let stream;
  try {
    stream = await openMedia();
  } catch (err) {
    showError(explainMediaError(err));
    setStatus("Not connected.");
    ui.start.disabled = false;
    state.phase = "idle";
    return;
  }
  state.stream = stream;
  ui.self.srcObject = stream.getVideoTracks().length ? stream : null;

  const pc = new RTCPeerConnection({ iceServers: [] });
  state.pc = pc;
  for (const track of stream.getTracks()) {
    const sender = pc.addTrack(track, stream);
    if (track.kind === "video") {
      const p = sender.getParameters();
      p.degradationPreference = "maintain-resolution";
      sender.setParameters(p).catch(() => {});
    }
  }
  const channel = pc.createDataChannel("events");
  state.channel = channel;
  channel.onmessage = (e) => onMessage(e.data);
  pc.ontrack = (e) => {
    ui.remote.srcObject = e.streams[0] || new MediaStream([e.track]);
    ui.remote.play().catch(() => logEvent("press anywhere to enable sound"));
  };
  pc.onconnectionstatechange = () => {
    const s = pc.connectionState;
    logEvent(`connection ${s}`);
    if (s === "connected") {
      state.phase = "connected";
      setStatus("Connected. Listening…");
      ui.stop.disabled = false;
      ui.interrupt.disabled = false;
    } else if (s === "failed") {
      showError("The connection failed. Check your network (a firewall may block WebRTC) and press Start again.");
      stop();
    } else if (s === "disconnected") {
      setStatus("Connection interrupted; trying to recover…");
    }
  };

  setStatus("Connecting…");
  try {
    await pc.setLocalDescription(await pc.createOffer());
    await waitForIceGathering(pc);
    const res = await fetch("/offer", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ sdp: pc.localDescription.sdp, type: pc.localDescription.type }),
    });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) {
      const why = body.error || res.statusText;
      throw new Error(res.status === 503 ? `The server is busy: ${why}` : why);
    }
    await pc.setRemoteDescription({ sdp: body.sdp, type: body.type });
    state.session = body.session;
  } catch (err) {
    showError(`Could not start the call: ${err.message || err}`);
    stop();
  }
}

function stop() {
  if (state.channel && state.channel.readyState === "open") {
    state.channel.send(JSON.stringify({ type: "hangup" }));
  }
  if (state.pc) state.pc.close();
  if (state.stream) state.stream.getTracks().forEach((t) => t.stop());
  state.pc = null; state.channel = null; state.stream = null;
  state.phase = "idle";
  ui.self.srcObject = null;
  ui.remote.srcObject = null;
  ui.start.disabled = false;
  ui.stop.disabled = true;
  ui.interrupt.disabled = true;
  setStatus("Call ended. Press Start to talk again.");
}

function interrupt() {
  if (state.channel && state.channel.readyState === "open") {
    state.channel.send(JSON.stringify({ type: "interrupt" }));
    logEvent("interrupt sent");
  }
}

ui.start.addEventListener("click", start);
ui.stop.addEventListener("click", stop);
ui.interrupt.addEventListener("click", interrupt);
window.addEventListener("pagehide", stop);
if (params.get("autostart") === "1") start();
