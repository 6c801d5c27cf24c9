"""Opening a Realtime session on one model server: the websocket, the server's
``session.created``, then omnicall's ``session.update`` (instructions, who ends turns, the
tools) and the conversation so far replayed as items. What a call's first connection and
each failover do alike; the session keeps the connection it returns."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import aiohttp
from openai.types import realtime as rt_types

from omnicall.engine import realtime as rt
from omnicall.engine.remote.settings import RemoteSettings
from omnicall.engine.tools import ToolRunner

CONNECT_TIMEOUT_S = 2.0
HEARTBEAT_S = 2.0  # a server that stops answering pings is gone after ~2 heartbeats


async def open_session(http: aiohttp.ClientSession, url: str, settings: RemoteSettings,
                       tools: ToolRunner | None, history: Sequence[tuple[str, str]]
                       ) -> aiohttp.ClientWebSocketResponse:
    """A started Realtime session on ``url`` (``--engine-model``, ``--engine-key``);
    :class:`~omnicall.engine.realtime.ProtocolError` when the server refuses it, aiohttp's
    errors or ``TimeoutError`` (``CONNECT_TIMEOUT_S``) when it cannot be reached."""
    params = {"model": settings.engine_model} if settings.engine_model else {}
    headers = ({"Authorization": f"Bearer {settings.engine_key}"} if settings.engine_key
               else {})
    ws = await asyncio.wait_for(http.ws_connect(
        url, params=params, headers=headers, heartbeat=HEARTBEAT_S,
        max_msg_size=rt.MAX_EVENT_BYTES), CONNECT_TIMEOUT_S)
    try:
        first = await ws.receive(timeout=CONNECT_TIMEOUT_S)
        if first.type != aiohttp.WSMsgType.TEXT:
            raise rt.ProtocolError("the server closed the session before it started")
        event = rt.parse_server_event(first.data)
        if isinstance(event, rt_types.RealtimeErrorEvent):
            raise rt.ProtocolError(f"{event.error.code}: {event.error.message}")
        if not isinstance(event, rt_types.SessionCreatedEvent):
            raise rt.ProtocolError(f"expected session.created, got {event.type}")
        await ws.send_str(rt.dump(rt.session_update(
            instructions=settings.instructions or None,
            server_vad=settings.turn_mode == "server",
            tools=[spec.realtime() for spec in tools.specs()] if tools else None)))
        for role, text in history:
            await ws.send_str(rt.dump(rt.message_item(role, text)))
    except BaseException:
        await ws.close()
        raise
    return ws
