"""Control messages from the page: anything a client sends is parsed safely or ignored; engine
events as the page's messages (a camera frame's thumbnail: to the page only)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from omnicall.app.call.messages import (
    MAX_CONTROL_BYTES,
    MAX_FACT_CHARS,
    MAX_FACTS,
    MAX_THUMB_BYTES,
    decode_control,
    encode,
    event_message,
)
from omnicall.app.realtime.replies import RealtimeReplies
from omnicall.app.storage.store import MemoryStore
from omnicall.app.storage.stored_conversation import StoredConversation
from omnicall.app.storage.transcripts import TranscriptCore, TranscriptFile
from omnicall.app.turns.event_pump import EventPump
from omnicall.engine.conversation.frame_policy import encode_jpeg
from omnicall.engine.events import (
    AssistantText,
    CameraSeen,
    EngineEvent,
    StageTiming,
    TurnEvent,
    UserTranscript,
)


@pytest.mark.parametrize("message", [
    "[" * 1000 + "]" * 1000,  # 2 KB of nested arrays: RecursionError in the decoder
    '{"a":' * 1500 + "1" + "}" * 1500,
    json.dumps({"type": "ping", "pad": "x" * MAX_CONTROL_BYTES}),  # over the size cap
    b"\xff\xfe\x00", "not json", "[]", '{"type": 1}', "", "null", '"ping"',
])
def test_invalid_control_messages_are_none(message: str | bytes) -> None:
    assert decode_control(message) is None


def test_valid_control_message() -> None:
    assert decode_control('{"type": "ping", "t": 5}') == {"type": "ping", "t": 5}
    assert decode_control(b'{"type": "interrupt"}') == {"type": "interrupt"}


def test_an_interrupted_reply_says_what_the_caller_heard() -> None:
    cut = event_message(TurnEvent("assistant", "end", 3, interrupted=True, heard_ms=1220))
    assert cut == {"type": "turn", "role": "assistant", "phase": "end", "turn": 3,
                   "interrupted": True, "heard_ms": 1220}
    assert "heard_ms" not in (event_message(TurnEvent("assistant", "end", 4)) or {})


# -- CameraSeen: the thumbnail goes to the caller's page, nowhere else ------------------------

ASTRONAUT = Path(__file__).parent / "data" / "astronaut.jpg"


def thumb_jpeg() -> bytes:
    """A real 96 px thumbnail (what the frame policy's camera makes for the page)."""
    image = cv2.cvtColor(cv2.imread(str(ASTRONAUT)), cv2.COLOR_BGR2RGB)
    return encode_jpeg(np.ascontiguousarray(image), 96, 60)


def test_a_frame_sent_to_the_model_becomes_a_camera_message_with_its_thumbnail() -> None:
    jpeg = thumb_jpeg()
    message = event_message(CameraSeen(4, 17, jpeg, sharp=True))
    assert message is not None
    thumb = message.pop("thumb")
    assert message == {"type": "camera", "state": "sent", "turn": 4, "image": 17, "sharp": True,
                       "facts": []}
    assert thumb.startswith("data:image/jpeg;base64,/9j/")
    assert base64.b64decode(thumb.split(",", 1)[1]) == jpeg  # the very bytes, as a data URL
    decoded = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert max(decoded.shape[:2]) == 96
    assert len(encode({**message, "thumb": thumb})) < 8_000  # a small data-channel message
    assert (event_message(CameraSeen(5, 18, jpeg)) or {})["sharp"] is False


def test_the_facts_a_reply_was_given_go_with_the_thumbnail_bounded() -> None:
    facts = ("the thing in the middle is mostly red", 'text reads "EXIT"')
    message = event_message(CameraSeen(2, 0, thumb_jpeg(), facts=facts))
    assert message is not None and message["facts"] == list(facts)
    many = event_message(CameraSeen(2, 0, b"", facts=("x" * 1000,) * 20)) or {}
    assert len(many["facts"]) == MAX_FACTS and all(len(f) == MAX_FACT_CHARS
                                                  for f in many["facts"])


@pytest.mark.parametrize("jpeg", [b"", b"\x89PNG\r\n\x1a\n" + bytes(100),
                                  b"\xff\xd8\xff" + bytes(MAX_THUMB_BYTES)],
                         ids=["empty", "not-a-jpeg", "too-large"])
def test_a_thumbnail_that_is_not_a_small_jpeg_is_not_sent(jpeg: bytes) -> None:
    message = event_message(CameraSeen(1, 2, jpeg))
    assert message is not None and message["thumb"] is None and message["state"] == "sent"


def test_serve_engine_clients_receive_nothing_of_a_camera_frame() -> None:
    """A Realtime client sent its frames itself (input_image items); no server event carries
    one back, nor says which one the model looked at."""
    replies = RealtimeReplies()
    assert replies.server_events(CameraSeen(1, 3, thumb_jpeg(), sharp=True), 1.0, 500.0) == []
    # and the connection's bookkeeping goes on as before around it
    assert replies.server_events(TurnEvent("assistant", "start", 1), 1.0, 500.0)
    assert replies.server_events(CameraSeen(1, 4, thumb_jpeg()), 1.1, 580.0) == []
    assert replies.server_events(AssistantText("a cup", 1), 1.2, 660.0)[0]["delta"] == "a cup"


async def test_the_image_reaches_no_transcript_store_file_or_log(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A turn with a camera frame, through what a call does with each event (the event pump,
    the --transcripts file, the --store conversation, the page's message): the image goes to
    the page's message only; nothing is logged of it, at any level."""
    caplog.set_level(logging.DEBUG)
    jpeg = thumb_jpeg()
    b64 = base64.b64encode(jpeg).decode("ascii")
    script: list[EngineEvent] = [
        TurnEvent("user", "start", 1), StageTiming(1, "speech_end", 2.0),
        UserTranscript("What am I holding?", final=True, turn_id=1),
        CameraSeen(1, 7, jpeg, sharp=True), TurnEvent("assistant", "start", 1),
        AssistantText("A mug.", 1), TurnEvent("assistant", "end", 1)]
    transcript = TranscriptFile(tmp_path, "call-1", "cascade")
    stored = StoredConversation()
    store = MemoryStore(ttl_s=60)
    page: list[str] = []

    async def route(event: EngineEvent) -> None:  # what CallSession._route does with each
        item = stored.item(event)
        if item is not None:
            await store.append("call-1", *item)
        transcript.feed(event)
        message = event_message(event)
        if message is not None:
            page.append(encode(message))

    async def events() -> AsyncIterator[EngineEvent]:
        for event in script:
            yield event

    pump = EventPump(route)
    await pump.run(events())
    transcript.close("hangup")
    assert pump.frames_seen == 1 and pump.events_in == len(script)
    camera = [json.loads(m) for m in page if json.loads(m)["type"] == "camera"]
    assert len(camera) == 1 and camera[0]["thumb"].endswith(b64)
    written = transcript.path.read_text()
    assert [json.loads(line)["type"] for line in written.splitlines()] == [
        "call", "turn", "turn", "call"]  # start, the user's words, the reply, end: no camera
    assert b64 not in written and "camera" not in written and "image" not in written
    assert await store.load("call-1") == [("user", "What am I holding?"), ("assistant", "A mug.")]
    assert TranscriptCore().feed(CameraSeen(1, 7, jpeg)) is None
    assert b64[:40] not in caplog.text and repr(jpeg)[:40] not in caplog.text
