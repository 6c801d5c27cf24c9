"""Colour names for a camera picture: each pixel named with a small fixed palette, and the
names that cover most of a region (the centre, where a held object is; the whole frame).

Pure and synchronous (NumPy and OpenCV only, no model). A pixel's name comes from its HSV
value (OpenCV's ranges: hue 0..179, saturation and value 0..255):

- dark (value < :data:`BLACK_BELOW_V`): black;
- grey-ish (saturation < :data:`GREY_BELOW_S`): white when bright, grey otherwise;
- else by hue band (:data:`HUE_BANDS`), with two corrections a person would make: a dark
  orange, red or yellow is brown, and a pale, light red or purple is pink.

Values are first adapted to the picture's light (:func:`exposed`): in a dim room the
brightest part of the picture is taken as bright, as eyes and cameras adapt.

A region's :class:`ColourShare` list gives each name's share of its pixels, largest first;
the share of the first is the confidence that the region "is mostly" that colour. The
picture is shrunk first (:data:`WORK_LONG_SIDE_PX`), so a region costs well under a
millisecond whatever the camera's size.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from omnicall.media.video_ring import RgbImage

#: the palette, in the order names are reported when shares tie
PALETTE: tuple[str, ...] = ("red", "orange", "yellow", "green", "blue", "purple", "pink",
                            "brown", "black", "white", "grey")
BLACK_BELOW_V = 50
GREY_BELOW_S = 45
WHITE_ABOVE_V = 190
#: a red, orange or yellow darker than this value is brown
BROWN_BELOW_V = 150
#: a red or purple paler than this saturation (and bright) is pink
PINK_BELOW_S = 120
PINK_ABOVE_V = 170
#: hue bands (OpenCV hue, 0..179: degrees / 2), upper bounds exclusive; red wraps round
HUE_BANDS: tuple[tuple[int, str], ...] = (
    (8, "red"), (19, "orange"), (34, "yellow"), (84, "green"), (131, "blue"),
    (148, "purple"), (168, "pink"), (180, "red"),
)
WORK_LONG_SIDE_PX = 96
#: the adaptation to a dim picture (see :func:`exposed`)
BRIGHT_PERCENTILE = 95
BRIGHT_V = 200
DIM_BELOW_V = 120  # a picture whose bright end is darker than this is dim
MAX_GAIN = 2.5
#: the centre region: the middle half of the width and of the height (where a held object is)
CENTRE_FRACTION = 0.5
#: a colour covering this much more of the centre than of the surround is a held object's
OBJECT_MIN_EXCESS = 0.12

_INDEX = {name: i for i, name in enumerate(PALETTE)}


@dataclass(frozen=True, slots=True)
class ColourShare:
    """A palette name and the share (0..1) of a region's pixels it names."""

    name: str
    share: float


def _shrink(image: RgbImage) -> RgbImage:
    height, width = image.shape[:2]
    scale = min(1.0, WORK_LONG_SIDE_PX / max(height, width))
    if scale >= 1.0:
        return image
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return np.asarray(cv2.resize(np.ascontiguousarray(image), size,
                                 interpolation=cv2.INTER_AREA), np.uint8)


def name_pixels(image: RgbImage) -> npt.NDArray[np.int8]:
    """Each pixel's palette index (into :data:`PALETTE`), H x W."""
    hsv = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2HSV).astype(np.int16)
    hue, sat, val = hsv[..., 0], hsv[..., 1], exposed(hsv[..., 2])
    names = np.full(hue.shape, _INDEX["grey"], np.int8)
    lower = 0
    by_hue = np.zeros(hue.shape, np.int8)
    for upper, name in HUE_BANDS:
        by_hue[(hue >= lower) & (hue < upper)] = _INDEX[name]
        lower = upper
    warm = np.isin(by_hue, (_INDEX["red"], _INDEX["orange"], _INDEX["yellow"]))
    by_hue[warm & (val < BROWN_BELOW_V)] = _INDEX["brown"]
    pale = np.isin(by_hue, (_INDEX["red"], _INDEX["purple"])) & (sat < PINK_BELOW_S) & (
        val > PINK_ABOVE_V)
    by_hue[pale] = _INDEX["pink"]
    coloured = sat >= GREY_BELOW_S
    names[coloured] = by_hue[coloured]
    names[~coloured & (val > WHITE_ABOVE_V)] = _INDEX["white"]
    names[val < BLACK_BELOW_V] = _INDEX["black"]
    return names


def exposed(val: npt.NDArray[np.int16]) -> npt.NDArray[np.int16]:
    """Values as a person's eyes (or a camera's auto-exposure) adapt to a dim picture (its
    bright end, :data:`BRIGHT_PERCENTILE`, below :data:`DIM_BELOW_V`): scaled so that end is
    :data:`BRIGHT_V`, by at most :data:`MAX_GAIN` (a dim red mug is still red, not brown; a
    dark picture stays dark; a mid-grey picture stays grey)."""
    bright = float(np.percentile(val, BRIGHT_PERCENTILE)) if val.size else 0.0
    if bright >= DIM_BELOW_V:
        return val
    gain = min(MAX_GAIN, BRIGHT_V / max(bright, 1.0))
    return np.minimum(255, val.astype(np.float32) * gain).astype(np.int16)


def shares(image: RgbImage) -> tuple[ColourShare, ...]:
    """The palette names of ``image``'s pixels with their shares, largest first (names
    with no pixel left out)."""
    names = name_pixels(_shrink(image))
    counts = np.bincount(names.ravel().astype(np.int64), minlength=len(PALETTE))
    total = max(1, int(counts.sum()))
    order = sorted(range(len(PALETTE)), key=lambda i: (-counts[i], i))
    return tuple(ColourShare(PALETTE[i], float(counts[i]) / total) for i in order if counts[i])


def centre_of(image: RgbImage, fraction: float = CENTRE_FRACTION) -> RgbImage:
    """The middle ``fraction`` of the width and of the height."""
    height, width = image.shape[:2]
    h0, w0 = round(height * (1 - fraction) / 2), round(width * (1 - fraction) / 2)
    return image[h0:max(h0 + 1, height - h0), w0:max(w0 + 1, width - w0)]


def _ring_shares(image: RgbImage, fraction: float) -> tuple[ColourShare, ...]:
    """Shares of the picture outside its centre (the surround a held object is seen on)."""
    small = _shrink(image)
    height, width = small.shape[:2]
    h0, w0 = round(height * (1 - fraction) / 2), round(width * (1 - fraction) / 2)
    names = name_pixels(small).astype(np.int64)
    keep = np.ones(names.shape, bool)
    keep[h0:height - h0, w0:width - w0] = False
    counts = np.bincount(names[keep], minlength=len(PALETTE)) if keep.any() else \
        np.bincount(names.ravel(), minlength=len(PALETTE))
    total = max(1, int(counts.sum()))
    return tuple(ColourShare(PALETTE[i], float(counts[i]) / total) for i in range(len(PALETTE)))


def held_colours(image: RgbImage, fraction: float = CENTRE_FRACTION
                 ) -> tuple[ColourShare, ...]:
    """The colours of what is held up in the middle: the centre's names that cover more of
    it than of the surround, with that excess share (largest first; names at or below
    :data:`OBJECT_MIN_EXCESS` left out). Empty: the middle looks like the rest."""
    centre = {c.name: c.share for c in shares(centre_of(image, fraction))}
    rest = {c.name: c.share for c in _ring_shares(image, fraction)}
    excess = [(name, share - rest.get(name, 0.0)) for name, share in centre.items()]
    return tuple(ColourShare(name, round(extra, 4)) for name, extra in sorted(
        excess, key=lambda e: (-e[1], _INDEX[e[0]])) if extra > OBJECT_MIN_EXCESS)


def spoken(colours: tuple[ColourShare, ...], min_share: float) -> str:
    """'red', 'red and white': the names at ``min_share`` or more (at most two), '' if none."""
    names = [c.name for c in colours[:2] if c.share >= min_share]
    return " and ".join(names)
