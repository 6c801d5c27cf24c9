"""A call's data channel (``events``): messages to the page, and the page's controls.

Out: JSON messages (:mod:`omnicall.app.call.messages`). The channel opens just after the media, so
what is sent before (a greeting's captions) waits in a bounded queue of ``EARLY_MESSAGES``
(the oldest dropped, counted) and goes out, after the hello, when it opens. A message is
dropped (counted) while SCTP holds more than ``MAX_CHANNEL_BUFFER_BYTES``: a page that does
not read must not grow the server's memory.

In: control messages - ``interrupt``/``stop``, ``text`` (typed,
:mod:`omnicall.app.turns.user_controls`), ``talk`` (push-to-talk: ``held`` true, then false),
``ping`` (answered ``pong``), ``hangup``. They run
inside aiortc's SCTP loop: nothing a client sends may raise out of here, and what is ignored
is logged a few times a minute per kind at most (no amplification).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from aiortc import RTCDataChannel

from omnicall.app.call.messages import decode_control, encode
from omnicall.app.protocol import problem
from omnicall.app.turns.user_controls import UserControls
from omnicall.engine.base import UnsupportedControl
from omnicall.media.clock import Clock
from omnicall.media.log_limit import LogLimiter, clip

logger = logging.getLogger(__name__)

MAX_CHANNEL_BUFFER_BYTES = 256 * 1024
EARLY_MESSAGES = 64  # page messages kept until the data channel opens
FLUSH_POLL_S = 0.02


class ControlChannel:
    """A call's data channel; ``controls`` act on its engine session and ``hangup`` ends
    the call."""

    def __init__(self, clock: Clock, controls: UserControls,
                 hangup: Callable[[], None]) -> None:
        self.clock = clock
        self.controls = controls
        self._hangup = hangup
        self.channel: RTCDataChannel | None = None
        self._early: deque[dict[str, Any]] = deque(maxlen=EARLY_MESSAGES)
        self.closing = False  # the call is closing: nothing more waits for the channel
        self.dropped_messages = 0
        self.ignored_messages = 0
        self.log_limit = LogLimiter()

    def open(self, channel: RTCDataChannel, hello: dict[str, Any]) -> None:
        """The page's channel arrived: say ``hello``, then what waited for it."""
        self.channel = channel
        channel.on("message", self.on_message)
        self.send(hello)
        while self._early:
            self.send(self._early.popleft())

    def send(self, message: dict[str, Any]) -> bool:
        channel = self.channel
        if channel is None and not self.closing:
            if len(self._early) == self._early.maxlen:
                self.dropped_messages += 1
            self._early.append(message)
            return False
        if channel is None or channel.readyState != "open":
            return False
        if channel.bufferedAmount > MAX_CHANNEL_BUFFER_BYTES:
            self.dropped_messages += 1
            return False
        channel.send(encode(message))
        return True

    async def flush(self, timeout_s: float) -> None:
        """Wait until what was sent has been acknowledged by the peer, at most ``timeout_s``
        (a goodbye before the close: handed to SCTP is not enough, a packet still in flight
        is lost when the transport closes)."""
        for _ in range(int(timeout_s / FLUSH_POLL_S)):
            if self.delivered():
                return
            await asyncio.sleep(FLUSH_POLL_S)

    def delivered(self) -> bool:
        """Nothing sent on the channel waits to leave or for the peer's acknowledgement."""
        channel = self.channel
        if channel is None or channel.readyState != "open":
            return True  # nothing more can go
        if channel.bufferedAmount:
            return False
        # aiortc keeps chunks not yet sent and sent but not yet acknowledged (SACK) in these
        # (private; where absent, handed over to SCTP is all that can be known)
        sctp = channel.transport
        return not getattr(sctp, "_outbound_queue", None) and not getattr(sctp, "_sent_queue", None)

    def log_ignored(self, key: str, message: str, *args: object) -> None:
        """Log what a client sent at most a few times a minute per kind (no amplification)."""
        self.ignored_messages += 1
        if self.log_limit.allow(key, self.clock.now()):
            suffix = ("; further ones this minute are counted, not logged"
                      if self.log_limit.last_allowed(key) else "")
            logger.info(message + suffix, *args)

    def on_message(self, message: str | bytes) -> None:
        """Runs inside aiortc's SCTP loop: nothing a client sends may raise out of here."""
        try:
            self.handle(message)
        except Exception:  # a bug here must not end the call from inside aiortc's loop
            logger.exception("control message handling failed")

    def handle(self, message: str | bytes) -> None:
        data = decode_control(message)
        if data is None:
            self.log_ignored("malformed", "ignoring a malformed control message (%d bytes)",
                             len(message))
            return
        forbidden = problem("client_message", data)
        if forbidden is not None:  # an unknown type, a field of the wrong type or size
            self.log_ignored("forbidden", "ignoring a control message the protocol forbids "
                             "(%s: %s)", clip(data["type"]), clip(forbidden))
            return
        # the schema passed it: each kind's fields are there, of their types
        kind = data["type"]
        if kind in ("interrupt", "stop"):
            self.controls.interrupt()
        elif kind == "ping":
            self.send({"type": "pong", "t": data.get("t")})
        elif kind == "hangup":
            self._hangup()
        elif kind == "text":
            self._typed(data["text"])
        elif kind == "talk":
            self._talk(data["held"])

    def _talk(self, held: bool) -> None:
        """Push-to-talk: ``held`` true while the user holds the talk control."""
        try:
            self.controls.hold_to_talk(held)
        except UnsupportedControl as exc:
            self.send({"type": "error", "recoverable": True,
                       "message": f"push-to-talk is not possible here: {exc}"})

    def _typed(self, text: object) -> None:
        """A message typed on the page joins the conversation and is answered."""
        try:
            if not self.controls.send_text(text):
                self.log_ignored("text", "ignoring an empty or invalid typed message")
        except UnsupportedControl as exc:
            self.send({"type": "error", "recoverable": True,
                       "message": f"typed messages are not possible here: {exc}"})
