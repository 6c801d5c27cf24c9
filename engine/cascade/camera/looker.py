"""The offline default's look at a camera picture, off the event loop and bounded in time.

One :class:`Looker` per cascade engine (its models are shared by the calls): the face
detector, the text reader and their own worker thread (``eyes``), so a look never waits
behind a reply's language model and a slow read never holds the think worker. A look is two
jobs on that worker:

1. the facts that need no text (colours, people, what changed: a few milliseconds), at
   most ``look_timeout_s``;
2. only when the words asked to read or look: the text, at most ``read_timeout_s``. A read
   that runs past it is left to finish on the worker (onnxruntime cannot be stopped) and its
   lines are dropped: the turn goes on, told the text could not be read in time.

The worker's queue is bounded (:data:`MAX_PENDING` jobs): a look asked while it is full is
refused at once (``WorkerBusy``), and the turn goes on without it (no facts, or no text:
``unread='busy'``).

With ``--addressee camera`` every camera frame is also watched for who is talking (the face
detector and :class:`~omnicall.engine.conversation.addressee.MouthWatch`) on a worker of its
own (``watch``, :data:`WATCH_PENDING` jobs; a frame that finds it full is not watched), so
the looks never queue behind it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from omnicall.engine.cascade.camera.faces import FaceFacts
from omnicall.engine.cascade.camera.scene_change import compared
from omnicall.engine.cascade.camera.sight import Fact, Glance, Sight, look_at, text_facts
from omnicall.engine.cascade.camera.text_reader import TextLine, TextReader
from omnicall.engine.conversation.addressee import Glimpse, MouthWatch
from omnicall.engine.worker import ModelWorker, WorkerBusy
from omnicall.media.video_ring import RgbImage

logger = logging.getLogger(__name__)

#: jobs the eyes worker holds (running and waiting); beyond: WorkerBusy
MAX_PENDING = 3
#: frames the watch worker holds (running and waiting) for all calls
WATCH_PENDING = 8


class Looker:
    """The camera's models and their worker (see the module docstring)."""

    def __init__(self, faces: FaceFacts, reader: TextReader | None,
                 look_timeout_s: float = 1.0, read_timeout_s: float = 2.0,
                 worker: ModelWorker | None = None,
                 watch_worker: ModelWorker | None = None) -> None:
        self.faces = faces
        self.reader = reader
        self.look_timeout_s = look_timeout_s
        self.read_timeout_s = read_timeout_s
        self.worker = worker or ModelWorker("eyes", max_pending=MAX_PENDING)
        self.watch_worker = watch_worker or ModelWorker("watch", max_pending=WATCH_PENDING)
        #: the watch's own detector: OpenCV's cascade classifier is not safe to run on two
        #: threads at once (the look's and the watch's)
        self.watch_faces = FaceFacts(faces.min_confidence)
        self.reads_late = 0  # reads that ran past the bound (their lines dropped)

    def quick(self, image: RgbImage) -> tuple[tuple[Fact, ...], Glance]:
        """The facts that need no text reading (on the worker thread)."""
        return look_at(image, self.faces.faces(image))

    async def look(self, image: RgbImage, previous: Glance | None, read: bool,
                   session: str = "") -> Sight | None:
        """A look at ``image`` (compared with ``previous``), its text read when ``read``;
        None when the worker could not look in time (or was full)."""
        sight = await self.glance_at(image, read, session)
        return None if sight is None else compared(sight, previous)

    async def glance_at(self, image: RgbImage, read: bool, session: str = "") -> Sight | None:
        """A look at ``image`` compared with nothing (its change facts come when it is used:
        ``scene_change.compared``), its text read when ``read``; None when the worker could
        not look in time (or was full)."""
        try:
            facts, glance = await asyncio.wait_for(
                self.worker.run(self.quick, image, session=session), self.look_timeout_s)
        except (TimeoutError, WorkerBusy) as exc:
            logger.warning("no camera look this turn (%s)", type(exc).__name__)
            return None
        sight = Sight(facts, glance)
        return await self.read(image, sight, session) if read else sight

    async def read(self, image: RgbImage, sight: Sight, session: str = "") -> Sight:
        """``sight`` (a look at ``image``) with the text of ``image`` read, at most
        ``read_timeout_s`` (or told why not: ``unread``)."""
        if self.reader is None or sight.read_asked:
            return sight
        try:
            lines: tuple[TextLine, ...] = await asyncio.wait_for(
                self.worker.run(self.reader.read, image, session=session), self.read_timeout_s)
        except TimeoutError:
            self.reads_late += 1
            logger.warning("the text was not read within %.1f s", self.read_timeout_s)
            return replace(sight, read_asked=True, unread="slow")
        except WorkerBusy:
            return replace(sight, read_asked=True, unread="busy")
        return replace(sight, facts=(*sight.facts, *text_facts(lines)), lines=lines,
                       read_asked=True)

    async def watch(self, image: RgbImage, watch: MouthWatch, at_s: float,
                    session: str = "") -> Glimpse | None:
        """A frame watched for who is talking (None: the watch worker was full)."""
        try:
            glimpse: Glimpse = await self.watch_worker.run(
                self.watch_faces.glimpse, image, watch, at_s, session=session)
        except WorkerBusy:
            return None
        return glimpse

    def warm_up(self, image: RgbImage) -> None:
        """Run each model once (first-use costs), on the calling thread."""
        self.quick(image)
        self.watch_faces.boxes(image)
        if self.reader is not None:
            self.reader.read(image)

    def close(self) -> None:
        self.worker.close()
        self.watch_worker.close()
