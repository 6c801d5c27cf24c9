"""The cascade's conversation memory: what a call said so far (:class:`Conversation`), bounded
by tokens, with the camera frames each user turn went with, and the prompt it makes for the
next answer (system prompt, the tools' examples, the history, the camera facts last)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from omnicall.engine.cascade.camera.pictures import PICTURE_TOKENS, Picture, user_content
from omnicall.engine.conversation.frame_policy import ImageId
from omnicall.media.resample import Int16Array

SYSTEM_PROMPT = ("You are omnicall, a friendly voice assistant on a video call. You can hear "
                 "the user and see their camera. Reply in one or two short spoken sentences. "
                 "No lists, no markdown.")


class Turn(NamedTuple):
    """One remembered message; a user turn may carry the camera frames it went with."""

    role: str
    text: str
    pictures: tuple[Picture, ...] = ()


@dataclass
class Conversation:
    """Per-session memory, bounded by tokens (oldest exchanges are forgotten first)."""

    max_tokens: int = 768
    turns: list[Turn] = field(default_factory=list)
    system_prompt: str = SYSTEM_PROMPT  # --instructions
    tools: str = ""  # the tool list for the system prompt ('' = no tools)
    shots: list[tuple[str, str]] = field(default_factory=list)  # the tools' examples

    def add(self, role: str, text: str, pictures: tuple[Picture, ...] = ()) -> None:
        if text.strip() or pictures:
            self.turns.append(Turn(role, text.strip(), pictures))

    def pairs(self) -> list[tuple[str, str]]:
        """The memory as (role, text), pictures left out."""
        return [(t.role, t.text) for t in self.turns]

    def replace_last(self, role: str, text: str) -> None:
        """Change the latest ``role`` message (dropped when ``text`` is empty)."""
        for index in range(len(self.turns) - 1, -1, -1):
            if self.turns[index].role == role:
                if text.strip():
                    self.turns[index] = self.turns[index]._replace(text=text.strip())
                else:
                    del self.turns[index]
                return

    def retire(self, image_ids: list[ImageId]) -> None:
        """Pictures past the retention bound: each becomes a short note in its turn."""
        gone = set(image_ids)
        for index, turn in enumerate(self.turns):
            if any(p.image_id in gone for p in turn.pictures):
                self.turns[index] = turn._replace(pictures=tuple(
                    Picture(p.image_id, "") if p.image_id in gone else p
                    for p in turn.pictures))

    def trim(self, count_tokens: Callable[[str], int]) -> None:
        def cost(turn: Turn) -> int:
            return count_tokens(turn.text) + 4 + PICTURE_TOKENS * sum(
                not p.retired for p in turn.pictures)

        while self.turns and sum(cost(t) for t in self.turns) > self.max_tokens:
            self.turns.pop(0)
        while self.turns and self.turns[0].role != "user":
            self.turns.pop(0)

    def messages(self, facts: str, user_text: str, language_note: str = "",
                 pictures: tuple[Picture, ...] = (), audio: Int16Array | None = None
                 ) -> list[dict[str, Any]]:
        """The prompt for answering ``user_text`` (not yet added to the memory), with the
        turn's ``pictures`` and, for a model that hears, its ``audio``.

        The camera facts change every few seconds, so they go last, just before the question:
        the system prompt and the history stay a stable prefix that llama.cpp keeps cached
        from the previous turn (only the new tail is prefilled)."""
        camera = [{"role": "system", "content": f"What the camera shows now: {facts}"}] \
            if facts else []
        if language_note:  # --language auto: the language Whisper heard in this turn
            camera.append({"role": "system", "content": language_note})
        system = f"{self.system_prompt}\n\n{self.tools}" if self.tools else self.system_prompt
        return [{"role": "system", "content": system},
                *({"role": role, "content": text} for role, text in self.shots),
                *({"role": t.role, "content": user_content(t.text, t.pictures)}
                  for t in self.turns),
                *camera, {"role": "user", "content": user_content(user_text, pictures, audio)}]
