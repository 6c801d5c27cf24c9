"""The offline look, done while the caller speaks, so the end of the turn finds it done.

A look at the camera (faces, colours, what changed: ~80 ms of a core on the eyes worker; the
text read, ~150 ms more) waited at the end of each turn, after the final transcript and
before the language model, and its facts, new to the prompt, also missed the prompt the
model had prefilled while the caller spoke. The camera then cost every answer ~100-300 ms.

So a call's :class:`LookAhead` looks while the caller is speaking (:meth:`LookAhead.offer`,
each media unit with a frame): at most one look a :data:`LOOK_EVERY_S`, one at a time, never
while the eyes worker has other work, and not again while the view stays the same scene
(``scene_change.same_scene``); its text is read too when the words heard so far ask for it. Each new
look's facts are handed to ``on_sight`` (the session puts them in the prompt it prefills).

At the end of the turn :meth:`LookAhead.for_turn` gives the look that stands for the turn's
last frame: the one done ahead when it shows the same scene (no wait), else (the view
changed in the last moment, or nothing was looked at yet) a look now; and the text read now
when the final words ask to read and the look ahead did not. Only then does the turn wait,
and it says so (``waited``: the reply's ``look_start`` / ``look_done`` stage timings).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from omnicall.engine.cascade.looker import Looker
from omnicall.engine.cascade.scene_change import Thumb, same_scene
from omnicall.engine.cascade.sight import Glance, Sight
from omnicall.engine.conversation.frame_policy import grey_thumb
from omnicall.engine.tasks import TaskOwner
from omnicall.media.video_ring import RgbImage

logger = logging.getLogger(__name__)

#: at most one look ahead per this many seconds of media time
LOOK_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class Looked:
    """A look done ahead: the frame's thumbnail, its media time, and what was seen."""

    thumb: Thumb
    at_s: float
    sight: Sight


class LookAhead:
    """One call's looks ahead (see the module docstring)."""

    def __init__(self, looker: Looker, session_id: str, tasks: TaskOwner,
                 on_sight: Callable[[Sight], None]) -> None:
        self.looker = looker
        self.session_id = session_id
        self.tasks = tasks  # the session's: a look ahead ends with the call
        self.on_sight = on_sight
        self.done: Looked | None = None
        self._running: asyncio.Task[Looked | None] | None = None
        self._running_thumb: Thumb | None = None
        self.looks = 0  # looks ahead made
        self.waits = 0  # turns that waited for a look at their end

    def offer(self, image: RgbImage, at_s: float, previous: Glance | None,
              read: bool = False) -> None:
        """A frame while the caller speaks (``at_s``: its media time): look at it now when
        due; ``previous``: the last turn's look (what changed since); ``read``: the words
        so far ask to read."""
        if self._running is not None and not self._running.done():
            return
        done = self.done
        if done is not None and at_s - done.at_s < LOOK_EVERY_S:
            return
        if self.looker.worker.pending:
            return  # optional work: never queued behind other looks
        thumb = grey_thumb(image)
        if done is not None and same_scene(thumb, done.thumb) and (
                done.sight.read_asked or not read):
            return
        self._start(image, thumb, at_s, previous, read)

    def _start(self, image: RgbImage, thumb: Thumb, at_s: float, previous: Glance | None,
               read: bool) -> asyncio.Task[Looked | None]:
        self._running_thumb = thumb
        self._running = self.tasks.spawn("look-ahead", self._look(image, thumb, at_s,
                                                                  previous, read))
        return self._running

    async def _look(self, image: RgbImage, thumb: Thumb, at_s: float,
                    previous: Glance | None, read: bool) -> Looked | None:
        sight = await self.looker.look(image, previous, read, self.session_id)
        if sight is None:
            return None
        self.looks += 1
        looked = Looked(thumb, at_s, sight)
        if asyncio.current_task() is self._running:  # not one a later look overtook
            self.done = looked
            self.on_sight(sight)
        return looked

    async def for_turn(self, image: RgbImage, at_s: float, previous: Glance | None,
                       read: bool) -> tuple[Sight | None, bool]:
        """The look that stands for the turn's last frame ``image``, with its text read when
        ``read``; and whether the turn waited for it (see the module docstring)."""
        thumb = grey_thumb(image)
        running = self._running
        if running is not None and not running.done() and self._running_thumb is not None \
                and same_scene(thumb, self._running_thumb):
            await asyncio.shield(running)  # nearly done, and of this scene: wait for it
        done = self.done
        if done is not None and same_scene(thumb, done.thumb):
            if not read or done.sight.read_asked:
                return done.sight, False
            self.waits += 1
            sight = await self.looker.read(image, done.sight, self.session_id)
            self.done = Looked(done.thumb, done.at_s, sight)
            return sight, True
        self.waits += 1
        looked = await asyncio.shield(self._start(image, thumb, at_s, previous, read))
        return (None if looked is None else looked.sight), True

    def forget(self) -> None:
        """The turn's look was used: the next turn looks afresh (what changed is measured
        from this turn's look)."""
        self.done = None
