"""A Realtime client's input on the media plane: PCM16 audio and images in, 80 ms units out.

``input_audio_buffer.append`` audio (24 kHz) is resampled to 16 kHz and cut into 80 ms
frames by an :class:`~omnicall.media.audio_ring.AudioRing`; an ``input_image`` is stamped
with the audio frame in progress and kept in a latest-only
:class:`~omnicall.media.video_ring.VideoRing`; the
:class:`~omnicall.media.aligner.Aligner` pairs them into the
:class:`~omnicall.media.aligner.MediaUnit` s an engine session takes, as a WebRTC call's
ingest does (:mod:`omnicall.media.ingest`). :class:`RealtimeInput` is synchronous;
:func:`offer_units` is the connection's async part.

Image items: each ``input_image`` item's id (the client's, or one made here) is remembered,
the newest :data:`MAX_IMAGE_ITEMS`, ids only. ``conversation.item.delete`` of one drops its
image from what the connection still holds: the ring (not yet in a unit) or the unit offered
to the engine and not yet taken; an image the engine already took was one video frame of its
input, which the engine keeps as it keeps any frame (the latest, or a few). Pixels held here
are bounded by the ring (one image) and the held unit, however many items a client creates.

Back-pressure, unlike a call (whose network cannot be paused): nothing is dropped. The ring
is filled one frame at a time, and only when it is empty, so it never overflows; what the
client sent waits, converted, until the engine takes it, and the connection stops reading
the client's socket while the engine refuses a unit (up to ``PUSH_WAIT_S``, then the append
is refused with an error and the unit is offered again with the next one).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
from collections import OrderedDict
from fractions import Fraction

import cv2
import numpy as np

from omnicall.engine import realtime as rt
from omnicall.media.aligner import Aligner, MediaUnit
from omnicall.media.audio_ring import AudioRing
from omnicall.media.clock import Clock
from omnicall.media.ingest import UnitSink
from omnicall.media.log_limit import clip
from omnicall.media.resample import Int16Array, StreamConverter
from omnicall.media.timebase import INPUT_FRAME_SAMPLES, INPUT_RATE_HZ
from omnicall.media.video_ring import RgbImage, VideoRing, VideoUnitFrame

PUSH_WAIT_S = 10.0  # the engine refusing input this long: the client sends faster than real time
PUSH_RETRY_S = 0.01
MAX_IMAGE_BYTES = 4 * 1024 * 1024
IMAGE_TIME_BASE = Fraction(1, 90_000)  # an input_image has no time of its own: pts 0
#: image item ids a connection remembers for conversation.item.delete (ids only; a client
#: keeps a handful: the remote engine's frame policy keeps 4); an older one is forgotten
MAX_IMAGE_ITEMS = 64
MAX_ITEM_ID_CHARS = 64  # OpenAI's item ids are up to 32 characters


def decode_image(url: str, size: tuple[int, int]) -> RgbImage:
    """An ``input_image`` data URL (JPEG or PNG) as an RGB image of ``size`` (width,
    height); ``ProtocolError`` when it is not one."""
    _, _, data = url.partition("base64,")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise rt.ProtocolError("input_image must be a base64 data URL") from exc
    if not raw or len(raw) > MAX_IMAGE_BYTES:
        raise rt.ProtocolError(f"input_image must be 1 byte to {MAX_IMAGE_BYTES} bytes")
    image = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise rt.ProtocolError("input_image is not a JPEG or PNG image")
    rgb = cv2.cvtColor(cv2.resize(image, size), cv2.COLOR_BGR2RGB)
    return np.ascontiguousarray(rgb)


class RealtimeInput:
    """Audio and images of one Realtime connection, aligned into units for its engine."""

    def __init__(self) -> None:
        self.converter = StreamConverter(INPUT_RATE_HZ)
        self.ring = AudioRing()
        self.video = VideoRing(depth=1)  # the latest image: an older one is dropped, counted
        self.aligner = Aligner(self.ring, self.video)
        self._waiting: Int16Array = np.zeros(0, np.int16)  # converted, not yet in the ring
        self._held: MediaUnit | None = None  # offered, not yet taken
        self.audio_ms = 0.0  # input audio received, in ms (audio_start_ms / audio_end_ms)
        self.images = 0  # input_image items received
        self.images_deleted = 0  # ... and deleted by the client (conversation.item.delete)
        self.units_taken = 0
        #: the image items of this connection, oldest first (ids only, bounded)
        self.image_items: OrderedDict[str, None] = OrderedDict()
        self._pending_item: str | None = None  # the item whose image waits in the ring
        self._held_item: str | None = None  # ... is in the unit offered, not yet taken

    def frames_waiting(self) -> int:
        """Whole 80 ms frames received and not yet taken by the engine."""
        return (len(self._waiting) // INPUT_FRAME_SAMPLES + len(self.ring)
                + (self._held is not None))

    def add_audio(self, samples: Int16Array) -> None:
        """``input_audio_buffer.append``: PCM16 mono at the wire rate (24 kHz)."""
        self.audio_ms += len(samples) * 1000 / rt.REALTIME_RATE_HZ
        converted = self.converter.convert(samples, rt.REALTIME_RATE_HZ)
        self._waiting = np.concatenate([self._waiting, converted]) if len(self._waiting) \
            else converted

    def new_image_item(self, item_id: str | None) -> str:
        """The id of a new image item: the client's (``ProtocolError`` when it is too long
        or already taken), or a new one."""
        if not item_id:
            return rt.new_id("item")
        if len(item_id) > MAX_ITEM_ID_CHARS:
            raise rt.ProtocolError(f"item ids are at most {MAX_ITEM_ID_CHARS} characters")
        if item_id in self.image_items:
            raise rt.ProtocolError(f"item {clip(item_id)} already exists")
        return item_id

    def add_image(self, image: RgbImage, item_id: str = "") -> None:
        """An ``input_image`` of item ``item_id``: it goes with the audio frame in progress
        (the next unit); one still waiting is replaced (latest only)."""
        index = self.ring.clock_samples // INPUT_FRAME_SAMPLES
        self.video.push(VideoUnitFrame(index, 0, IMAGE_TIME_BASE, image))
        self.images += 1
        item_id = item_id or rt.new_id("item")
        self._pending_item = item_id
        self.image_items[item_id] = None
        self.image_items.move_to_end(item_id)
        while len(self.image_items) > MAX_IMAGE_ITEMS:
            self.image_items.popitem(last=False)

    def delete_image(self, item_id: str) -> bool:
        """``conversation.item.delete`` of an image item: its image is dropped from what
        waits for the engine; False when no such item is known here."""
        if item_id not in self.image_items:
            return False
        del self.image_items[item_id]
        if item_id == self._pending_item:
            self.video.clear()
            self._pending_item = None
        if item_id == self._held_item and self._held is not None:
            self._held = dataclasses.replace(self._held, video=None)
            self._held_item = None
        self.images_deleted += 1
        return True

    def next_unit(self) -> MediaUnit | None:
        """The next unit for the engine: the same one again until :meth:`taken`."""
        if self._held is None:
            while not len(self.ring) and len(self._waiting):
                # one frame's worth at a time into an empty ring: it never drops a frame
                self.ring.write(self._waiting[:INPUT_FRAME_SAMPLES])
                self._waiting = self._waiting[INPUT_FRAME_SAMPLES:]
            self._held = self.aligner.next_unit()
            if self._held is not None and self._held.video is not None:
                self._held_item, self._pending_item = self._pending_item, None
        return self._held

    def taken(self) -> None:
        self._held = None
        self._held_item = None  # the engine has its image now (if it had one)
        self.units_taken += 1

    def clear(self) -> None:
        """``input_audio_buffer.clear``: audio the engine has not taken is dropped, the
        frame in progress too (the clock moves on to the next frame's start); an image
        still waits for the next unit."""
        self._waiting = np.zeros(0, np.int16)
        self._held = None
        self._held_item = None
        self.converter.reset()
        partial = self.ring.clock_samples % INPUT_FRAME_SAMPLES
        if partial:
            self.ring.write(np.zeros(INPUT_FRAME_SAMPLES - partial, np.int16))
        self.ring.clear()


async def offer_units(source: RealtimeInput, push: UnitSink, clock: Clock,
                      wait_s: float = PUSH_WAIT_S) -> None:
    """Offer every ready unit to the engine session's ``push``. While it refuses one, wait
    (the caller reads no more of the socket meanwhile), and after ``wait_s`` refuse the
    append (``ProtocolError``): the unit is offered again with the next append."""
    while (unit := source.next_unit()) is not None:
        deadline_s = clock.now() + wait_s
        while not push(unit):
            if clock.now() > deadline_s:
                raise rt.ProtocolError("the engine is not keeping up with the input audio")
            await asyncio.sleep(PUSH_RETRY_S)
        source.taken()
