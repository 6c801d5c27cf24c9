"""What of a call's conversation goes to the transcript store (``--store``), so that a resume
that lands on another worker or machine goes on from it: each final user transcript, and each
assistant reply's text once the reply ended (``" ..."`` after one that was cut short).

Synchronous: engine events in, ``(role, text)`` items out; the session appends them to the
store. Bounded: the text of at most ``MAX_OPEN_REPLIES`` replies is collected at once (the
oldest dropped beyond that), each at most ``MAX_REPLY_CHARS`` (its newest part kept).
"""

from __future__ import annotations

from omnicall.engine.events import AssistantText, EngineEvent, TurnEvent, UserTranscript

MAX_REPLY_CHARS = 4000
MAX_OPEN_REPLIES = 4

Item = tuple[str, str]  # (role, text)


class StoredConversation:
    def __init__(self) -> None:
        self._reply_text: dict[int, str] = {}  # assistant text per turn, until it ends

    def __len__(self) -> int:
        return len(self._reply_text)

    def item(self, event: EngineEvent) -> Item | None:
        """The item to store for ``event``, if it completes one."""
        if isinstance(event, UserTranscript) and event.final and event.text.strip():
            return ("user", event.text)
        if isinstance(event, AssistantText):
            text = self._reply_text.get(event.turn_id, "") + event.delta
            self._reply_text[event.turn_id] = text[-MAX_REPLY_CHARS:]
            while len(self._reply_text) > MAX_OPEN_REPLIES:
                self._reply_text.pop(next(iter(self._reply_text)))
        elif isinstance(event, TurnEvent) and event.role == "assistant" and event.phase == "end":
            text = self._reply_text.pop(event.turn_id, "").strip()
            if text:
                return ("assistant", text + (" ..." if event.interrupted else ""))
        return None
