"""The frame policy: which camera frames go to the model, the same for every engine.

Pure and synchronous: no I/O, no clock of its own (each call passes ``at_s``, monotonic
seconds, e.g. ``unit.index * 0.08`` on the 80 ms media clock or ``Clock.now()``).

- :meth:`FramePolicy.offer`: each sampled frame (a :class:`VideoUnitFrame` or an H x W x 3
  uint8 RGB array) is picked at most ``speaking_fps`` while the caller speaks and
  ``quiet_fps`` otherwise; a frame that is a near-duplicate of the last *picked* one (mean
  absolute difference of a 32 x 32 grayscale thumbnail, 0..255) is skipped (``dup_skipped``).
  While the caller speaks, what is said refers to what is shown *then*, and the turn's end
  frame (below) will show the scene as it is when they stop; so a pick is worth sending only
  when the turn goes on after it:
  - the first pick of a turn comes one interval (``1 / speaking_fps``) after speech starts,
    not at its first frame (the scene at the start is the one the previous turn's end frame
    or a quiet frame showed; what is raised while speaking comes later);
  - a speaking pick is *held* until the next frame due by rate, then sent (``offer`` returns
    the held one, and holds the new one unless it is a near-duplicate of the held one: the
    scene stayed); the end of the turn drops the held pick (``superseded``), since the end
    frame shows the same moment at most one interval later. A frame therefore reaches the
    model at most one interval after it was taken, and always within its turn;
  - a quiet pick is sent at once; a held pick whose speech ended without a turn (the
    listener dropped it as noise) is dropped at the next quiet frame.
  With the defaults a 2.5 s turn sends 2 frames (one from 1 s in, the end frame) and a 5.6 s
  turn 5-6, against 3 and 7 for picking at speech start and sending at once.
- :meth:`FramePolicy.end_of_turn`: the freshest frame always goes with the finished turn, at
  the sharp size when the words ask to look (:func:`asks_to_look`), unless it is a
  near-duplicate of a frame already sent since the previous end of turn: then the selection
  is ``reused`` and names that frame's id (its pixels are the fresh ones all the same, and
  :meth:`FramePolicy.send_anyway` sends them under a new id).
- Retention: every sent id is kept in order; :meth:`FramePolicy.retire` returns the oldest
  ones beyond ``max_images``, for the engine to drop from its context (or replace by
  :data:`RETIRED_NOTE`).
- :func:`encode_jpeg` / :func:`data_url` turn a selection into what a model API takes.

Defaults, and why: a 448 x 336 JPEG at quality 70 is ~15-30 KB (a detailed portrait: 28 KB),
so 1 fps while speaking is ~120-230 kbps, inside a 250 kbps uplink, and 0.1 fps when quiet is
~20 kbps; skipped duplicates (a still scene) cost nothing. A 448 x 336 image is 16 x 12
patches of 28 px (192 vision tokens in Qwen-VL-style models); four kept images are under
1k tokens. The sharp size (896 long side, ~80 KB, ~770 tokens) only goes once, at the end of
a turn whose words ask to look (reading a label), where detail matters more than 2-3 s of
uplink. Frames are never upscaled: the sharp size needs the ingest at >= 896 px to help.

Engines (through :class:`~omnicall.engine.conversation.camera.Camera`): ``offer`` each
unit's video with whether the user's turn is open, ``end_of_turn`` when it ends with its
transcript, ``encode`` each selection they send, and ``retire`` after each send.
"""

from __future__ import annotations

import base64
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import cv2
import numpy as np
import numpy.typing as npt

from omnicall.engine.conversation.settings import FramePolicySettings
from omnicall.engine.conversation.view_words import matching, normalize, refers_to_view
from omnicall.media.video_ring import RgbImage, VideoUnitFrame

ImageId = int
Frame = RgbImage | VideoUnitFrame

THUMB_SIZE = 32  # the duplicate check's grayscale thumbnail side (px)
#: one 80 ms unit (+1 ms for float error): frames land on the unit grid, so a frame one unit
#: early is on time (1 fps from the ring's 2 fps is every other frame, not every third)
RATE_SLACK_S = 0.081
RETIRED_NOTE = "[an earlier camera frame was here]"
MAX_TURN_FRAMES = 32  # frames of the current turn checked for reuse at its end


# Phrases (matched as whole words, case, punctuation and apostrophes ignored: "What's this?"
# matches "whats this") that ask the assistant to look closely: sharp size at end of turn.
LOOK_WORDS: tuple[str, ...] = (
    "take a look", "look at this", "look at that", "see this", "see that", "can you see",
    "do you see", "what do you see", "what is this", "what's this", "what is that",
    "what's that", "what am i holding", "what i'm holding", "in my hand", "read this",
    "read that", "read it", "what does it say", "what does this say", "show you",
    "how many fingers", "in front of me",
)
# Phrases that ask to look only when the words refer to the view (view_words): "what colour
# is this?" does, "what colour is a ripe banana?" and "show me how to boil an egg" do not.
LOOK_WORDS_IF_VIEW: tuple[str, ...] = (
    "look", "looking at", "show me", "what color", "what colour",
)
# A few entries for other languages (by the language code's first part); any other
# language returns False: the frame then goes at the normal size, which is still useful.
LOOK_WORDS_BY_LANGUAGE: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "en": LOOK_WORDS,
    "de": ("schau", "guck", "sieh mal", "was ist das", "lies das", "lies mal", "siehst du",
           "kannst du sehen", "was siehst du", "was halte ich"),
    "es": ("mira", "qué es esto", "que es esto", "lee esto", "puedes ver", "qué ves",
           "que ves", "qué tengo en la mano"),
    "fr": ("regarde", "qu'est-ce que c'est", "c'est quoi", "lis ça", "lis ceci", "tu vois",
           "vous voyez", "qu'est-ce que tu vois"),
})

_PATTERNS = {lang: tuple(normalize(p) for p in phrases)
             for lang, phrases in LOOK_WORDS_BY_LANGUAGE.items()}
_IF_VIEW = tuple(normalize(p) for p in LOOK_WORDS_IF_VIEW)


def asks_to_look(text: str, language: str = "en") -> bool:
    """Whether ``text`` asks to look at something (see :data:`LOOK_WORDS`)."""
    lang = language.casefold().replace("_", "-").split("-")[0]
    norm = normalize(text)
    if any(p in norm for p in _PATTERNS.get(lang, ())):
        return True
    phrase = matching(norm, _IF_VIEW) if lang == "en" else ""
    return bool(phrase) and refers_to_view(norm, phrase)


def fit_long_side(width: int, height: int, long_side: int) -> tuple[int, int]:
    """(width, height) scaled so the long side is ``long_side``, aspect kept, never upscaled."""
    scale = min(1.0, long_side / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def encode_jpeg(image: RgbImage, long_side: int, quality: int) -> bytes:
    """An RGB image resized to ``long_side`` (see :func:`fit_long_side`) as JPEG bytes."""
    height, width = _check(image).shape[:2]
    size = fit_long_side(width, height, long_side)
    if size != (width, height):
        image = np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_AREA), np.uint8)
    bgr = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError(f"JPEG encoding failed for a {width}x{height} image")
    return bytes(buf.tobytes())


def data_url(jpeg: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def _check(image: npt.NDArray[np.generic]) -> RgbImage:
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3 or min(
            image.shape[:2]) < 1:
        raise ValueError(f"a frame must be H x W x 3 uint8, got {image.shape} {image.dtype}")
    return image.astype(np.uint8, copy=False)


def grey_thumb(image: RgbImage) -> npt.NDArray[np.float32]:
    """The picture as a THUMB_SIZE x THUMB_SIZE grey thumbnail (0..255): what frames are
    compared by."""
    gray = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
    small = cv2.resize(gray, (THUMB_SIZE, THUMB_SIZE), interpolation=cv2.INTER_AREA)
    return np.asarray(small, np.float32)


def _mad(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    return float(np.mean(np.abs(a - b)))


@dataclass(frozen=True, slots=True)
class Selection:
    """A frame chosen to go to the model."""

    image_id: ImageId  # a new id; when ``reused``, the id of the frame already sent
    image: RgbImage  # the offered (freshest) frame's pixels, always
    at_s: float  # when it was offered
    long_side_px: int  # encode at this size (never upscaled)
    sharp: bool = False  # the words asked to look
    #: end of turn only: the model already has a near-duplicate of this frame from this turn
    reused: bool = False
    sent_at_s: float = 0.0  # when ``image_id`` was sent (``at_s`` unless reused)


@dataclass(slots=True)
class _Sent:
    image_id: ImageId
    thumb: npt.NDArray[np.float32]
    long_side_px: int
    at_s: float


@dataclass
class FramePolicy:
    """One conversation's frame selection (see the module docstring)."""

    settings: FramePolicySettings = field(default_factory=FramePolicySettings)
    frames_offered: int = 0
    frames_sent: int = 0
    dup_skipped: int = 0
    rate_skipped: int = 0
    #: speaking picks dropped: the turn ended before the next (or the speech made no turn)
    superseded: int = 0
    jpeg_bytes: int = 0  # what :meth:`encode` produced

    def __post_init__(self) -> None:
        self._next_id: ImageId = 1
        self._last: _Sent | None = None
        self._turn: list[_Sent] = []  # sent since the previous end of turn
        self._kept: deque[ImageId] = deque()
        self._held: _Held | None = None  # the latest speaking pick, sent at the next one
        self._speaking = False
        self._speech_from_s = 0.0

    @property
    def kept(self) -> tuple[ImageId, ...]:
        """Ids sent into the conversation and not retired yet, oldest first."""
        return tuple(self._kept)

    @property
    def holding(self) -> bool:
        """A speaking pick waits for the next one (or is dropped at the end of the turn)."""
        return self._held is not None

    def offer(self, frame: Frame, at_s: float, speaking: bool) -> Selection | None:
        """A newly sampled frame: a selection to send now, or None (see the module
        docstring: a speaking pick sends the one held before it)."""
        image = _image(frame)
        self.frames_offered += 1
        if speaking and not self._speaking:
            self._speech_from_s = at_s  # a turn's first pick comes one interval in
        elif not speaking:
            self._drop_held()  # its speech ended without a turn
        self._speaking = speaking
        interval_s = 1 / (self.settings.speaking_fps if speaking else self.settings.quiet_fps)
        picked: _Held | _Sent | None = self._held or self._last  # held, else the last sent
        since_s = -math.inf if picked is None else picked.at_s
        if speaking:
            since_s = max(since_s, self._speech_from_s)
        if at_s - since_s < interval_s - RATE_SLACK_S:
            self.rate_skipped += 1
            return None
        thumb = grey_thumb(image)
        if picked is not None and _mad(thumb, picked.thumb) < self.settings.duplicate_mad:
            self.dup_skipped += 1
            return self._send_held()  # the scene stays: a held pick goes now
        if not speaking:
            return self._send(image, thumb, at_s, self.settings.size, sharp=False)
        released = self._send_held()
        self._held = _Held(image, thumb, at_s)
        return released

    def end_of_turn(self, latest_frame: Frame, at_s: float, words: str,
                    language: str = "en") -> Selection:
        """The freshest frame for the finished turn (sharp if ``words`` ask to look)."""
        image = _image(latest_frame)
        self.frames_offered += 1
        self._drop_held()  # the end frame shows the same moment, or a later one
        self._speaking = False
        sharp = asks_to_look(words, language)
        side = self.settings.sharp_size if sharp else self.settings.size
        thumb = grey_thumb(image)
        turn, self._turn = self._turn, []
        for sent in reversed(turn):
            if sent.long_side_px >= side and _mad(thumb, sent.thumb) < self.settings.duplicate_mad:
                self.dup_skipped += 1
                return Selection(sent.image_id, image, at_s, side, sharp, reused=True,
                                 sent_at_s=sent.at_s)
        return self._send(image, thumb, at_s, side, sharp, in_turn=False)

    def send_anyway(self, selection: Selection) -> Selection:
        """A ``reused`` selection's fresh pixels, sent under a new id (e.g. when the reused
        frame is older than the turn's last second); other selections come back as they are."""
        if not selection.reused:
            return selection
        return self._send(selection.image, grey_thumb(selection.image), selection.at_s,
                          selection.long_side_px, selection.sharp, in_turn=False)

    def encode(self, selection: Selection) -> bytes:
        """The selection as JPEG at its size and the settings' quality (counted)."""
        jpeg = encode_jpeg(selection.image, selection.long_side_px, self.settings.jpeg_quality)
        self.jpeg_bytes += len(jpeg)
        return jpeg

    def retire(self) -> list[ImageId]:
        """The oldest kept ids beyond ``max_images`` (forgotten here; drop them from the
        model's context, or replace each by :data:`RETIRED_NOTE`)."""
        retired: list[ImageId] = []
        while len(self._kept) > self.settings.max_images:
            retired.append(self._kept.popleft())
        return retired

    def _send(self, image: RgbImage, thumb: npt.NDArray[np.float32], at_s: float,
              long_side_px: int, sharp: bool, in_turn: bool = True) -> Selection:
        image_id, self._next_id = self._next_id, self._next_id + 1
        self._last = _Sent(image_id, thumb, long_side_px, at_s)
        if in_turn:  # end-of-turn frames close their turn: the next one starts after them
            self._turn.append(self._last)
            del self._turn[:-MAX_TURN_FRAMES]  # bounded: a turn may never end
        self._kept.append(image_id)
        self.frames_sent += 1
        return Selection(image_id, image, at_s, long_side_px, sharp, sent_at_s=at_s)

    def _send_held(self) -> Selection | None:
        """Send the held pick, if any."""
        held, self._held = self._held, None
        if held is None:
            return None
        return self._send(held.image, held.thumb, held.at_s, self.settings.size,
                          sharp=False)

    def _drop_held(self) -> None:
        """The held pick will not be sent: the next frames are compared with the last sent."""
        if self._held is not None:
            self._held = None
            self.superseded += 1


@dataclass(slots=True)
class _Held:
    image: RgbImage
    thumb: npt.NDArray[np.float32]
    at_s: float


def _image(frame: Frame) -> RgbImage:
    return _check(frame.image if isinstance(frame, VideoUnitFrame) else frame)
