"""The camera of one remote call: which frames go to the model server as ``input_image``
items, which of those it is told to forget, and whether it takes images at all.

Pure bookkeeping around the call's :class:`~omnicall.engine.conversation.camera.Camera`
(the shared frame policy); the session (:mod:`omnicall.engine.remote.session`) sends what it
builds and reports what the server answers:

- :meth:`RemoteImages.see` with each unit's frame and :meth:`RemoteImages.end_turn` at the end
  of a user turn return a :class:`Sighting` to send now (an end-of-turn frame the server
  already has - ``reused`` - returns None);
- :meth:`RemoteImages.item` is that sighting as a ``conversation.item.create`` whose item id
  omnicall chose (the Realtime protocol lets the client name its items), recorded by
  :meth:`RemoteImages.sent` once it went out;
- :meth:`RemoteImages.deletes` are the ``conversation.item.delete`` events for the images
  past the policy's ``max_images``, by the item ids this connection created;
- :meth:`RemoteImages.on_error`: an ``error`` event naming one of the image items means the
  server refuses images (vllm-omni, ``serve-engine --no-video``): no image is sent for the
  rest of the call, audio goes on. One naming a delete means the server keeps its items (the
  images still go, retired ones are no longer named).

Nothing here logs or stores an image: only ids and counts.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any, Literal

from openai.types.realtime import ConversationItemCreateEvent, ConversationItemDeleteEvent

from omnicall.engine import realtime as rt
from omnicall.engine.conversation.camera import Camera, Sighting
from omnicall.engine.conversation.frame_policy import ImageId
from omnicall.engine.conversation.settings import FramePolicySettings
from omnicall.media.video_ring import VideoUnitFrame

#: image and delete events whose ``error`` may still come back (a server answers within a
#: round trip; at 1 fps that is one or two of each)
MAX_PENDING_EVENTS = 32
#: an error for a delete with one of these codes means the item was gone already, not that
#: the server cannot delete (serve-engine's code; OpenAI's messages say "does not exist")
GONE_CODES = frozenset({"item_not_found", "item_delete_invalid_item_id"})

ErrorKind = Literal["images_refused", "deletes_refused", "ours"]


class RemoteImages:
    """One call's images on its model server (see the module docstring)."""

    def __init__(self, settings: FramePolicySettings, enabled: bool) -> None:
        self.camera = Camera(settings)
        self.enabled = enabled  # ``--remote-video`` and ``--video``
        self.refused = False  # the server refused an image: none for the rest of the call
        self.deletes_refused = False  # this connection's server does not delete items
        #: the item id of each image on the current connection and not deleted, oldest first
        #: (bounded: :meth:`deletes` drops the retired ones, at most ``max_images`` stay)
        self.item_ids: OrderedDict[ImageId, str] = OrderedDict()
        self._image_events: deque[str] = deque(maxlen=MAX_PENDING_EVENTS)
        self._delete_events: deque[str] = deque(maxlen=MAX_PENDING_EVENTS)
        self.images_sent = 0
        self.deletes_sent = 0
        self.deleted_acks = 0  # ``conversation.item.deleted`` from the server

    @property
    def on(self) -> bool:
        """Whether frames go to the server (enabled and not refused)."""
        return self.enabled and not self.refused

    def see(self, frame: VideoUnitFrame, at_s: float, speaking: bool) -> Sighting | None:
        """A unit's frame (``at_s`` on the media clock): a sighting to send now, or None."""
        if not self.on:
            return None
        return self.camera.see(frame, at_s, speaking)

    def end_turn(self, at_s: float, words: str, language: str) -> Sighting | None:
        """The finished turn's frame to send now; None when there is none or the server has
        it already (``reused``)."""
        if not self.on:
            return None
        in_turn = {s.image_id for s in self.camera.turn}
        sighting = self.camera.end_turn(at_s, words, language)
        # a reused frame comes back as the turn's own sighting (its ``reused`` is the
        # original's: False), so it is told by its id
        if sighting is None or sighting.reused or sighting.image_id in in_turn:
            return None
        return sighting

    def item(self, sighting: Sighting) -> ConversationItemCreateEvent:
        """The sighting as a user message with one ``input_image`` (a JPEG data URL)."""
        return ConversationItemCreateEvent.model_validate({
            "type": "conversation.item.create", "event_id": rt.new_id("image"),
            "item": {"id": rt.new_id("img"), "type": "message", "role": "user",
                     "content": [{"type": "input_image", "image_url": sighting.data_url()}]}})

    def sent(self, sighting: Sighting, event: ConversationItemCreateEvent) -> None:
        """``event`` (from :meth:`item`) went to the server."""
        item_id = event.item.id
        if item_id:
            self.item_ids[sighting.image_id] = item_id
        if event.event_id:
            self._image_events.append(event.event_id)
        self.images_sent += 1

    def deletes(self) -> list[ConversationItemDeleteEvent]:
        """``conversation.item.delete`` for each image past the retention bound that is on
        this connection's server (images sent to a server since lost, or never sent, have
        nothing to delete)."""
        events = []
        for image_id in self.camera.retire():
            item_id = self.item_ids.pop(image_id, None)
            if item_id is None or self.deletes_refused:
                continue
            event = ConversationItemDeleteEvent(type="conversation.item.delete",
                                                item_id=item_id, event_id=rt.new_id("forget"))
            self._delete_events.append(event.event_id or "")
            events.append(event)
        self.deletes_sent += len(events)
        return events

    def deleted(self) -> None:
        """The server confirmed a delete."""
        self.deleted_acks += 1

    def new_connection(self) -> None:
        """A new server holds the call: none of the images sent so far are there."""
        self.item_ids.clear()
        self._image_events.clear()
        self._delete_events.clear()
        self.deletes_refused = False

    def on_error(self, error: Any) -> ErrorKind | None:
        """What an ``error`` event means for the images: ``images_refused`` (the first
        refusal of an image: say so), ``deletes_refused`` (the first refused delete),
        ``ours`` (about an image or delete, nothing more to say) or None (not about them)."""
        event_id = getattr(error, "event_id", None)
        if not event_id:
            return None
        if event_id in self._image_events:
            if self.refused:
                return "ours"  # another image that was on its way
            self.refused = True
            self.item_ids.clear()
            return "images_refused"
        if event_id in self._delete_events:
            if self.deletes_refused or getattr(error, "code", None) in GONE_CODES:
                return "ours"
            self.deletes_refused = True
            return "deletes_refused"
        return None
