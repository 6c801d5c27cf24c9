"""What changed between two looks at the camera: the picture went dark (or lit again),
something new is in the middle, the whole view changed, people came or went.

Pure and synchronous: two :class:`~omnicall.engine.cascade.camera.sight.Glance` objects in (their
grey thumbnails, brightness, centre colours and face counts), ``change`` facts out, each with
its confidence. The middle is compared with the rest of the picture, so a camera that moved
a little (the whole picture shifts) is not "something new in the middle".
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from omnicall.engine.cascade.camera.colours import spoken
from omnicall.engine.cascade.camera.faces import DARK_BELOW
from omnicall.engine.cascade.camera.sight import Fact, Glance, Sight

#: mean absolute difference (0..255) of the thumbnails' middles for something new there;
#: at NEW_SURE_MAD the fact is certain
NEW_MAD = 18.0
NEW_SURE_MAD = 45.0
#: the middle must change this many times more than the rest (else the view moved)
MIDDLE_OVER_REST = 2.0
#: the rest of the picture changed this much: the whole view is different
VIEW_MAD = 30.0
COLOUR_SHARE = 0.12  # a held colour named in a change stands out by this share at least


Thumb = npt.NDArray[np.float32]


def _regions(thumb: Thumb) -> tuple[Thumb, Thumb]:
    side = thumb.shape[0]
    q = side // 4
    middle = np.zeros(thumb.shape, bool)
    middle[q:side - q, q:side - q] = True
    return thumb[middle], thumb[~middle]


def mads(before: Thumb, now: Thumb) -> tuple[float, float]:
    """The mean absolute differences (0..255) of two grey thumbnails' middles and rests."""
    middle_now, rest_now = _regions(now)
    middle_before, rest_before = _regions(before)
    return (float(np.mean(np.abs(middle_now - middle_before))),
            float(np.mean(np.abs(rest_now - rest_before))))


def same_scene(before: Thumb, now: Thumb) -> bool:
    """Whether two grey thumbnails show one scene: nothing :func:`changes` would name (the
    light, something new in the middle, the whole view) stands between them; a camera held in
    a hand moves, and the scene stays."""
    if (before.mean() < DARK_BELOW) != (now.mean() < DARK_BELOW):
        return False
    middle_mad, rest_mad = mads(before, now)
    return rest_mad < VIEW_MAD and not (middle_mad >= NEW_MAD
                                        and middle_mad >= MIDDLE_OVER_REST * rest_mad)


def changes(before: Glance | None, now: Glance) -> tuple[Fact, ...]:
    """What changed from ``before`` (None: the first look: nothing) to ``now``."""
    if before is None:
        return ()
    was_dark, is_dark = before.brightness < DARK_BELOW, now.brightness < DARK_BELOW
    if is_dark and not was_dark:
        return (Fact("change", "the picture went dark since the last look", 0.95),)
    if was_dark and not is_dark:
        return (Fact("change", "the picture is lit again since the last look", 0.95),)
    if is_dark:
        return ()
    middle_mad, rest_mad = mads(before.thumb, now.thumb)
    out: list[Fact] = []
    if rest_mad >= VIEW_MAD:
        out.append(Fact("change", "the whole view changed since the last look",
                        min(1.0, rest_mad / (2 * VIEW_MAD))))
    elif middle_mad >= NEW_MAD and middle_mad >= MIDDLE_OVER_REST * rest_mad:
        colour = spoken(now.held, COLOUR_SHARE)
        thing = f"something {colour}" if colour else "something"
        out.append(Fact("change", f"{thing} is new in the middle since the last look",
                        min(1.0, 0.5 + 0.5 * (middle_mad - NEW_MAD) / (NEW_SURE_MAD - NEW_MAD))))
    if now.people != before.people:
        more = now.people - before.people
        text = (f"{more} more {'person is' if more == 1 else 'people are'} facing the camera"
                if more > 0 else
                f"{-more} fewer {'person is' if more == -1 else 'people are'} facing the camera")
        out.append(Fact("change", text + " since the last look", 0.6))
    return tuple(out)


def compared(sight: Sight, previous: Glance | None) -> Sight:
    """``sight`` (a look without comparison) with what changed since ``previous`` (the look
    a call's last turn used; None: nothing to compare with)."""
    return replace(sight, facts=(*sight.facts, *changes(previous, sight.glance)),
                   compared=previous is not None)
