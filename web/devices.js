// omnicall page: the camera and microphone pickers. The device lists, switching a device
// mid-call, and what to tell people when the browser refuses. getUserMedia's constraints per
// mode (the browser's echo canceller, noise suppressor and gain control, set against the
// server's own: docs/room.md) and opening them with an audio-only fallback are the client
// library's (client/omnicall.js: mediaConstraints, openMedia).
// Exposes window.omnicallDevices = { list, switchTrack, explainError }; nothing here keeps
// state.
(() => {
"use strict";

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

window.omnicallDevices = { list, switchTrack, explainError };
})();
