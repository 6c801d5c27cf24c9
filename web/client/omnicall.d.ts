// Types of omnicall.js: the omnicall client protocol 1.0 (protocol.schema.json) and the call.

export declare const PROTOCOL_VERSION: "1.0";
export declare const MODES: readonly Mode[];
export declare const SERVER_MESSAGES: readonly ServerMessage["type"][];
export declare const MAX_TEXT_CHARS: 2000;

/** What kind of client is calling: the server treats its microphone as it is. */
export type Mode = "call" | "kiosk" | "companion";

// ---- HTTP ------------------------------------------------------------------------------

/** POST /offer's body (the schema's "offer"). */
export interface Offer {
  type: "offer";
  sdp: string;
  /** a dropped call's session id to continue */
  resume?: string;
  /** older name of "resume" */
  session?: string;
  video_fps?: number;
  mode?: Mode;
}

/** POST /offer's answer (200). */
export interface Answer {
  type: "answer";
  sdp: string;
  session: string;
  resumed: boolean;
  protocol: "1.0";
}

export interface IceServer {
  urls: string;
  username?: string;
  credential?: string;
}

/** GET /config. */
export interface ServerConfig {
  protocol: "1.0";
  iceServers: IceServer[];
  tokenRequired: boolean;
  kioskIdleS?: number;
  resumeWindowS?: number;
  reconnectGiveUpS?: number;
  video: boolean;
  maxVideoFps?: number;
  echoCancel?: "auto" | "on" | "off";
  noiseSuppression?: "auto" | "on" | "off";
}

// ---- data channel: the client's messages ------------------------------------------------

export interface InterruptMessage { type: "interrupt" | "stop" }
export interface PingMessage { type: "ping"; t?: number }
export interface HangupMessage { type: "hangup" }
/** a typed message: 1 to 2,000 characters, not blank */
export interface TextMessage { type: "text"; text: string }
export interface TalkMessage { type: "talk"; held: boolean }
export type ClientMessage = InterruptMessage | PingMessage | HangupMessage | TextMessage
  | TalkMessage;

// ---- data channel: the server's messages ------------------------------------------------

export interface TranscriptMessage {
  type: "transcript";
  role: "user";
  text: string;
  /** a partial is replaced by the final one */
  final: boolean;
  turn: number;
}

export interface AssistantTextMessage {
  type: "assistant_text";
  delta: string;
  turn: number;
}

export interface TurnMessage {
  type: "turn";
  role: "user" | "assistant";
  phase: "start" | "end";
  turn: number;
  interrupted: boolean;
  /** an interrupted assistant turn's end: the milliseconds of the reply the caller heard */
  heard_ms?: number;
}

export interface TimingMessage {
  type: "timing";
  stage: string;
  /** since the turn's first stage */
  ms: number;
  turn: number;
}

export interface ToolMessage {
  type: "tool";
  turn: number;
  name: string;
  arguments: Record<string, unknown>;
  ok: boolean;
  /** first 500 characters */
  output: string;
  /** first 200 characters */
  error: string;
  ms: number;
}

export interface CameraMessage {
  type: "camera";
  state: "sent";
  turn: number;
  /** the frame's id in the conversation, 0 for a frame described in words */
  image: number;
  sharp: boolean;
  /** a small JPEG of what the model was shown, as a data: URL */
  thumb: string | null;
  /** what the reply was told about the frame (at most 8) */
  facts: string[];
}

export interface ErrorMessage {
  type: "error";
  message: string;
  recoverable: boolean;
}

export interface StateMessage {
  type: "state";
  state: "ready" | "resumed";
  session: string;
  listening_to: "camera" | "wake" | "any";
  wake_phrase?: string;
  /** the server records this call (--record) */
  recording?: boolean;
}

/** Periodic media counters (names may be added; each a number). */
export interface StatsMessage {
  type: "stats";
  [counter: string]: number | "stats";
}

export interface DegradeMessage {
  type: "degrade";
  level: "normal" | "text_first" | "fallback";
}

export interface GoodbyeMessage {
  type: "goodbye";
  reason: string;
  message: string;
}

export interface PongMessage {
  type: "pong";
  t: number | null;
}

export type ServerMessage = TranscriptMessage | AssistantTextMessage | TurnMessage
  | TimingMessage | ToolMessage | CameraMessage | ErrorMessage | StateMessage | StatsMessage
  | DegradeMessage | GoodbyeMessage | PongMessage;

/** Each server message's event, by its type. */
export interface ServerMessageEvents {
  transcript: TranscriptMessage;
  assistant_text: AssistantTextMessage;
  turn: TurnMessage;
  timing: TimingMessage;
  tool: ToolMessage;
  camera: CameraMessage;
  error: ErrorMessage;
  state: StateMessage;
  stats: StatsMessage;
  degrade: DegradeMessage;
  goodbye: GoodbyeMessage;
  pong: PongMessage;
}

// ---- the call ------------------------------------------------------------------------------

export type CallState = "new" | "connecting" | "connected" | "reconnecting" | "ended";

/** Why a call ended: hangUp(), close(), the server's goodbye (not a restart), no server
 *  within the give-up time while reconnecting, or start() failed. */
export type EndReason = "hangup" | "closed" | "goodbye" | "unreachable" | "failed";

/** The call's own events (besides the server's messages). */
export interface CallEvents {
  /** every server message */
  message: ServerMessage;
  /** the media path is up (first, or again after a reconnection) */
  connected: { session: string | null; resumed: boolean; reconnects: number };
  /** the connection went "disconnected": it reconnects unless it recovers within 2 s */
  disconnected: Record<string, never>;
  /** the connection was lost: offering again with resume */
  reconnecting: { session: string | null };
  /** one reconnection attempt failed (it tries again, with back-off) */
  reconnectfailed: { error: unknown };
  ended: { reason: EndReason; message?: string };
  /** the assistant's audio */
  track: { track: MediaStreamTrack; stream: MediaStream };
  /** the microphone and camera the call sends */
  localstream: { stream: MediaStream };
  /** no camera could be opened: the call goes on with audio only */
  audioonly: { error: unknown };
  /** a new RTCPeerConnection (one per connection: again after each reconnection) */
  peerconnection: { pc: RTCPeerConnection };
  connectionstatechange: { state: RTCPeerConnectionState };
}

export type CallEventMap = ServerMessageEvents & CallEvents;

export interface CallOptions {
  /** the server's base URL, relative to the page (default "/"): /config and /offer are under
   *  it. The server sends no CORS headers: serve the page from the same origin. */
  url?: string;
  /** left out: the server finds out whether the microphone hears the assistant */
  mode?: Mode;
  /** the server's --token (sent as a bearer token) */
  token?: string;
  /** a dropped call's session id: the first offer resumes its conversation */
  resume?: string;
  /** false: no microphone; constraints: merged into the mode's (default true) */
  microphone?: boolean | MediaTrackConstraints;
  /** false: no camera; true: the mode's size and rate; or constraints (default true) */
  camera?: boolean | MediaTrackConstraints;
  /** send this stream instead of opening the microphone and camera (the caller keeps it:
   *  the call does not stop its tracks) */
  stream?: MediaStream;
  /** false turns the browser's echo cancellation, noise suppression and AGC off */
  processing?: boolean;
  /** /config's answer, when already fetched */
  config?: Partial<ServerConfig>;
  /** instead of /config's */
  iceServers?: RTCIceServer[];
  /** the offer's video_fps: the server samples the camera at this rate (companion: 1) */
  videoFps?: number;
  /** the camera's sent frame rate cap (5; companion 1) */
  sendFps?: number;
  /** the camera's sent bitrate cap (250 kbps; companion 100 kbps) */
  maxBitrateBps?: number;
  /** how long a dropped call is tried again (default: /config's reconnectGiveUpS, 30 s) */
  reconnectGiveUpS?: number;
}

export declare class OfferRefused extends Error {
  readonly name: "OfferRefused";
  /** 401 token, 403 origin, 429 too many offers, 503 full or busy, 400 a bad offer */
  readonly status: number;
  constructor(status: number, message: string);
}

export declare class OmnicallCall extends EventTarget {
  constructor(options?: CallOptions);
  readonly options: CallOptions;
  readonly url: URL;
  readonly mode: Mode | undefined;
  readonly token: string;
  readonly config: Partial<ServerConfig> | null;
  readonly stream: MediaStream | null;
  readonly state: CallState;
  /** the server's session id (from the answer and the "state" message) */
  readonly session: string | null;
  /** the last answer resumed the conversation */
  readonly resumed: boolean;
  readonly reconnects: number;
  readonly muted: boolean;
  readonly pc: RTCPeerConnection | null;
  readonly channel: RTCDataChannel | null;

  on<K extends keyof CallEventMap>(type: K, fn: (detail: CallEventMap[K]) => void): () => void;
  once<K extends keyof CallEventMap>(type: K,
    match?: (detail: CallEventMap[K]) => boolean): Promise<CallEventMap[K]>;
  start(): Promise<void>;
  whenConnected(): Promise<this>;
  reconnect(): Promise<void>;
  send(message: ClientMessage): boolean;
  sendText(text: string): boolean;
  interrupt(): boolean;
  talk(held: boolean): boolean;
  mute(muted?: boolean): void;
  setCamera(on: boolean): void;
  ping(timeoutMs?: number): Promise<number>;
  hangUp(): void;
  close(): void;
}

/** Make a call and wait until it is connected. */
export declare function connect(options?: CallOptions): Promise<OmnicallCall>;

export declare function fetchConfig(url?: string | URL): Promise<Partial<ServerConfig>>;

export interface ConstraintOptions {
  mode?: Mode;
  config?: Partial<ServerConfig> | null;
  processing?: boolean;
  camera?: boolean | MediaTrackConstraints;
  micId?: string;
  camId?: string;
}

export declare function serverRoom(config: Partial<ServerConfig> | null, mode: Mode | undefined,
  name: "echoCancel" | "noiseSuppression"): boolean;
export declare function mediaConstraints(options?: ConstraintOptions): {
  audio: MediaTrackConstraints;
  video: MediaTrackConstraints | false;
};
export declare function openMedia(constraints: MediaStreamConstraints,
  onAudioOnly?: (error: unknown) => void): Promise<MediaStream>;
