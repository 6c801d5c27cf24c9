"""What the user does to the conversation directly: type a message, interrupt the reply, or
hold to talk.

The same for a WebRTC call (the page's data channel: ``text``, ``interrupt``/``stop``) and a
Realtime connection (user text items + ``response.create``, ``response.cancel``). Both act on
the engine session at once (the control path: nothing waits in a data queue); a typed message
is answered like a spoken turn. An engine that takes no typed messages raises
:class:`~omnicall.engine.base.UnsupportedControl`, which the caller turns into its protocol's
error.
"""

from __future__ import annotations

from collections.abc import Callable

from omnicall.engine.base import EngineSession
from omnicall.engine.events import MAX_TYPED_CHARS

MAX_WAITING_TEXTS = 16  # Realtime user text items waiting for response.create (see below)


def typed_text(text: object) -> str | None:
    """A typed message as the engine gets it: stripped and cut to ``MAX_TYPED_CHARS``;
    ``None`` when it is not text or only white space."""
    if not isinstance(text, str) or not text.strip():
        return None
    return text.strip()[:MAX_TYPED_CHARS]


class UserControls:
    """Typed messages and interrupts for one engine session. An interrupt is the engine's:
    it cuts its live reply, whose sound handle stops the sound (one path, as a barge-in).
    ``flush_sound`` then cuts whatever sound is still queued of replies the engine already
    ended (a model server's reply ends when its generation does, seconds before its sound has
    played: a call's :meth:`~omnicall.media.call_output.CallOutput.stop`); it runs after the
    engine, whose cut reads what of its live reply was heard.

    Realtime clients send user text as items and ask for the answer with ``response.create``:
    those items wait here (:meth:`hold`). Bounded: beyond ``MAX_WAITING_TEXTS`` the oldest
    becomes history at once (it was said, it just will not be part of the question)."""

    def __init__(self, engine_session: EngineSession,
                 flush_sound: Callable[[], object] | None = None) -> None:
        self.engine_session = engine_session
        self._flush_sound = flush_sound
        self.interrupts = 0
        self.typed_sent = 0
        self._waiting: list[str] = []
        self.holding = False  # push-to-talk: the user holds the talk control now
        self.held_turns = 0

    def interrupt(self) -> None:
        """Barge-in / stop: the engine cuts its reply, and with it the reply's sound, at
        once; then what sound of ended replies is still queued."""
        self.interrupts += 1
        self.engine_session.interrupt()
        if self._flush_sound is not None:
            self._flush_sound()

    def hold_to_talk(self, held: bool) -> None:
        """Push-to-talk (the page's talk button or space bar). Pressed: the reply stops and
        the microphone from now on is the user's turn, whoever else the engine would have
        heard (its own turn detection is off meanwhile); released: that turn is answered and
        the engine's turn detection comes back. A press while held, or a release while not,
        changes nothing. Raises ``UnsupportedControl`` where the engine has no manual turns
        (nothing changed)."""
        if held == self.holding:
            return
        session = self.engine_session
        if held:
            session.set_turn_detection(False)
            self.holding = True
            self.interrupt()
            return
        self.holding = False
        self.held_turns += 1
        session.commit_input()
        session.respond()
        session.set_turn_detection(True)

    def send_text(self, text: object) -> bool:
        """Answer a typed message; ``False`` when there was nothing to send (not text, or
        blank). Raises ``UnsupportedControl`` where the engine takes no typed messages."""
        message = typed_text(text)
        if message is None:
            return False
        self.engine_session.send_text(message)
        self.typed_sent += 1
        return True

    # -- Realtime: user text items waiting for response.create ------------------------------
    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def hold(self, text: str) -> None:
        """A user text item: answered by the next ``response.create`` (:meth:`answer`)."""
        self._waiting.append(text)
        if len(self._waiting) > MAX_WAITING_TEXTS:
            self.engine_session.add_message("user", self._waiting.pop(0))

    def answer(self) -> bool:
        """``response.create``: answer the waiting items as one typed message; ``False``
        when none was waiting. They stay waiting if the engine refuses typed messages."""
        if not self._waiting:
            return False
        self.send_text(" ".join(self._waiting))
        self._waiting = []
        return True

    def to_history(self) -> None:
        """Another item came, or the user spoke, before ``response.create``: the waiting
        items were history (put into the conversation unanswered)."""
        waiting, self._waiting = self._waiting, []
        for text in waiting:
            self.engine_session.add_message("user", text)
