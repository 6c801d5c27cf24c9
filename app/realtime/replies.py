"""Engine events as the Realtime protocol's server events (``omnicall serve-engine``).

:class:`RealtimeReplies` is the synchronous core of a connection's event handler: it keeps
the ids the protocol ties events together with (the user's input item, the current response
and its output item) and answers each engine event with the server events' fields, which the
connection validates and sends. The user's turns become ``input_audio_buffer.*`` events and
transcription items, an assistant turn one response with its audio and transcript deltas, a
tool call a ``function_call`` output item of the current response.

A reply's audio does not come as events: it comes through the reply's sound handle
(:mod:`omnicall.app.realtime.sound`), straight from the reply's gate, while its turn's events
come through the session's event queue. A response belongs to one assistant turn and is
opened by whichever comes first, its turn's start or its first sound (:meth:`audio`); audio
of a turn whose response is done is late and dropped.
"""

from __future__ import annotations

from typing import Any

from omnicall.engine import realtime as rt
from omnicall.engine.events import (
    AssistantText,
    CameraSeen,
    EngineEvent,
    StageTiming,
    TurnEvent,
    UserTranscript,
)
from omnicall.media.resample import Int16Array, StreamConverter

Fields = dict[str, Any]  # one server event, without its event_id


class RealtimeReplies:
    """Ids and the output converter of one connection; engine events in, server events out."""

    def __init__(self) -> None:
        self.to_wire = StreamConverter(rt.REALTIME_RATE_HZ)  # engines that speak at other rates
        self.user_item = rt.new_id("item")
        self.response_id: str | None = None
        self.reply_item: str | None = None
        self.response_turn: int | None = None  # the assistant turn the open response is
        self.done_turn: int | None = None  # the turn of the last response done
        self.speech_end_at_s: float | None = None  # the engine's own end-of-speech time

    def next_user_item(self) -> str:
        """The current user item's id (its input was committed); a new one starts."""
        item, self.user_item = self.user_item, rt.new_id("item")
        return item

    def server_events(self, event: EngineEvent, now_s: float, audio_ms: float) -> list[Fields]:
        """What the client hears of ``event`` (``audio_ms``: input audio received so far).
        Errors and tool calls are the connection's (an error event, nothing)."""
        if isinstance(event, CameraSeen):
            # nothing image-bearing goes back: the client sent its frames itself (input_image
            # items), and the protocol has no event for which of them the model looked at
            return []
        if isinstance(event, StageTiming):
            if event.stage == "speech_end":
                self.speech_end_at_s = event.at_s
            return []
        if isinstance(event, TurnEvent) and event.role == "user":
            return self._user_turn(event, now_s, audio_ms)
        if isinstance(event, UserTranscript):
            kind = ("conversation.item.input_audio_transcription.completed" if event.final
                    else "conversation.item.input_audio_transcription.delta")
            fields = {"transcript": event.text, "usage": {"type": "duration", "seconds": 0.0}} \
                if event.final else {"delta": event.text}
            return [{"type": kind, "item_id": self.user_item, "content_index": 0, **fields}]
        if isinstance(event, TurnEvent):
            return self._assistant_turn(event)
        if isinstance(event, AssistantText):
            return self._assistant_text(event)
        return []

    def _user_turn(self, event: TurnEvent, now_s: float, audio_ms: float) -> list[Fields]:
        if event.phase == "start":
            return [{"type": "input_audio_buffer.speech_started",
                     "audio_start_ms": int(audio_ms), "item_id": self.user_item}]
        # where speech ended in the input audio, not where the hangover confirmed it
        late_ms = 0.0 if self.speech_end_at_s is None else max(
            0.0, (now_s - self.speech_end_at_s) * 1000)
        self.speech_end_at_s = None
        stopped = {"type": "input_audio_buffer.speech_stopped",
                   "audio_end_ms": int(max(0.0, audio_ms - late_ms)), "item_id": self.user_item}
        return [stopped, {"type": "input_audio_buffer.committed",
                          "item_id": self.next_user_item()}]

    def _open(self, turn_id: int) -> list[Fields]:
        """The response of assistant turn ``turn_id``: created now unless it is open."""
        if self.response_id is not None and self.response_turn == turn_id:
            return []
        self.response_id, self.reply_item = rt.new_id("resp"), rt.new_id("item")
        self.response_turn = turn_id
        return [{"type": "response.created", "response": {
                    "id": self.response_id, "object": "realtime.response",
                    "status": "in_progress", "output": []}},
                {"type": "response.output_item.added", "response_id": self.response_id,
                 "output_index": 0, "item": {
                     "id": self.reply_item, "type": "message", "role": "assistant",
                     "status": "in_progress", "content": []}}]

    def _assistant_turn(self, event: TurnEvent) -> list[Fields]:
        if event.phase == "start":
            return self._open(event.turn_id)
        if self.response_id is None or event.turn_id != self.response_turn:
            return []  # no response, or not this turn's (its own was done already)
        status = "cancelled" if event.interrupted else "completed"
        done = {"type": "response.done", "response": {
            "id": self.response_id, "object": "realtime.response", "status": status,
            "output": [{"id": self.reply_item, "type": "message", "role": "assistant",
                        "status": "incomplete" if event.interrupted else "completed",
                        "content": []}]}}
        self.response_id = None
        self.done_turn = self.response_turn
        return [done]

    def _where(self) -> Fields:
        return {"response_id": self.response_id, "item_id": self.reply_item,
                "output_index": 0, "content_index": 0}

    def _assistant_text(self, event: AssistantText) -> list[Fields]:
        if self.response_id is None or self.reply_item is None:
            return []  # output of a reply the client cancelled
        return [{"type": "response.output_audio_transcript.delta", **self._where(),
                 "delta": event.delta}]

    def audio(self, turn_id: int, samples: Int16Array, rate_hz: int) -> list[Fields]:
        """Sound of assistant turn ``turn_id`` (its sound handle's write): an audio delta of
        its response, opened first if its turn's start has not come yet; none for a turn
        whose response is done."""
        if turn_id == self.done_turn:
            return []
        opened = self._open(turn_id)
        wire = self.to_wire.convert(samples, rate_hz)
        return [*opened, {"type": "response.output_audio.delta", **self._where(),
                          "delta": rt.encode_pcm16(wire)}]

    def function_call(self, call_id: str, name: str, arguments: str) -> list[Fields]:
        """The engine calls a client tool: a ``function_call`` output item of the current
        response (of a new id when none is open)."""
        response_id = self.response_id or rt.new_id("resp")
        item = {"id": rt.new_id("item"), "type": "function_call", "call_id": call_id,
                "name": name, "arguments": arguments}
        return [{"type": "response.output_item.added", "response_id": response_id,
                 "output_index": 1, "item": {**item, "status": "in_progress"}},
                {"type": "response.function_call_arguments.done", "response_id": response_id,
                 "item_id": item["id"], "output_index": 1, "call_id": call_id, "name": name,
                 "arguments": arguments},
                {"type": "response.output_item.done", "response_id": response_id,
                 "output_index": 1, "item": {**item, "status": "completed"}}]
