// omnicall page: push-to-talk. Hold the talk button, or the space bar outside a text field:
// what the microphone hears meanwhile is your turn, whoever else is talking (the assistant
// stops, and answers when you let go). ``talk(held)`` is told at the press and the release: the
// client library's OmnicallCall.talk, which sends {"type": "talk", "held": true} at once and
// {"held": false} 200 ms after the release, so the last syllable, still on its way as audio,
// reaches the server before the turn is closed.
// Exposes window.omnicallTalk = { attach }; the state is window.omnicall.talking.
"use strict";

(() => {
  /** Wire ``button`` and the space bar to ``talk`` (a function taking held: true / false). */
  function attach(button, talk, log = () => {}) {
    const page = window.omnicall || {};
    page.talking = false;
    const set = (held) => {
      if (button.disabled || page.talking === held) return;
      page.talking = held;
      button.setAttribute("aria-pressed", String(held));
      button.textContent = held ? "Talking… (let go to send)" : "Hold to talk";
      talk(held);
      log(held ? "talk: held" : "talk: released");
    };
    button.addEventListener("pointerdown", (e) => { e.preventDefault(); set(true); });
    for (const name of ["pointerup", "pointerleave", "pointercancel"]) {
      button.addEventListener(name, () => set(false));
    }
    const typing = (el) => el && (el.isContentEditable
      || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));
    window.addEventListener("keydown", (e) => {
      if (e.code !== "Space" || e.repeat || typing(e.target)) return;
      e.preventDefault();
      set(true);
    });
    window.addEventListener("keyup", (e) => {
      if (e.code !== "Space" || typing(e.target)) return;
      e.preventDefault();
      set(false);
    });
    return { release: () => set(false) };
  }

  window.omnicallTalk = { attach };
})();
