// The client library's types in use (web/client/omnicall.d.ts), compiled by TypeScript in strict mode:
//   tests/typescript/node_modules/.bin/tsc -p tests/typescript   (make test: tests/test_js_client.py)
// TypeScript is pinned in package-lock.json beside this file. The @ts-expect-error lines must fail.
import { OmnicallCall, connect, OfferRefused, type TurnMessage, type ServerMessage } from "../../web/client/omnicall.js";

async function main(): Promise<void> {
  const call = new OmnicallCall({ url: "/", mode: "kiosk", camera: { width: 320 }, token: "x" });
  const off = call.on("turn", (m) => { const t: TurnMessage = m; console.log(t.heard_ms ?? 0, m.phase); });
  call.on("assistant_text", (m) => console.log(m.delta.length));
  call.on("ended", ({ reason, message }) => console.log(reason === "hangup", message));
  call.on("message", (m: ServerMessage) => { if (m.type === "camera") console.log(m.facts.length); });
  call.on("stats", (m) => console.log(m.type));
  call.on("track", ({ stream }) => console.log(stream.id));
  off();
  const state = await call.once("state", (m) => m.listening_to === "camera");
  console.log(state.session);
  try { await call.start(); } catch (err) { if (err instanceof OfferRefused) console.log(err.status); }
  call.send({ type: "talk", held: true });
  call.sendText("hi"); call.interrupt(); call.talk(false); call.mute(); call.setCamera(false);
  const ms: number = await call.ping();
  console.log(ms, call.state === "connected", call.pc?.connectionState);
  const other = await connect({ mode: "call" });
  other.hangUp();
  // @ts-expect-error: not a mode
  new OmnicallCall({ mode: "phone" });
  // @ts-expect-error: not an event
  call.on("nope", () => {});
  // @ts-expect-error: a talk needs held
  call.send({ type: "talk" });
}
main();
