"""The client protocol's contract (web/protocol.schema.json): what the server sends fits it,
what it forbids on the way in is refused, the version is stated, and docs/protocol.md names
every message it defines."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from jsonschema import Draft202012Validator

from omnicall.app import protocol
from omnicall.app.call.messages import camera_message, event_message
from omnicall.app.call.session import GOODBYES
from omnicall.app.call.watchdog import CallWatchdog
from omnicall.app.config import ServerConfig
from omnicall.app.http.signaling import OfferError, parse_offer
from omnicall.client import Microphone, connect
from omnicall.engine.degrade import Level
from omnicall.engine.events import (
    AssistantText,
    CameraSeen,
    EngineError,
    StageTiming,
    ToolCall,
    TurnEvent,
    UserTranscript,
)
from tests.test_control_channel import make
from tests.test_signaling import offer_sdp
from tests.utils import running_server, tone

DOCS = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
SERVER_TYPES = ("transcript", "assistant_text", "turn", "timing", "tool", "camera", "error",
                "state", "stats", "degrade", "goodbye", "pong")


def valid(name: str, message: Any) -> None:
    assert protocol.problem(name, message) is None, (name, message,
                                                     protocol.problem(name, message))


def test_the_schema_is_a_valid_versioned_contract() -> None:
    schema = protocol.schema()
    Draft202012Validator.check_schema(schema)
    assert re.fullmatch(r"\d+\.\d+", protocol.PROTOCOL_VERSION)
    assert schema["$id"].endswith(protocol.PROTOCOL_VERSION)
    branches = {ref["$ref"].rsplit("/", 1)[1]
                for ref in schema["$defs"]["server_message"]["oneOf"]}
    assert branches == set(SERVER_TYPES)


def test_every_message_the_engines_events_become_fits() -> None:
    jpeg = b"\xff\xd8\xff" + b"x" * 100
    events = [UserTranscript("hello", final=False, turn_id=1),
              UserTranscript("Hello there.", final=True, turn_id=1),
              AssistantText("Hi", turn_id=1), TurnEvent("user", "start", 1),
              TurnEvent("assistant", "end", 1, interrupted=True, heard_ms=420.0),
              StageTiming(1, "first_audio_out", 12.5),
              ToolCall(1, "c1", "weather", {"city": "Oslo"}, "x" * 900, "", 31.0),
              ToolCall(1, "c2", "weather", {}, "", "boom" * 100, 5.0),
              CameraSeen(1, 3, jpeg, sharp=True, facts=("a red mug",)),
              CameraSeen(1, 0, b"not a jpeg"), EngineError("busy", recoverable=True)]
    for event in events:
        message = event_message(event, turn_origin_s=0.0)
        assert message is not None
        valid("server_message", message)
        valid(message["type"], message)
    valid("camera", camera_message(CameraSeen(2, 4, b"\xff\xd8\xff" * 9000)))  # too big
    for message in CallWatchdog.stall_messages(3):
        valid("server_message", message)
    for reason, text in GOODBYES.items():
        valid("server_message", {"type": "goodbye", "reason": reason, "message": text})
    for level in Level:
        valid("server_message", {"type": "degrade", "level": level.name.lower()})


def test_what_the_schema_forbids_a_client_to_send_is_ignored_and_counted() -> None:
    control, channel, engine, hangups = make()
    control.open(channel, {"type": "state"})  # type: ignore[arg-type]
    forbidden = [{"type": "dance"}, {"type": "talk", "held": "yes"}, {"type": "talk"},
                 {"type": "text", "text": 42}, {"type": "text", "text": "   "},
                 {"type": "text", "text": "x" * 2001}, {"type": "ping", "t": "now"}]
    for message in forbidden:
        assert protocol.problem("client_message", message) is not None, message
        control.handle(json.dumps(message))
    assert control.ignored_messages == len(forbidden)
    assert engine.sent == [] and engine.log == [] and hangups == []
    allowed = [{"type": "ping", "t": 1.5}, {"type": "ping"}, {"type": "text", "text": "hi"},
               {"type": "talk", "held": True}, {"type": "talk", "held": False},
               {"type": "interrupt"}, {"type": "stop"}, {"type": "hangup"}]
    for message in allowed:
        valid("client_message", message)
        control.handle(json.dumps(message))
    assert control.ignored_messages == len(forbidden) and hangups == ["hangup"]
    assert engine.sent == ["hi"] and "auto=False" in engine.log  # typed, push-to-talk
    assert {"type": "pong", "t": 1.5} in channel.sent


async def test_an_offer_the_schema_forbids_is_refused() -> None:
    sdp = await offer_sdp()
    valid("offer", {"type": "offer", "sdp": sdp, "mode": "kiosk", "video_fps": 5,
                    "resume": "abc"})
    parse_offer(json.dumps({"type": "offer", "sdp": sdp, "mode": "kiosk"}).encode())
    for bad in ({"type": "answer", "sdp": sdp}, {"type": "offer"},
                {"type": "offer", "sdp": "hello"}, {"type": "offer", "sdp": sdp, "mode": "tv"},
                {"type": "offer", "sdp": sdp, "video_fps": 60},
                {"type": "offer", "sdp": sdp, "video_fps": "5"},
                {"type": "offer", "sdp": sdp, "resume": ""},
                {"type": "offer", "sdp": sdp, "resume": "x" * 65}):
        assert protocol.problem("offer", bad) is not None, bad
        with pytest.raises(OfferError):
            parse_offer(json.dumps(bad).encode())


async def test_a_real_calls_http_and_messages_fit_and_state_the_version() -> None:
    config = ServerConfig(engine="loopback", ice_loopback=True, ice_servers=(
        "stun:stun.example:3478,turn:u:p@turn.example:3478"))
    async with running_server(config) as (url, _app):
        async with aiohttp.ClientSession() as http:
            async with http.get(url + "config") as response:
                config_json = await response.json()
            async with http.post(url + "offer", data=b"{") as response:
                refused = await response.json()
        valid("config", config_json)
        assert config_json["protocol"] == protocol.PROTOCOL_VERSION
        valid("http_error", refused)
        mic = Microphone(tone(440, 1.0, rate=48_000))
        call = await connect(url, mic)
        try:
            call.send({"type": "ping", "t": 1.0})
            call.send({"type": "text", "text": "typed"})  # the loopback engine says no
            await call.wait_for(lambda m: m["type"] == "stats", timeout_s=10)
            await call.wait_for(lambda m: m["type"] == "error", timeout_s=10)
            await asyncio.sleep(0.2)
        finally:
            await call.hang_up()
    kinds = {m["type"] for m in call.messages}
    assert {"state", "pong", "stats", "error"} <= kinds
    for message in call.messages:
        valid("server_message", message)


async def test_the_answer_states_the_version() -> None:
    async with running_server() as (url, _app):
        sdp = await offer_sdp()
        async with aiohttp.ClientSession() as http, \
                http.post(url + "offer", json={"type": "offer", "sdp": sdp}) as response:
            answer = await response.json()
    valid("answer", answer)
    assert answer["protocol"] == protocol.PROTOCOL_VERSION
    assert protocol.problem("answer", {**answer, "protocol": "0.9"}) is not None


def test_the_docs_name_every_message_both_ways() -> None:
    """docs/protocol.md is checked against the schema: each server message has a row of the
    table, each client message is named."""
    text = DOCS.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", text, flags=re.M))
    assert set(SERVER_TYPES) <= rows, set(SERVER_TYPES) - rows
    client_types = set()
    for branch in protocol.schema()["$defs"]["client_message"]["oneOf"]:
        kind = branch["properties"]["type"]
        client_types |= set(kind.get("enum", [kind.get("const")]))
    for kind in client_types:
        assert f'"{kind}"' in text or f"`{kind}`" in text, kind
    assert "protocol.schema.json" in text and protocol.PROTOCOL_VERSION in text
