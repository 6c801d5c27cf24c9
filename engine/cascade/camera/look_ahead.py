"""The offline look, done before the answer needs it, so the end of a turn finds it done.

A look at the camera (faces, colours: ~80 ms of a core on the eyes worker; the text read,
~150 ms more) waited at the end of each turn, after the final transcript and before the
language model, and its facts, new to the prompt, also missed the prompt the model had
prefilled while the caller spoke. The camera then cost every answer ~100-300 ms.

So a call's :class:`LookAhead` is offered each frame that comes outside a pause
(:meth:`LookAhead.offer`; in a pause the speculative reply needs the cores) and looks when
due: one look at a time, never queued behind other eye work, at most one a
:data:`LOOK_EVERY_S` while the caller speaks and one a :data:`QUIET_EVERY_S` otherwise, and
only when the view is no longer the scene last looked at (``scene_change.same_scene``) or
that look is :data:`FRESH_S` old; its text is read too when the words so far ask for it. A
look is kept without "what changed" (each use compares it with the call's reference:
``scene_change.compared``), so one look serves every turn that shows its scene. Each new
look's facts, compared with the reference, go to ``on_sight`` (the session puts them in the
prompt it prefills).

At the end of a turn :meth:`LookAhead.for_turn` gives the look that stands for the turn's last
frame: the one done ahead when it shows the same scene and is at most :data:`STANDS_S` old
(no wait: when that look is still under way, the turn waits for its end), else a look now;
and the text read now when the final words ask to read and the look ahead did not. Only
then does the turn wait, and it says so (``waited``: the reply's
``look_start`` / ``look_done`` stage timings). Frames come at 2 a second in a call of the
page; a Realtime client (the remote tier's front-end) sends them only now and then (about one
a second while the caller speaks, one in ten seconds otherwise): a look at its quiet frames
stands for its next turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from omnicall.engine.cascade.camera.looker import Looker
from omnicall.engine.cascade.camera.scene_change import Thumb, compared, same_scene
from omnicall.engine.cascade.camera.sight import Glance, Sight
from omnicall.engine.conversation.frame_policy import grey_thumb
from omnicall.engine.tasks import TaskOwner
from omnicall.media.video_ring import RgbImage

logger = logging.getLogger(__name__)

#: looks while the caller speaks: at most one per this many seconds of media time
LOOK_EVERY_S = 1.0
#: looks otherwise (the frames between turns)
QUIET_EVERY_S = 5.0
#: a look of the same scene is done again once it is this old (faces come and go)
FRESH_S = 5.0
#: the longest a look done ahead stands for a turn's last frame of the same scene
STANDS_S = 15.0


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
              speaking: bool, read: bool = False) -> None:
        """A frame outside a pause (``at_s``: its media time): look at it now when due;
        ``previous``: the call's reference for what changed; ``speaking``: the caller is
        speaking; ``read``: the words so far ask to read."""
        if self._running is not None and not self._running.done():
            return
        done = self.done
        age_s = float("inf") if done is None else at_s - done.at_s
        if age_s < (LOOK_EVERY_S if speaking else QUIET_EVERY_S):
            return
        if self.looker.worker.pending:
            return  # optional work: never queued behind other looks
        thumb = grey_thumb(image)
        if done is not None and age_s < FRESH_S and same_scene(thumb, done.thumb) and (
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
        sight = await self.looker.glance_at(image, read, self.session_id)
        if sight is None:
            return None
        self.looks += 1
        looked = Looked(thumb, at_s, sight)
        if asyncio.current_task() is self._running:  # not one a later look overtook
            self.done = looked
            self.on_sight(compared(sight, previous))
        return looked

    async def for_turn(self, image: RgbImage, at_s: float, previous: Glance | None,
                       read: bool) -> tuple[Sight | None, bool]:
        """The look that stands for the turn's last frame ``image`` (media time ``at_s``),
        compared with ``previous``, its text read when ``read``; and whether the turn waited
        for it (see the module docstring)."""
        thumb = grey_thumb(image)
        running = self._running
        waited = False
        if running is not None and not running.done() and self._running_thumb is not None \
                and same_scene(thumb, self._running_thumb):
            waited = True  # under way, and of this scene: it is the one, still to finish
            await asyncio.shield(running)
        done = self.done
        if done is not None and at_s - done.at_s <= STANDS_S and same_scene(thumb, done.thumb):
            if not read or done.sight.read_asked:
                self.waits += waited
                return compared(done.sight, previous), waited
            self.waits += 1
            sight = await self.looker.read(image, done.sight, self.session_id)
            self.done = Looked(done.thumb, done.at_s, sight)
            return compared(sight, previous), True
        self.waits += 1
        looked = await asyncio.shield(self._start(image, thumb, at_s, previous, read))
        return (None if looked is None else compared(looked.sight, previous)), True
