"""What the offline default can stand behind about a camera picture: facts, each with its
confidence, and the short note they make for the language model.

Pure and synchronous (the models' outputs come in: faces from :mod:`~omnicall.engine.cascade.
vision`, text lines from :mod:`~omnicall.engine.cascade.camera.text_reader`; the
:class:`~omnicall.engine.cascade.camera.looker.Looker` runs those off the event loop). Facts:

- ``light``: the picture is dark (a covered camera): then no colour or person is said;
- ``colour``: the colours of what is held up in the middle of the picture (what covers more
  of the middle than of the surround; confidence grows with that excess) and of the whole
  frame (confidence: the share of its pixels the first name covers), named with
  :mod:`~omnicall.engine.cascade.camera.colours`' palette;
- ``people``: how many faces are turned to the camera, where, how near (or that none is);
- ``text``: the lines read (when the words asked to read or look), with the recogniser's
  confidence;
- ``change``: what changed since the previous look (:mod:`~omnicall.engine.cascade.
  scene_change`).

A fact below ``min_confidence`` is not said (:meth:`Sight.said`).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from omnicall.engine.cascade.camera.colours import (
    OBJECT_MIN_EXCESS,
    ColourShare,
    centre_of,
    held_colours,
    shares,
    spoken,
)
from omnicall.engine.cascade.camera.faces import DARK_BELOW, Face
from omnicall.engine.cascade.camera.text_reader import TextLine
from omnicall.engine.conversation.frame_policy import grey_thumb
from omnicall.media.video_ring import RgbImage

#: a colour name is said when it covers at least this share of its region (the second name
#: of a region too)
SECOND_COLOUR_SHARE = 0.3
#: a held object's colour is certain when it covers this much more of the middle than of
#: the surround (the confidence grows to it from 0)
SURE_EXCESS = 0.3
#: "no one is facing the camera" is said with this confidence (a face turned away is missed)
NO_FACE_CONFIDENCE = 0.7
MAX_NOTE_TEXT_CHARS = 240  # text read that goes into the note (and the page)

KINDS = ("light", "colour", "people", "text", "change")


@dataclass(frozen=True, slots=True)
class Fact:
    """One thing the camera shows: its kind (one of :data:`KINDS`), the words said about
    it, and the confidence (0..1) it is true."""

    kind: str
    text: str
    confidence: float


@dataclass(frozen=True, slots=True)
class Glance:
    """What a look keeps for the next one to compare with."""

    thumb: npt.NDArray[np.float32]  # a grey thumbnail (frame_policy.grey_thumb)
    brightness: float  # mean grey level, 0..255
    held: tuple[ColourShare, ...]  # what stands out in the middle (colours.held_colours)
    people: int


@dataclass(frozen=True, slots=True)
class Sight:
    """One look at a picture: its facts (all, with confidences), the text lines read,
    whether text was asked for and why it was not read ('' when it was, or not asked), and
    whether a previous look was compared with."""

    facts: tuple[Fact, ...]
    glance: Glance
    lines: tuple[TextLine, ...] = ()
    read_asked: bool = False
    unread: str = ""  # 'busy' or 'slow' when text was asked for and not read
    compared: bool = False  # a previous look was there to compare with

    def said(self, min_confidence: float) -> tuple[Fact, ...]:
        """The facts at ``min_confidence`` or more."""
        return tuple(f for f in self.facts if f.confidence >= min_confidence)

    def of(self, kind: str, min_confidence: float) -> tuple[Fact, ...]:
        return tuple(f for f in self.said(min_confidence) if f.kind == kind)


def glance_of(image: RgbImage, faces: tuple[Face, ...]) -> Glance:
    gray = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
    return Glance(grey_thumb(image), float(gray.mean()), held_colours(image), len(faces))


def colour_facts(image: RgbImage) -> tuple[Fact, ...]:
    """The colours of what is held up in the middle (what stands out there from the
    surround; when nothing does, the middle's own colour) and of the whole picture."""
    out = []
    held = held_colours(image)
    if held:
        names = spoken(held, OBJECT_MIN_EXCESS) or held[0].name
        out.append(Fact("colour", f"the thing in the middle is mostly {names}",
                        min(1.0, held[0].share / SURE_EXCESS)))
    else:
        middle = shares(centre_of(image))
        out.append(Fact("colour", f"the middle of the picture is mostly {middle[0].name}, "
                        "like the rest", middle[0].share))
    whole = shares(image)
    names = spoken(whole, SECOND_COLOUR_SHARE) or whole[0].name
    out.append(Fact("colour", f"the whole picture is mostly {names}", whole[0].share))
    return tuple(out)


def people_facts(faces: tuple[Face, ...]) -> tuple[Fact, ...]:
    if not faces:
        return (Fact("people", "no one is facing the camera", NO_FACE_CONFIDENCE),)
    sure = min(f.confidence for f in faces)
    if len(faces) == 1:
        face = faces[0]
        near = {"near": ", close to the camera", "far": ", further back",
                "middle": ""}[face.distance]
        return (Fact("people", f"one person is facing the camera, at the {face.where}{near}",
                     sure),)
    places = ", ".join(f"{f.where} ({'near' if f.distance == 'near' else 'further back'})"
                       if f.distance != "middle" else f.where for f in faces)
    return (Fact("people", f"{len(faces)} people are facing the camera: {places}", sure),)


def text_facts(lines: tuple[TextLine, ...]) -> tuple[Fact, ...]:
    """The lines read as one fact (its confidence: the least sure line's)."""
    if not lines:
        return ()
    words = " / ".join(line.text for line in lines)[:MAX_NOTE_TEXT_CHARS]
    return (Fact("text", f'text reads "{words}"', min(line.confidence for line in lines)),)


def look_at(image: RgbImage, faces: tuple[Face, ...], changes: tuple[Fact, ...] = ()
            ) -> tuple[tuple[Fact, ...], Glance]:
    """The facts that need no text reading, and the glance for the next look."""
    glance = glance_of(image, faces)
    if glance.brightness < DARK_BELOW:
        return (Fact("light", "the picture is dark: the camera may be covered or off", 0.95),
                *changes), glance
    return (*colour_facts(image), *people_facts(faces), *changes), glance


def note(facts: tuple[Fact, ...], unread: str = "") -> str:
    """The short structured note the language model gets with the turn (after "What the
    camera shows now: "; one fact a line), saying what the camera cannot tell."""
    if not facts and not unread:
        return ""
    lines = [f"- {f.kind}: {f.text}" for f in facts]
    if unread:
        lines.append("- text: none could be read in time")
    return ("(a simple offline look: you cannot recognise objects, animals, brands, faces or "
            "kinds of things, so say you cannot tell)\n" + "\n".join(lines))
