"""Camera pictures with known answers, for the offline eyes' tests and bench: a wall, a held
object of a known colour, a printed label of known words, people (the astronaut photograph,
NASA, public domain) near or far. Drawn with OpenCV at the server's ingest size (448 x 336),
with a camera's faults: shading, a slight tilt, sensor noise."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

Rgb = npt.NDArray[np.uint8]
SIZE = (448, 336)  # the server's --video-width x --video-height
PHOTO = Path(__file__).parent / "data" / "astronaut.jpg"

#: colours a visitor might hold up, by the name a person gives them (RGB)
OBJECT_COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 30, 35), "orange": (235, 120, 25), "yellow": (235, 210, 40),
    "green": (40, 150, 60), "blue": (30, 80, 190), "purple": (110, 45, 150),
    "pink": (240, 140, 185), "brown": (115, 70, 35), "black": (25, 25, 28),
    "white": (240, 240, 236),
}
WALLS: dict[str, tuple[int, int, int]] = {
    "grey": (150, 150, 148), "white": (225, 225, 220), "blue": (70, 100, 170),
}


def wall(colour: tuple[int, int, int], seed: int = 0) -> Rgb:
    """A lit wall: a soft light gradient and a camera's sensor noise."""
    width, height = SIZE
    rng = np.random.default_rng(seed)
    xx = np.linspace(-1, 1, width)[None, :]
    yy = np.linspace(-1, 1, height)[:, None]
    light = 1.0 - 0.12 * (xx ** 2 + yy ** 2) + 0.05 * xx
    image = np.asarray(colour, np.float32)[None, None, :] * light[..., None]
    return _finish(image, rng)


def _finish(image: npt.NDArray[np.float32], rng: np.random.Generator) -> Rgb:
    noisy = image + rng.normal(0, 4, image.shape)
    return np.clip(noisy, 0, 255).astype(np.uint8)


def hold_object(scene: Rgb, colour: tuple[int, int, int], seed: int = 0) -> Rgb:
    """A round object (a mug, a ball) of ``colour`` held in the middle: shaded, its edge
    darker, a highlight, and a hand's tilt."""
    rng = np.random.default_rng(seed)
    width, height = SIZE
    out = scene.astype(np.float32)
    cx, cy = width // 2 + int(rng.integers(-15, 16)), height // 2 + int(rng.integers(-10, 11))
    axes = (int(rng.integers(70, 95)), int(rng.integers(60, 85)))
    mask = np.zeros((height, width), np.uint8)
    cv2.ellipse(mask, (cx, cy), axes, float(rng.uniform(-20, 20)), 0, 360, 255, -1)
    yy, xx = np.mgrid[:height, :width]
    d = np.sqrt(((xx - cx) / axes[0]) ** 2 + ((yy - cy) / axes[1]) ** 2)
    shade = 1.05 - 0.25 * np.clip(d, 0, 1) ** 2
    body = np.asarray(colour, np.float32)[None, None, :] * shade[..., None]
    inside = mask > 0
    out[inside] = body[inside]
    return _finish(out, rng)


def hold_label(scene: Rgb, lines: tuple[str, ...], seed: int = 0,
               card: tuple[int, int, int] = (245, 244, 238),
               ink: tuple[int, int, int] = (20, 20, 25), scale: float = 0.8) -> Rgb:
    """A printed card with ``lines`` held up in the middle, tilted a little (``scale``: the
    font's; 0.8 is letters ~17 px tall, a card held at arm's length)."""
    rng = np.random.default_rng(seed)
    width, height = SIZE
    font, thick = cv2.FONT_HERSHEY_DUPLEX, 2 if scale >= 0.6 else 1
    sizes = [cv2.getTextSize(line, font, scale, thick)[0] for line in lines]
    card_w = max(w for w, _ in sizes) + 40
    line_h = max(h for _, h in sizes) + 18
    card_h = line_h * len(lines) + 24
    card_img = np.zeros((card_h, card_w, 3), np.uint8)
    card_img[:] = card
    for i, line in enumerate(lines):
        cv2.putText(card_img, line, (20, 12 + line_h * (i + 1) - 6), font, scale, ink, thick,
                    cv2.LINE_AA)
    angle = float(rng.uniform(-4, 4))
    matrix = cv2.getRotationMatrix2D((card_w / 2, card_h / 2), angle, 1.0)
    matrix[:, 2] += (width / 2 - card_w / 2 + rng.integers(-10, 11),
                     height / 2 - card_h / 2 + rng.integers(-8, 9))
    warped = cv2.warpAffine(card_img, matrix, SIZE, flags=cv2.INTER_LINEAR)
    mask = cv2.warpAffine(np.full((card_h, card_w), 255, np.uint8), matrix, SIZE) > 127
    out = scene.astype(np.float32)
    out[mask] = warped[mask]
    return _finish(out, rng)


def lit(image: Rgb, gain: tuple[float, float, float], seed: int = 0) -> Rgb:
    """The picture under other light: each channel scaled (dim, or a warm lamp), new noise."""
    out = image.astype(np.float32) * np.asarray(gain, np.float32)[None, None, :]
    return _finish(out, np.random.default_rng(seed))


def blurred(image: Rgb, sigma_px: float) -> Rgb:
    """Out of focus, or moved while the frame was taken."""
    return np.asarray(cv2.GaussianBlur(image, (0, 0), sigma_px), np.uint8)


def _photo() -> Rgb:
    return np.asarray(cv2.cvtColor(cv2.imread(str(PHOTO)), cv2.COLOR_BGR2RGB), np.uint8)


def add_person(scene: Rgb, x: int, width: int) -> Rgb:
    """A person (head and shoulders of the astronaut photograph) ``width`` px wide whose
    left edge is at ``x``, standing on the picture's bottom edge (so a small one is far)."""
    photo = _photo()
    bust = photo[0:380, 80:380]  # the head and shoulders, 300 x 380
    height = round(width * bust.shape[0] / bust.shape[1])
    person = cv2.resize(bust, (width, height), interpolation=cv2.INTER_AREA)
    out = scene.copy()
    top = max(0, SIZE[1] - height)
    region = out[top:top + height, x:x + width]
    out[top:top + height, x:x + width] = person[:region.shape[0], :region.shape[1]]
    return out


@dataclass(frozen=True)
class Scene:
    """A picture and what is truly in it."""

    name: str
    image: Rgb
    colour: str = ""  # the held object's colour ('' = none held)
    text: tuple[str, ...] = ()  # the label's lines
    people: int = 0


LABELS: tuple[tuple[str, ...], ...] = (
    ("ORGANIC MILK", "Best before 12/05"),
    ("EXIT",),
    ("Room 214",),
    ("PARACETAMOL 500 mg",),
    ("Gate B12",),
    ("Hello World",),
    ("Coffee 2.50",),
    ("NO PARKING",),
)


def scenes() -> list[Scene]:
    """Thirty-two scenes: held objects in each colour on three walls, labels, people, and
    six harder ones (dim light, a warm lamp, small print, a blurred label)."""
    out: list[Scene] = []
    walls = list(WALLS.items())
    for i, (name, colour) in enumerate(OBJECT_COLOURS.items()):
        wall_name, wall_colour = walls[i % len(walls)]
        if wall_name == name:
            wall_name, wall_colour = walls[(i + 1) % len(walls)]
        out.append(Scene(f"{name} object on a {wall_name} wall",
                         hold_object(wall(wall_colour, i), colour, i), colour=name))
    for i, lines in enumerate(LABELS):
        wall_name, wall_colour = walls[i % len(walls)]
        out.append(Scene(f"label {' / '.join(lines)!r} on a {wall_name} wall",
                         hold_label(wall(wall_colour, 20 + i), lines, 20 + i), text=lines))
    people = ((1, ((150, 150),)), (1, ((20, 260),)), (2, ((10, 190), (260, 180))),
              (2, ((30, 230), (330, 100))), (1, ((300, 110),)), (0, ()),
              (3, ((0, 150), (150, 150), (300, 148))), (2, ((60, 120), (250, 190))))
    for i, (count, placed) in enumerate(people):
        scene = wall(walls[i % len(walls)][1], 40 + i)
        for x, width in placed:
            scene = add_person(scene, x, width)
        out.append(Scene(f"{count} people {placed}", scene, people=count))
    dim, warm = (0.5, 0.5, 0.5), (1.1, 0.95, 0.75)
    red = hold_object(wall(WALLS["white"], 60), OBJECT_COLOURS["red"], 60)
    blue = hold_object(wall(WALLS["grey"], 61), OBJECT_COLOURS["blue"], 61)
    out += [
        Scene("red object on a white wall, dim light", lit(red, dim, 62), colour="red"),
        Scene("blue object on a grey wall, warm lamp", lit(blue, warm, 63), colour="blue"),
        Scene("small print 'Platform 9'", hold_label(wall(WALLS["grey"], 64),
                                                     ("Platform 9",), 64, scale=0.55),
              text=("Platform 9",)),
        Scene("blurred label 'OPEN'", blurred(hold_label(wall(WALLS["white"], 65),
                                                         ("OPEN",), 65), 1.5), text=("OPEN",)),
        Scene("label 'Tea 1.20' in dim light", lit(hold_label(wall(WALLS["blue"], 66),
                                                              ("Tea 1.20",), 66), dim, 66),
              text=("Tea 1.20",)),
        Scene("1 person in dim light", lit(add_person(wall(WALLS["grey"], 67), 120, 200),
                                           dim, 67), people=1),
    ]
    return out


def y4m_of(image: Rgb, path: Path, seconds: float = 8, fps: int = 15,
           size: tuple[int, int] = (640, 480)) -> Path:
    """A still picture as a Y4M file for Chromium's fake camera (ffmpeg), at ``size``."""
    import subprocess

    frame = cv2.resize(image, size, interpolation=cv2.INTER_CUBIC)
    subprocess.run(["ffmpeg", "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt",
                    "rgb24", "-s", f"{size[0]}x{size[1]}", "-r", str(fps), "-i", "-",
                    "-t", str(seconds), "-pix_fmt", "yuv420p", str(path)],
                   input=np.ascontiguousarray(frame).tobytes() * int(seconds * fps),
                   check=True, capture_output=True)
    return path
