// omnicall client: a call to an omnicall server from a browser, framework-free (an ES module,
// no dependencies, no build step). The microphone and camera -> RTCPeerConnection -> POST
// /offer; the server's messages on the "events" data channel come out as events; the call
// reconnects by itself and resumes its conversation. The protocol: docs/protocol.md and
// protocol.schema.json beside the page (version 1.0). Types: omnicall.d.ts.
//
//   import { connect } from "/static/client/omnicall.js";
//   const call = await connect({ url: "https://assistant.example/", mode: "call" });
//   call.on("assistant_text", (m) => { captions.textContent += m.delta; });
//   call.on("track", ({ stream }) => { audio.srcObject = stream; });
//   call.sendText("What can you see?");
//   call.hangUp();

export const PROTOCOL_VERSION = "1.0";
export const MODES = ["call", "kiosk", "companion"];
// The server's messages (the schema's server_message), each also an event of that name.
export const SERVER_MESSAGES = ["transcript", "assistant_text", "turn", "timing", "tool",
  "camera", "error", "state", "stats", "degrade", "goodbye", "pong"];
export const MAX_TEXT_CHARS = 2000;

// The camera asked for per mode: the self view runs at 15 fps; the server samples --video-fps
// (2) frames a second, so a call sends 5 (a third of the uplink and of the server's VP8
// decoding). A companion (a phone beside glasses) sends 1 fps at 320x240 and asks the server
// to sample that.
const CAMERA = { width: 640, height: 480, frameRate: 15 };
const COMPANION_CAMERA = { width: 320, height: 240, frameRate: 1 };
const COMPANION_FPS = 1;
// The server scales frames to at most 448x336 before the model sees them: a 250 kbps cap (50
// kbit a frame at 5 fps) keeps them sharp, and every packet not sent is one the server does
// not decrypt, parse and reassemble (bench/load.py replays this rate).
const SEND_FPS = 5;
const SEND_MAX_BITRATE_BPS = 250_000;
const COMPANION_MAX_BITRATE_BPS = 100_000;
const DISCONNECT_GRACE_MS = 2000;
// A hangup travels on the data channel (SCTP): closing the connection at once would drop it
// when its packet is lost (the retransmission never goes), and the server would keep the call
// for a resume. The connection stays open, sending nothing, until the server closes it (it got
// the hangup) or this long has passed (a few SCTP retransmissions).
const HANGUP_GRACE_MS = 3000;
// Push-to-talk: the release goes this long after the key, so the last syllable, still on its
// way as audio, reaches the server before the turn is closed.
const RELEASE_TAIL_MS = 200;
const RECONNECT_GIVE_UP_S = 30;
const ICE_GATHERING_MS = 3000;
const CONNECT_WAIT_MS = 8000;

/** The server said no to an offer: ``status`` is the HTTP status (401 token, 403 origin,
 *  429 too many offers, 503 full or busy), the message the server's reason. */
export class OfferRefused extends Error {
  constructor(status, message) {
    super(message);
    this.name = "OfferRefused";
    this.status = status;
  }
}

/** The server's base URL with a trailing slash (``url`` relative to the page, default "/"). */
function baseUrl(url) {
  const here = globalThis.location ? globalThis.location.href : undefined;
  const base = new URL(url ?? "/", here);
  if (!base.pathname.endsWith("/")) base.pathname += "/";
  base.search = "";
  base.hash = "";
  return base;
}

/** GET /config: ICE servers, whether a token is needed, whether the camera is taken, ... */
export async function fetchConfig(url = "/") {
  let res;
  try {
    res = await fetch(new URL("config", baseUrl(url)));
  } catch {
    throw new Error("the server cannot be reached");
  }
  return res.ok ? res.json() : {};
}

/** The server runs its own echo canceller or noise suppressor for this mode (its setting
 *  ``name`` in /config: "auto" means for the loudspeaker modes, and for no mode). */
export function serverRoom(config, mode, name) {
  const value = (config && config[name]) || "auto";
  return value === "on" || (value === "auto" && mode !== "call");
}

/** getUserMedia's constraints for ``mode``: the browser's echo canceller stays on (it has the
 *  device's exact playout timing and takes the bulk of the echo before the network; the
 *  server's takes what is left); no noise suppressor on the loudspeaker pages (measured: it
 *  costs the ASR words and saves none in noise), none in a row with the server's; no browser
 *  AGC under the server's canceller (it would change the echo path's gain as the canceller
 *  models it, and lift a lobby's noise between phrases). ``processing`` false turns all three
 *  off (tests); ``camera`` false, true (the mode's size and rate) or constraints;
 *  ``micId``/``camId`` chosen devices; a server with ``video: false`` gets no camera. */
export function mediaConstraints({ mode, config = null, processing = true, camera = true,
  micId = "", camId = "" } = {}) {
  const audio = { echoCancellation: processing,
                  noiseSuppression: processing && mode === "call"
                                    && !serverRoom(config, mode, "noiseSuppression"),
                  autoGainControl: processing && !serverRoom(config, mode, "echoCancel"),
                  channelCount: 1 };
  if (micId) audio.deviceId = { exact: micId };
  let video = false;
  if (camera && !(config && config.video === false)) {
    video = typeof camera === "object" ? { ...camera }
      : { ...(mode === "companion" ? COMPANION_CAMERA : CAMERA) };
    if (camId) video.deviceId = { exact: camId };
  }
  return { audio, video };
}

/** The stream for ``constraints``; with no camera to be had, audio only (``onAudioOnly`` is
 *  told). Rejects with getUserMedia's own error otherwise (NotAllowedError, ...). */
export async function openMedia(constraints, onAudioOnly = () => {}) {
  try {
    return await navigator.mediaDevices.getUserMedia(constraints);
  } catch (err) {
    if (constraints.video && (err.name === "NotFoundError" || err.name === "NotReadableError"
                              || err.name === "OverconstrainedError")) {
      onAudioOnly(err);
      return await navigator.mediaDevices.getUserMedia({ audio: constraints.audio, video: false });
    }
    throw err;
  }
}

function waitForIceGathering(pc, timeoutMs = ICE_GATHERING_MS) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => { pc.removeEventListener("icegatheringstatechange", check); resolve(); };
    const check = () => { if (pc.iceGatheringState === "complete") done(); };
    pc.addEventListener("icegatheringstatechange", check);
    setTimeout(done, timeoutMs);
  });
}

function waitConnected(pc, timeoutMs) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const poll = setInterval(() => {
      if (pc.connectionState === "connected") { clearInterval(poll); resolve(true); }
      else if (Date.now() - t0 > timeoutMs || pc.connectionState === "failed") {
        clearInterval(poll); resolve(false);
      }
    }, 100);
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One call. ``new OmnicallCall(options)``, ``on(...)`` for what you want to hear of it, then
 * ``start()``. Its ``state``: "new", "connecting" (asking for the devices, offering),
 * "connected", "reconnecting" (the connection was lost: offering again with ``resume``),
 * "ended". Every server message is an event of its type (and a "message" event); the call's
 * own events: "connected", "disconnected", "reconnecting", "reconnectfailed", "ended",
 * "track", "localstream", "audioonly", "peerconnection", "connectionstatechange".
 */
export class OmnicallCall extends EventTarget {
  constructor(options = {}) {
    super();
    if (options.mode !== undefined && !MODES.includes(options.mode)) {
      throw new TypeError(`mode must be one of ${MODES.join(", ")} (or left out)`);
    }
    this.options = options;
    this.url = baseUrl(options.url);
    this.mode = options.mode;
    this.token = options.token || "";
    this.config = options.config || null;
    this.stream = options.stream || null;
    this.ownsStream = !options.stream;
    this.state = "new";
    this.session = options.resume || null;
    this.resumed = false;
    this.reconnects = 0;
    this.muted = false;
    this.pc = null;
    this.channel = null;
    this._reconnecting = null;
    this._talkTimer = null;
    this._pings = new Map();
  }

  /** ``fn(detail)`` on each ``type`` event (a server message, or one of the call's own);
   *  returns a function that removes it. */
  on(type, fn) {
    const listener = (event) => fn(event.detail);
    this.addEventListener(type, listener);
    return () => this.removeEventListener(type, listener);
  }

  /** The first ``type`` event's detail (where ``match(detail)``, when given). */
  once(type, match = () => true) {
    return new Promise((resolve) => {
      const off = this.on(type, (detail) => { if (match(detail)) { off(); resolve(detail); } });
    });
  }

  _emit(type, detail = {}) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  /** /config, the microphone and camera (unless a ``stream`` was given), then the offer
   *  (with ``resume`` when the options name a session). Resolves once the server answered;
   *  "connected" follows when the media path is up. Rejects with getUserMedia's error, an
   *  OfferRefused, or an Error (the server cannot be reached). */
  async start() {
    if (this.state !== "new") throw new Error(`the call was already started (${this.state})`);
    this.state = "connecting";
    const o = this.options;
    try {
      if (!this.config) this.config = await fetchConfig(this.url);
      if (!this.stream) {
        const wanted = mediaConstraints({ mode: this.mode, config: this.config,
          processing: o.processing !== false, camera: o.camera ?? true });
        if (o.microphone && typeof o.microphone === "object") {
          wanted.audio = { ...wanted.audio, ...o.microphone };
        } else if (o.microphone === false) {
          wanted.audio = false;
        }
        this.stream = await openMedia(wanted, (error) => this._emit("audioonly", { error }));
      }
      if (this.state !== "connecting") throw new Error("the call ended while starting");
      this._emit("localstream", { stream: this.stream });
      await this._connect(Boolean(o.resume));
    } catch (err) {
      if (this.state !== "ended") this._end("failed");
      throw err;
    }
  }

  /** Resolves when the media path is connected (now, if it is); rejects if the call ends. */
  whenConnected() {
    if (this.state === "connected") return Promise.resolve(this);
    return new Promise((resolve, reject) => {
      const offs = [
        this.on("connected", () => { offs.forEach((f) => f()); resolve(this); }),
        this.on("ended", (e) => { offs.forEach((f) => f()); reject(new Error(`call ended: ${e.reason}`)); }),
      ];
    });
  }

  /** One peer connection + offer/answer; ``resume`` asks the server to continue the call. */
  async _connect(resume) {
    const config = this.config || {};
    const o = this.options;
    const videoAllowed = config.video !== false;
    const companion = this.mode === "companion";
    const pc = new RTCPeerConnection({ iceServers: o.iceServers || config.iceServers || [] });
    this.pc = pc;
    for (const track of this.stream.getTracks()) {
      if (track.kind === "video" && !videoAllowed) continue; // never offered
      const sender = pc.addTrack(track, this.stream);
      if (track.kind === "video") {
        const p = sender.getParameters();
        p.degradationPreference = companion ? "maintain-framerate" : "maintain-resolution";
        if (p.encodings && p.encodings.length) {
          p.encodings[0].maxFramerate = o.sendFps ?? (companion ? COMPANION_FPS : SEND_FPS);
          p.encodings[0].maxBitrate = o.maxBitrateBps
            ?? (companion ? COMPANION_MAX_BITRATE_BPS : SEND_MAX_BITRATE_BPS);
        }
        sender.setParameters(p).catch(() => {});
      }
    }
    const channel = pc.createDataChannel("events");
    this.channel = channel;
    channel.onmessage = (e) => this._onMessage(e.data);
    channel.onclose = () => { if (this.pc === pc && this.state === "connected") this.reconnect(); };
    pc.ontrack = (e) => this._emit("track", { track: e.track,
      stream: e.streams[0] || new MediaStream([e.track]) });
    pc.onconnectionstatechange = () => this._onConnectionState(pc);
    this._emit("peerconnection", { pc });
    await pc.setLocalDescription(await pc.createOffer());
    await waitForIceGathering(pc);
    const body = { sdp: pc.localDescription.sdp, type: pc.localDescription.type };
    if (resume && this.session) body.resume = this.session;
    const videoFps = o.videoFps ?? (companion ? COMPANION_FPS : undefined);
    if (videoFps !== undefined) body.video_fps = videoFps;
    if (this.mode) body.mode = this.mode; // the server's --echo-cancel / --noise-suppression auto follow it
    const headers = { "Content-Type": "application/json" };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    let res;
    try {
      res = await fetch(new URL("offer", this.url),
        { method: "POST", headers, body: JSON.stringify(body) });
    } catch (err) {
      pc.close();
      throw err;
    }
    const answer = await res.json().catch(() => ({}));
    if (!res.ok) {
      pc.close();
      throw new OfferRefused(res.status, answer.error || res.statusText);
    }
    await pc.setRemoteDescription({ sdp: answer.sdp, type: answer.type });
    this.session = answer.session;
    this.resumed = Boolean(answer.resumed);
    return pc;
  }

  _onMessage(raw) {
    let msg;
    try { msg = JSON.parse(raw); } catch { return; }
    if (!msg || typeof msg !== "object" || typeof msg.type !== "string") return;
    if (msg.type === "state") this.session = msg.session;
    if (msg.type === "pong") this._pong(msg);
    this._emit("message", msg);
    this._emit(msg.type, msg);
    // the server ends the call and says why: a restart is worth waiting for, the rest not
    if (msg.type === "goodbye") {
      if (msg.reason === "shutdown") this.reconnect();
      else this._end("goodbye", msg.message);
    }
  }

  _onConnectionState(pc) {
    if (this.pc !== pc) return;
    const s = pc.connectionState;
    this._emit("connectionstatechange", { state: s });
    if (s === "connected") {
      this.state = "connected";
      this._emit("connected", { session: this.session, resumed: this.resumed,
        reconnects: this.reconnects });
    } else if (s === "failed") {
      this.reconnect();
    } else if (s === "disconnected") {
      this._emit("disconnected", {});
      setTimeout(() => {
        if (this.pc === pc && pc.connectionState !== "connected") this.reconnect();
      }, DISCONNECT_GRACE_MS);
    }
  }

  /** How long a dropped call is tried again before it ends ("unreachable"). */
  _giveUpMs() {
    const s = this.options.reconnectGiveUpS ?? (this.config && this.config.reconnectGiveUpS);
    return (typeof s === "number" && s > 0 ? s : RECONNECT_GIVE_UP_S) * 1000;
  }

  /** Drop the connection (no hangup: the server keeps the conversation for its resume
   *  window) and offer again with ``resume``, with back-off, until connected or the give-up
   *  time (the server's reconnectGiveUpS, 30 s) has passed. Also done by itself when the
   *  connection fails, stays disconnected, or the server restarts. */
  reconnect() {
    if (this._reconnecting || this.state === "new" || this.state === "ended") {
      return this._reconnecting || Promise.resolve();
    }
    this._reconnecting = (async () => {
      this.state = "reconnecting";
      this._emit("reconnecting", { session: this.session });
      const old = this.pc;
      this.pc = null;
      if (old) old.close();
      const began = Date.now();
      let delay = 500;
      while (this.state === "reconnecting") {
        try {
          const pc = await this._connect(true);
          this.reconnects += 1;
          if (await waitConnected(pc, CONNECT_WAIT_MS)) break;
          pc.close();
        } catch (err) {
          this._emit("reconnectfailed", { error: err });
        }
        if (this.state !== "reconnecting") break;
        if (Date.now() - began > this._giveUpMs()) {
          this._end("unreachable", "the server cannot be reached");
          break;
        }
        await sleep(delay);
        delay = Math.min(delay * 2, 5000);
      }
      this._reconnecting = null;
    })();
    return this._reconnecting;
  }

  /** Send one message of the protocol (client_message); false when the channel is not open. */
  send(message) {
    const channel = this.channel;
    if (!channel || channel.readyState !== "open") return false;
    channel.send(JSON.stringify(message));
    return true;
  }

  /** A typed message: it joins the conversation and is answered in speech and captions. */
  sendText(text) {
    const clean = String(text).trim();
    if (clean.length > MAX_TEXT_CHARS) {
      throw new RangeError(`a typed message is at most ${MAX_TEXT_CHARS} characters`);
    }
    return clean ? this.send({ type: "text", text: clean }) : false;
  }

  /** Stop the assistant's reply now (barge-in). */
  interrupt() {
    return this.send({ type: "interrupt" });
  }

  /** Push-to-talk: ``true`` while the key is held (what the microphone hears is the caller's
   *  turn), ``false`` at the release (sent 200 ms later, so the last syllable arrives first). */
  talk(held) {
    clearTimeout(this._talkTimer);
    this._talkTimer = null;
    if (held) return this.send({ type: "talk", held: true });
    this._talkTimer = setTimeout(() => {
      this._talkTimer = null;
      this.send({ type: "talk", held: false });
    }, RELEASE_TAIL_MS);
    return true;
  }

  /** The microphone off (``true``) or on: its tracks stay in the call, sending silence. */
  mute(muted = true) {
    this.muted = Boolean(muted);
    if (this.stream) this.stream.getAudioTracks().forEach((t) => { t.enabled = !this.muted; });
  }

  /** The camera on or off (its tracks stay in the call, sending black). */
  setCamera(on) {
    if (this.stream) this.stream.getVideoTracks().forEach((t) => { t.enabled = Boolean(on); });
  }

  /** A round trip over the data channel: resolves with its milliseconds at the pong. */
  ping(timeoutMs = 10_000) {
    const t = performance.now();
    return new Promise((resolve, reject) => {
      if (!this.send({ type: "ping", t })) { reject(new Error("the call is not connected")); return; }
      const timer = setTimeout(() => { this._pings.delete(t); reject(new Error("no pong")); },
        timeoutMs);
      this._pings.set(t, (at) => { clearTimeout(timer); resolve(at - t); });
    });
  }

  _pong(msg) {
    const done = this._pings.get(msg.t);
    if (done) { this._pings.delete(msg.t); done(performance.now()); }
  }

  /** End the call for good: the server keeps nothing for a resume. The hangup goes on the
   *  data channel and the connection closes when the server closed it, or after 3 s. */
  hangUp() {
    this._end("hangup");
  }

  /** Drop the call without a hangup: the server keeps the conversation for its resume
   *  window (``resume: call.session`` in a new call takes it back). */
  close() {
    this._end("closed");
  }

  _end(reason, message) {
    if (this.state === "ended") return;
    const pc = this.pc;
    const channel = this.channel;
    this.pc = null;
    this.channel = null;
    this.state = "ended";
    clearTimeout(this._talkTimer);
    if (pc && reason === "hangup" && channel && channel.readyState === "open") {
      channel.send(JSON.stringify({ type: "hangup" }));
      closeAfterHangup(pc, channel); // microphone and camera stop now, below
    } else if (pc) {
      pc.close();
    }
    if (this.ownsStream && this.stream) this.stream.getTracks().forEach((t) => t.stop());
    this._pings.clear();
    this._emit("ended", message === undefined ? { reason } : { reason, message });
  }
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

/** Make a call: ``new OmnicallCall(options)``, ``start()``, and wait until it is connected.
 *  Nothing arrives before the connection is up, so listeners added right after miss no
 *  server message; for the call's own early events ("localstream", "peerconnection") use
 *  ``new OmnicallCall`` and ``on`` before ``start()``. */
export async function connect(options = {}) {
  const call = new OmnicallCall(options);
  const connected = call.whenConnected();
  connected.catch(() => {});
  await call.start();
  return connected;
}
