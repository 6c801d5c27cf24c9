"""What the cascade's language model is shown of the camera (``--llm-vision``).

One call's :class:`~omnicall.engine.conversation.camera.Camera` (the shared frame policy)
fed by the media units; the frames it picks while the user speaks are sent early to a server
that caches prompts (the session's early prefill, one request in flight at most), and at the end
of the turn :meth:`Eyes.end_turn` gives the turn's pictures for the user's message, the last
one from the turn's final second. Pictures past the retention bound become a note in the
memory (:meth:`Eyes.retire`). Without ``--llm-vision`` (or once the server refused images)
:attr:`Eyes.active` is False: then :meth:`Eyes.pick` gives the frame the policy picks for the
finished turn (sharp when the words ask to look) for the offline look
(:mod:`~omnicall.engine.cascade.camera.looker`), whose facts go to the model in words, and
:attr:`Eyes.glance` keeps the last look for the next to say what changed.
"""

from __future__ import annotations

import logging
from fractions import Fraction

from omnicall.engine.cascade.camera.pictures import Picture, picture_of
from omnicall.engine.cascade.camera.sight import Glance
from omnicall.engine.cascade.language_model import LanguageModel
from omnicall.engine.conversation.camera import Camera, Sighting, thumbnail_of
from omnicall.engine.conversation.frame_policy import ImageId
from omnicall.engine.conversation.settings import FramePolicySettings
from omnicall.engine.events import CameraSeen
from omnicall.media.aligner import MediaUnit
from omnicall.media.timebase import FRAME_S
from omnicall.media.video_ring import RgbImage

logger = logging.getLogger(__name__)

#: ``CameraSeen.image_id`` of a frame the face detector described in words (not an image)
DESCRIBED = 0


class Eyes:
    """The camera as one call's language model sees it (see the module docstring)."""

    def __init__(self, settings: FramePolicySettings, llm: LanguageModel,
                 media_wanted: bool = False) -> None:
        self.camera = Camera(settings)
        self.llm = llm
        self.media_s = 0.0  # the latest unit's time on the 80 ms media clock
        #: the call was to send the model images or audio (--llm-vision, --llm-audio-in)
        self.media_wanted = media_wanted
        self.refusal_told = False
        self.glance: Glance | None = None  # the last offline look (what changed since)

    @property
    def active(self) -> bool:
        """Frames go to the model (``--llm-vision``, and the server has not refused them)."""
        return self.llm.sees

    def see(self, unit: MediaUnit, speaking: bool) -> Sighting | None:
        """Each media unit: the frame to send now, if the policy picks this one."""
        self.media_s = float(unit.index * Fraction(FRAME_S))
        if unit.video is None or not self.active:
            if unit.video is not None:
                self.camera.latest = unit.video
            return None
        return self.camera.see(unit.video, self.media_s, speaking)

    def so_far(self) -> tuple[Picture, ...]:
        """The pictures of the turn still being spoken (for an early prefill)."""
        return tuple(picture_of(s) for s in self.camera.turn)

    def end_turn(self, words: str, language: str) -> tuple[tuple[Picture, ...], Sighting | None]:
        """The finished turn's pictures (oldest first, the freshest last) and its last
        frame; nothing when frames do not go to the model."""
        if not self.active:
            return (), None
        last = self.camera.end_turn(self.media_s, words, language)
        return tuple(picture_of(s) for s in self.camera.closed_turn), last

    def pick(self, words: str, language: str) -> Sighting | None:
        """Frames not going to the model: the frame the policy picks for the finished turn
        (the freshest, sharp when ``words`` ask to look), for the offline look; None before
        any frame came (no camera)."""
        if self.active:
            return None
        return self.camera.end_turn(self.media_s, words, language)

    def reopen(self) -> None:
        """The turn was not over after all (the user went on): its pictures stay its own."""
        self.camera.reopen()

    def retire(self) -> list[ImageId]:
        return self.camera.retire()

    def refused(self, reason: str) -> None:
        """The server refused images (or audio): a fact about the server the engine's calls
        share, so none of them sends any again (each call's page is told by
        :meth:`tell_refusal`, whichever call found it)."""
        self.llm.sees = self.llm.hears = False
        logger.warning("the language model refused camera images or audio (%s); its calls "
                       "go on with the camera and the speech in words", reason)

    def tell_refusal(self) -> bool:
        """True once for this call, when it was to send images or audio and the server has
        refused them (this call found it, or an earlier one): its page is told."""
        if self.refusal_told or not self.media_wanted or self.llm.sees or self.llm.hears:
            return False
        self.refusal_told = True
        return True


def described_event(turn_id: int, image: RgbImage) -> CameraSeen:
    """The page's thumbnail of the frame the face detector described for this turn."""
    return CameraSeen(turn_id, DESCRIBED, thumbnail_of(image))
