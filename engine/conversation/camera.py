"""One call's camera as its model sees it: the :mod:`frame policy
<omnicall.engine.conversation.frame_policy>` applied to the frames the media plane samples, the
freshest frame, and what went to the model in the current user turn.

Every engine uses it the same way (pure and synchronous, the time ``at_s`` passed in):

- :meth:`Camera.see` with each unit's video and whether the user is speaking; a returned
  :class:`Sighting` goes to the model now (a Realtime ``input_image`` item, a video segment
  appended to the Thinker, an early prefill of the chat prompt) or is kept for the turn;
- :meth:`Camera.end_turn` when the user's turn ends, with its words: the turn's last frame,
  always from its last :data:`FRESH_WITHIN_S` (a near-duplicate already sent that recently is
  ``reused`` and sends nothing new);
- :meth:`Camera.turn` is what was sent since the previous end of turn (the cascade puts these
  into the user's message), :meth:`Camera.retire` the image ids the context should drop.

No image is logged here or anywhere: only ids, sizes and counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from omnicall.engine.conversation.frame_policy import (
    FramePolicy,
    FramePolicySettings,
    ImageId,
    Selection,
    data_url,
    encode_jpeg,
)
from omnicall.engine.events import CameraSeen
from omnicall.media.video_ring import RgbImage, VideoUnitFrame

#: the frame a finished turn carries is at most this old (a frame from the turn's last second)
FRESH_WITHIN_S = 1.0
THUMB_LONG_SIDE_PX = 96  # the page's thumbnail of what the model was shown (~2-3 KB)
THUMB_QUALITY = 60
#: sightings one turn keeps (each holds its frame, ~0.5-1 MB): a call whose turns never end
#: keeps the latest ones only (32 s while speaking, 5 min while quiet)
MAX_TURN_SIGHTINGS = 32


@dataclass(frozen=True, slots=True)
class Sighting:
    """A frame that goes to the model, encoded once."""

    selection: Selection
    jpeg: bytes  # at the selection's size and the settings' quality

    @property
    def image_id(self) -> ImageId:
        return self.selection.image_id

    @property
    def reused(self) -> bool:
        return self.selection.reused

    def data_url(self) -> str:
        return data_url(self.jpeg)


@dataclass
class Camera:
    """The camera of one call (see the module docstring)."""

    settings: FramePolicySettings = field(default_factory=FramePolicySettings)

    def __post_init__(self) -> None:
        self.policy = FramePolicy(self.settings)
        self.latest: VideoUnitFrame | None = None
        self._turn: list[Sighting] = []  # sent since the previous end of turn
        self._closed: tuple[Sighting, ...] = ()  # what the last finished turn sent

    @property
    def turn(self) -> tuple[Sighting, ...]:
        """What went to the model since the previous end of turn, oldest first."""
        return tuple(self._turn)

    def see(self, frame: VideoUnitFrame, at_s: float, speaking: bool) -> Sighting | None:
        """A newly sampled frame: a sighting to send now (while speaking, the pick held
        before this one), or None (rate, duplicate, or the pick is held)."""
        self.latest = frame
        selection = self.policy.offer(frame, at_s, speaking)
        if selection is None:
            return None
        sighting = Sighting(selection, self.policy.encode(selection))
        self._turn.append(sighting)
        del self._turn[:-MAX_TURN_SIGHTINGS]  # a turn that never ends (an idle kiosk)
        return sighting

    def end_turn(self, at_s: float, words: str, language: str = "en") -> Sighting | None:
        """The finished turn's frame (None when no frame came yet); when it is ``reused``
        the model already has it (its ``image_id``, sent earlier in the turn) and nothing new
        need be sent."""
        turn, self._turn = self._turn, []
        if self.latest is None:
            return None
        selection = self.policy.end_of_turn(self.latest, at_s, words, language)
        if selection.reused and at_s - selection.sent_at_s > FRESH_WITHIN_S:
            selection = self.policy.send_anyway(selection)
        if selection.reused:
            earlier = next((s for s in turn if s.image_id == selection.image_id), None)
            if earlier is not None:
                self._closed = (*turn,)
                return Sighting(replace(earlier.selection, reused=True), earlier.jpeg)
            selection = self.policy.send_anyway(selection)  # fell out of the bounded turn
        sighting = Sighting(selection, self.policy.encode(selection))
        self._closed = (*turn, sighting)
        return sighting

    def reopen(self) -> None:
        """The turn ended too soon (the user went on speaking): what the last
        :meth:`end_turn` closed belongs to the turn again, before anything sent since."""
        self._turn, self._closed = [*self._closed, *self._turn], ()

    @property
    def closed_turn(self) -> tuple[Sighting, ...]:
        """What the last finished turn sent (its frames, then its end-of-turn frame)."""
        return self._closed

    def retire(self) -> list[ImageId]:
        """Image ids past the retention bound, oldest first (drop them from the context)."""
        return self.policy.retire()


def thumbnail_jpeg(sighting: Sighting) -> bytes:
    """A small JPEG of what the model was shown, for the caller's page (never stored)."""
    return thumbnail_of(sighting.selection.image)


def seen_event(turn_id: int, sighting: Sighting, facts: tuple[str, ...] = ()) -> CameraSeen:
    """What the page is told of a frame the model was shown (turn ``turn_id``): its
    thumbnail, whichever engine showed it, and (a model that does not see) the ``facts``
    about it the model was given instead."""
    return CameraSeen(turn_id, sighting.image_id, thumbnail_jpeg(sighting),
                      sighting.selection.sharp, facts)


def thumbnail_of(image: RgbImage) -> bytes:
    """A small JPEG of ``image`` for the caller's page (never stored)."""
    return encode_jpeg(image, THUMB_LONG_SIDE_PX, THUMB_QUALITY)
