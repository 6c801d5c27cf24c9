"""One call's camera frames on their way into the Thinker.

The shared frame policy decides (:class:`~omnicall.engine.conversation.camera.Camera`: the
same rate, duplicate check, sizes and retention as every engine); this decides *when* a
picked frame can go into the Thinker's prompt, which is one growing sequence:

- while the user speaks (their turn open in the Thinker, no speculative reply after it), a
  :class:`Sighting` goes in when the policy sends it, as a video segment between runs of
  speech (:func:`~omnicall.engine.qwen_omni.prompt.append_frame`): the policy sends a pick
  at the next one, so a frame lands up to one interval (1 s) after the speech it was taken
  with;
- a frame picked while the user is quiet (the policy's slow rate) cannot go in the middle of
  the assistant's message: the latest one is *held* and opens the next user turn;
- a frame picked while a speculative reply runs after the turn (the hangover's silence) waits:
  speech resuming puts it in (after the rollback), the end of turn holds it for the next turn;
- the turn's end frame (:meth:`ThinkerFrames.end_frame`) goes in when its reply is started:
  at the pause that starts a speculative reply, or at the end of turn. A speculation that
  speech overtakes leaves that frame in place (it was seen while the user spoke) and the
  camera's turn is reopened. Without news since the last end frame (no sighting went in) a
  later pause of the same turn takes no end frame: the policy would re-send a still scene
  whose last frame is over :data:`~omnicall.engine.conversation.camera.FRESH_WITHIN_S` old at
  every pause.

The native engine has no words at the end of the turn (its captions come later, off the model
path), so the end frame is never the sharp size. Nothing here logs an image.
"""

from __future__ import annotations

from fractions import Fraction

from omnicall.engine.conversation.camera import Camera, Sighting
from omnicall.engine.conversation.settings import FramePolicySettings
from omnicall.media.timebase import FRAME_S
from omnicall.media.video_ring import VideoUnitFrame


class ThinkerFrames:
    """The camera of one call on the native engine (see the module docstring)."""

    def __init__(self, settings: FramePolicySettings) -> None:
        self.camera = Camera(settings)
        self.held: Sighting | None = None  # picked while quiet: opens the next user turn
        self.waiting: list[Sighting] = []  # picked during a speculative reply
        self.news = False  # a frame went in since the turn opened or its last end frame
        self.closed = False  # the camera's turn was closed for a reply that may be void
        self.media_s = 0.0  # the latest unit's time on the 80 ms media clock

    @property
    def max_images(self) -> int:
        return self.camera.settings.max_images

    def clock(self, index: int) -> None:
        """The media unit ``index`` arrived (time goes by the media clock, not the wall)."""
        self.media_s = float(index * Fraction(FRAME_S))

    def see(self, frame: VideoUnitFrame, speaking: bool, waiting: bool) -> Sighting | None:
        """A sampled frame: the sighting to append now (the user speaking, nothing
        speculative after their turn), or None (not picked, held or waiting)."""
        sighting = self.camera.see(frame, self.media_s, speaking)
        if sighting is None:
            return None
        if not speaking:
            self.held = sighting
            return None
        if waiting:
            self.waiting.append(sighting)
            return None
        self.news = True
        return sighting

    def open_turn(self) -> Sighting | None:
        """A user turn opens: the frame held from the quiet, to append first."""
        held, self.held = self.held, None
        self.news, self.closed = True, False
        return held

    def resumed(self) -> list[Sighting]:
        """Speech came back over a speculative reply: the camera's turn goes on, and what
        waited goes in now."""
        if self.closed:
            self.camera.reopen()
            self.closed = False
        waiting, self.waiting = self.waiting, []
        self.news = self.news or bool(waiting)
        return waiting

    def end_frame(self) -> Sighting | None:
        """The turn's end frame, to append before its reply; None when nothing new is to
        go in (no frame yet, the model has a recent near-duplicate, or no news)."""
        if not self.news and not self.camera.policy.holding:
            return None  # nothing went in, and the policy holds no pick of this stretch
        self.news, self.closed = False, True
        sent = {s.image_id for s in self.camera.turn}
        sighting = self.camera.end_turn(self.media_s, "")
        self.camera.retire()  # the policy's ids stay bounded; the Thinker bounds its own
        if sighting is None or sighting.reused or sighting.image_id in sent:
            return None  # a reused frame comes back as the turn's sighting the model has
        return sighting

    def turn_ended(self) -> None:
        """The turn is over with its reply committed: a frame that waited is the next
        turn's, held."""
        self.closed = False
        if self.waiting:
            self.held, self.waiting = self.waiting[-1], []
