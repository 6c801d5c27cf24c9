// omnicall page: the camera and microphone. getUserMedia constraints per page mode (the
// browser's echo canceller, noise suppressor and gain control, set against the server's own:
// docs/room.md), opening them with an audio-only fallback, the device lists, switching a
// device mid-call, and what to tell people when the browser refuses.
// Exposes window.omnicallDevices = { serverRoom, constraints, open, list, switchTrack,
// explainError }; nothing here keeps state.
(() => {
"use strict";

/** Whether the server runs its own echo canceller / noise suppressor on this page's
 * microphone: /config's switch ``name``, "auto" meaning on for the loudspeaker pages (kiosk,
 * companion), as the server decides from the offer's mode (docs/room.md). */
function serverRoom(config, mode, name) {
  const value = (config && config[name]) || "auto";
  return value === "on" || (value === "auto" && mode !== "call");
}

/** getUserMedia's constraints: ``processing`` false turns the browser's off (tests);
 * ``video`` the camera's size and rate, used when ``cameraOn``; ``micId``/``camId`` the
 * chosen devices ("" for the default). */
function constraints({ mode, processing, config, video, cameraOn, micId, camId }) {
  // The browser's echo canceller stays on: it has the device's exact playout timing and
  // takes the bulk of the echo before the network; the server's (with the sent reply as its
  // reference) takes what is left. No noise suppressor on the loudspeaker pages (measured:
  // it costs the ASR words and saves none in noise), none in a row with the server's on the
  // call page. No browser AGC under the server's canceller: it would change the echo path's
  // gain as the canceller models it, and lift a lobby's noise between phrases.
  const audio = { echoCancellation: processing,
                  noiseSuppression: processing && mode === "call" &&
                                    !serverRoom(config, mode, "noiseSuppression"),
                  autoGainControl: processing && !serverRoom(config, mode, "echoCancel"),
                  channelCount: 1 };
  if (micId) audio.deviceId = { exact: micId };
  let wanted = false;
  if (cameraOn) {
    wanted = { ...video };
    if (camId) wanted.deviceId = { exact: camId };
  }
  return { audio, video: wanted };
}

/** The stream for ``c``; with no camera to be had, audio only (``onAudioOnly`` is told). */
async function open(c, onAudioOnly) {
  try {
    return await navigator.mediaDevices.getUserMedia(c);
  } catch (err) {
    if (c.video && (err.name === "NotFoundError" || err.name === "NotReadableError"
                    || err.name === "OverconstrainedError")) {
      onAudioOnly();
      return await navigator.mediaDevices.getUserMedia({ audio: c.audio, video: false });
    }
    throw err;
  }
}

/** Fill the microphone, camera and speaker lists (``ui.mic``, ``ui.cam``, ``ui.speaker``),
 * keeping each choice; the speaker list only where the audio element can switch outputs. */
async function list(ui) {
  const devices = await navigator.mediaDevices.enumerateDevices();
  const fill = (select, kind) => {
    const current = select.value;
    select.replaceChildren(new Option("default", ""));
    devices.filter((d) => d.kind === kind).forEach((d, i) => {
      select.append(new Option(d.label || `${kind} ${i + 1}`, d.deviceId));
    });
    select.value = current;
  };
  fill(ui.mic, "audioinput");
  fill(ui.cam, "videoinput");
  fill(ui.speaker, "audiooutput");
  ui.speaker.disabled = typeof ui.remote.setSinkId !== "function";
}

/** Replace the call's ``kind`` ("audio" | "video") track by one from ``c`` (``video`` when
 * ``c`` has no camera), in the sender and in ``stream``; the new track, or null when there
 * was none to send. */
async function switchTrack(pc, stream, kind, c, video) {
  const fresh = await navigator.mediaDevices.getUserMedia(
    kind === "audio" ? { audio: c.audio } : { video: c.video || video });
  const track = kind === "audio" ? fresh.getAudioTracks()[0] : fresh.getVideoTracks()[0];
  const sender = pc.getSenders().find((s) => s.track && s.track.kind === kind);
  if (!track || !sender) return null;
  await sender.replaceTrack(track);
  for (const old of stream.getTracks().filter((t) => t.kind === kind)) {
    stream.removeTrack(old);
    old.stop();
  }
  stream.addTrack(track);
  return track;
}

function explainError(err) {
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

window.omnicallDevices = { serverRoom, constraints, open, list, switchTrack, explainError };
})();
