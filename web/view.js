// omnicall page view: captions, assistant state, per-turn latency chart, events, errors.
// Pure DOM updates driven by data-channel messages; no network here.
(() => {
"use strict";

const MAX_EVENTS = 200;
// a frame that went to the model: its thumbnail and the "sent" state last this long
const SEEN_FOR_MS = 4000;
const CAMERA_WORDS = { off: "camera off", on: "camera on", sent: "frame sent",
                       sharp: "sharp frame sent" };
const JPEG_URL = "data:image/jpeg;base64,";
const MAX_TURNS = 500;
const CHART_TURNS = 12;
const DEGRADE_WORDS = { normal: "back to normal", text_first: "busy: answering in text first",
                        fallback: "very busy: using a lighter assistant" };
// stages of one answer, in order, and the label of the span that ends at each
const SPANS = [
  ["speech_end", "end_of_turn", "end of turn", "#9aa5b1"],
  ["end_of_turn", "llm_first_token", "thinking", "#e0a800"],
  ["llm_first_token", "first_audio_out", "first speech", "#2f6fdb"],
];

/** Span lengths in ms; a stage that ran early (a speculative reply starts before the end of
 *  the turn is confirmed) counts from where the previous span ended, never negative. */
function spanLengths(s) {
  let at = s.speech_end;
  return SPANS.map(([, b, label, color]) => {
    if (!(b in s)) return [label, 0, color];
    const end = Math.max(at, s[b]);
    const length = end - at;
    at = end;
    return [label, length, color];
  });
}

const $ = (id) => document.getElementById(id);

const view = {
  el: {
    status: $("status"), error: $("error"), badge: $("assistant-state"),
    listeningTo: $("listening-to"),
    recording: $("recording"),
    userCaption: $("user-caption"), assistantCaption: $("assistant-caption"),
    events: $("events"), chart: $("latency"), chartText: $("latency-text"),
    attract: $("attract"), tap: $("tap"), transcript: $("transcript"),
    seenThumb: $("seen-thumb"), cameraState: $("camera-state"), seenFacts: $("seen-facts"),
  },
  // the camera as the caller should know it: live or not (the page's side), and when a
  // frame last went to the model (the server's "camera" messages)
  camera: { live: false, seenAt: 0, sharp: false, turn: null, timer: null },
  replyItem: null, // the transcript entry of the reply being spoken
  turns: new Map(), // turn id -> {stage: ms}
  order: [],

  setStatus(text) { this.el.status.textContent = text; },

  showError(text) {
    this.el.error.textContent = text;
    this.el.error.hidden = !text;
  },

  setState(name) { // idle | listening | thinking | speaking
    document.body.dataset.state = name;
    this.el.badge.textContent = name;
  },

  log(text) {
    const li = document.createElement("li");
    li.textContent = `${new Date().toLocaleTimeString()} ${text}`;
    this.el.events.prepend(li);
    while (this.el.events.childElementCount > MAX_EVENTS) this.el.events.lastElementChild.remove();
  },

  userCaption(text, final) {
    // a partial transcript is replaced by the next partial, and by the final one
    this.el.userCaption.textContent = text;
    this.el.userCaption.classList.toggle("partial", !final);
  },

  assistantStart() {
    this.el.assistantCaption.textContent = "";
    this.replyItem = this.addTurn("assistant", "");
  },
  assistantDelta(delta) {
    this.el.assistantCaption.textContent += delta;
    if (this.replyItem) this.replyItem.textContent += delta;
  },
  assistantEnd(interrupted) {
    if (this.replyItem && interrupted) this.replyItem.textContent += " …";
    if (this.replyItem && !this.replyItem.textContent.trim()) this.replyItem.remove();
    this.replyItem = null;
  },

  /** The whole conversation, one entry per turn, newest at the bottom (bounded). */
  addTurn(role, text) {
    const li = document.createElement("li");
    li.className = role;
    li.textContent = text;
    li.dataset.at = new Date().toISOString();
    const list = this.el.transcript;
    list.append(li);
    while (list.childElementCount > MAX_TURNS) list.firstElementChild.remove();
    list.scrollTop = list.scrollHeight;
    return li;
  },

  /** A tool the assistant called (shown in the conversation, kept in the download). */
  addTool(msg) {
    const args = JSON.stringify(msg.arguments || {});
    const li = this.addTurn("tool", msg.ok ? `${msg.name}(${args}) → ${msg.output}`
      : `${msg.name}(${args}) failed: ${msg.error}`);
    if (!msg.ok) li.classList.add("failed");
    li.dataset.record = JSON.stringify({ type: "tool", name: msg.name, arguments: msg.arguments,
      ok: msg.ok, output: msg.output, error: msg.error, ms: msg.ms, turn: msg.turn });
    // a tool runs inside a reply: keep the reply's own line below it
    if (this.replyItem) this.el.transcript.append(this.replyItem);
    return li;
  },

  /** The conversation on the page as JSON Lines (one record per turn or tool call). */
  transcriptLines() {
    return [...this.el.transcript.children].map((li) => {
      const base = li.dataset.record ? JSON.parse(li.dataset.record)
        : { type: "turn", role: li.classList[0], text: li.textContent };
      return JSON.stringify({ ...base, at: li.dataset.at });
    }).join("\n") + "\n";
  },

  clearCaptions() {
    this.el.userCaption.textContent = "";
    this.el.assistantCaption.textContent = "";
  },

  timing(msg) {
    if (!this.turns.has(msg.turn)) {
      this.turns.set(msg.turn, {});
      this.order.push(msg.turn);
      while (this.order.length > CHART_TURNS) this.turns.delete(this.order.shift());
    }
    this.turns.get(msg.turn)[msg.stage] = msg.ms;
    if (msg.stage === "first_audio_out") this.drawChart();
  },

  /** Per answered turn: stacked bars from the end of speech to the first audio sent. */
  drawChart() {
    const canvas = this.el.chart;
    const ctx = canvas.getContext && canvas.getContext("2d");
    const rows = this.order.map((t) => this.turns.get(t)).filter((s) => s && "first_audio_out" in s
      && "speech_end" in s);
    if (!rows.length) return;
    const totals = rows.map((s) => s.first_audio_out - s.speech_end);
    const maxMs = Math.max(500, ...totals);
    const last = rows[rows.length - 1];
    const parts = spanLengths(last).map(([label, ms]) => `${label} ${Math.round(ms)} ms`);
    this.el.chartText.textContent =
      `Last answer: ${Math.round(totals[totals.length - 1])} ms from the end of your speech ` +
      `to the first sound (${parts.join(", ")}).`;
    if (!ctx) return;
    const w = canvas.width, h = canvas.height, pad = 18;
    const barW = Math.max(6, (w - pad) / CHART_TURNS - 6);
    ctx.clearRect(0, 0, w, h);
    ctx.fillStyle = "#666";
    ctx.font = "10px sans-serif";
    ctx.fillText(`${Math.round(maxMs)} ms`, 2, 10);
    rows.forEach((s, i) => {
      let y = h;
      const x = pad + i * (barW + 6);
      for (const [, ms, color] of spanLengths(s)) {
        const hh = Math.max(0, ms / maxMs) * (h - 14);
        ctx.fillStyle = color;
        ctx.fillRect(x, y - hh, barW, hh);
        y -= hh;
      }
    });
  },

  /** The camera is live (a video track, enabled, sent on the call) or not (none, denied,
   *  turned off, --no-video, no call). */
  setCameraLive(live) {
    this.camera.live = Boolean(live);
    this.renderCamera();
  },

  /** A frame went to the model: show its thumbnail and "sent" for a moment. The image is
   *  only shown, never logged here nor kept after it is hidden. */
  cameraSeen(msg) {
    const cam = this.camera;
    cam.seenAt = Date.now();
    cam.sharp = Boolean(msg.sharp);
    cam.turn = msg.turn;
    const img = this.el.seenThumb;
    if (typeof msg.thumb === "string" && msg.thumb.startsWith(JPEG_URL)) {
      img.src = msg.thumb;
      img.alt = `What the assistant was shown from your camera${cam.sharp ? " (sharp)" : ""}`
        + (msg.turn != null ? `, turn ${msg.turn}` : "");
      img.hidden = false;
    }
    clearTimeout(cam.timer);
    cam.timer = setTimeout(() => this.cameraSeenEnd(), SEEN_FOR_MS);
    this.showFacts(msg.facts);
    this.renderCamera();
  },

  /** The facts the reply was given about the frame (the offline default: colours, people,
   *  text read, what changed), beside its thumbnail until the next frame or the call's end;
   *  as text only. */
  showFacts(facts) {
    const list = this.el.seenFacts;
    if (!list) return;
    const items = Array.isArray(facts) ? facts.filter((f) => typeof f === "string") : [];
    list.replaceChildren(...items.slice(0, 8).map((fact) => {
      const li = document.createElement("li");
      li.textContent = fact.charAt(0).toUpperCase() + fact.slice(1);
      return li;
    }));
  },

  /** The moment is over (or the call ended): the thumbnail goes, the state follows (the
   *  facts stay until the next frame: view.showFacts([]) clears them). */
  cameraSeenEnd() {
    const cam = this.camera;
    clearTimeout(cam.timer);
    cam.timer = null;
    cam.seenAt = 0;
    const img = this.el.seenThumb;
    img.hidden = true;
    img.removeAttribute("src");
    img.alt = "";
    this.renderCamera();
  },

  /** off | on | sent (a frame went to the model in the last SEEN_FOR_MS; sharp marked). */
  cameraStateName() {
    const cam = this.camera;
    if (cam.seenAt && Date.now() - cam.seenAt < SEEN_FOR_MS) return "sent";
    return cam.live ? "on" : "off";
  },

  renderCamera() {
    const el = this.el.cameraState;
    const name = this.cameraStateName();
    const sharp = name === "sent" && this.camera.sharp;
    const words = CAMERA_WORDS[sharp ? "sharp" : name];
    if (el.dataset.camera !== name) el.dataset.camera = name;
    el.dataset.sharp = String(sharp);
    if (el.textContent !== words) el.textContent = words; // unchanged words: nothing re-announced
  },

  /** Whose words are answered (the server's `state`): shown unless it is anyone's. */
  listeningTo(who, phrase) {
    const el = this.el.listeningTo;
    const words = { camera: "listening to the person facing the camera",
                    wake: `say “${phrase || "the wake phrase"}” to talk` }[who];
    el.hidden = !words;
    el.dataset.who = who || "any";
    el.textContent = words || "";
  },

  showAttract(on) { this.el.attract.hidden = !on; },
  showTap(on) { this.el.tap.hidden = !on; },

  /** What people see of one data-channel message (the page's own state is app.js's). */
  show(msg) {
    switch (msg.type) {
      case "transcript":
        this.userCaption(msg.text, msg.final);
        if (msg.final) {
          this.log(`you: ${msg.text}`);
          this.addTurn("user", msg.text);
        }
        break;
      case "assistant_text":
        this.assistantDelta(msg.delta);
        break;
      case "tool":
        this.addTool(msg);
        this.log(`tool ${msg.name}: ${msg.ok ? "ok" : msg.error} (${msg.ms} ms)`);
        break;
      case "turn":
        this.showTurn(msg);
        break;
      case "camera":
        this.cameraSeen(msg);
        this.log(`camera: a ${msg.sharp ? "sharp " : ""}frame went to the assistant (turn ${msg.turn})`);
        break;
      case "timing":
        this.timing(msg);
        this.log(`turn ${msg.turn}: ${msg.stage} at +${msg.ms} ms`);
        break;
      case "error":
        this.showError(`The assistant reported a problem: ${msg.message}`);
        this.log(`error: ${msg.message}`);
        break;
      case "state":
        this.log(`server session ${msg.session} ${msg.state}`);
        this.listeningTo(msg.listening_to, msg.wake_phrase);
        this.el.recording.hidden = !msg.recording; // --record: the call is kept
        break;
      case "goodbye":
        this.log(`server ended the call: ${msg.reason}`);
        break;
      case "degrade": {
        const words = DEGRADE_WORDS[msg.level];
        this.log(`server ${words || msg.level}`);
        if (msg.level !== "normal") this.setStatus(`The server is ${words}.`);
        break;
      }
      default:
        break;
    }
  },

  showTurn(msg) {
    if (msg.role === "assistant" && msg.phase === "start") {
      this.assistantStart();
      this.setState("speaking");
      this.setStatus("Assistant is speaking…");
    } else if (msg.role === "assistant" && msg.phase === "end") {
      this.assistantEnd(msg.interrupted);
      this.setState("listening");
      this.setStatus(msg.interrupted ? "Interrupted. Listening…" : "Listening…");
    } else if (msg.role === "user" && msg.phase === "start") {
      this.showAttract(false);
      this.setState("listening");
      this.userCaption("…", false);
      this.setStatus("Listening to you…");
    } else if (msg.role === "user" && msg.phase === "end") {
      this.setState("thinking");
      this.setStatus("Thinking…");
    }
    this.log(`${msg.role} turn ${msg.phase}${msg.interrupted ? " (interrupted)" : ""}`);
  },
};

window.omnicallView = view;
})();
