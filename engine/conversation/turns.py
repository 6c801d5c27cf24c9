"""End-of-turn detection from VAD speech probabilities. Pure and synchronous.

Fed one probability per VAD chunk (32 ms at 16 kHz), it reports:

- ``speech_start``: ``min_speech_ms`` of speech (prob >= ``start_threshold``) after silence;
  before it, :attr:`TurnDetector.onset` tells that ``onset_ms`` of it came (a sound that may
  become speech: what ducks a reply at once, and lifts the duck if it stops short);
- ``lull``: the first silent chunk of the speech (prob < ``end_threshold``), before any
  pause: the speech may be ending. Work that the pause would start and that costs little when
  the words go on (the cascade's final transcript) may start here; every silence in a turn
  begins with one (when ``pause_ms`` is longer than a chunk), so a ``pause`` always belongs
  to the silence of the latest ``lull``; from it until speech resumes or the turn ends,
  :attr:`TurnDetector.quiet` holds (optional work should not start then);
- ``pause``: speech stopped (prob < ``end_threshold`` for ``pause_ms``; the hangover counts
  from the first silent chunk). Work that only the end of turn needs (final ASR, LLM) may
  start now, speculatively; ``pause_ms`` keeps the gaps between words from starting it;
- ``resume``: speech came back within the hangover: the speculation is void;
- ``end_of_turn``: the hangover of ``hangover_ms`` passed in silence, or the turn reached
  ``max_turn_ms`` (very long utterances are cut so the assistant still answers).

A chunk fed ``filled=True`` stands in for audio that never came (a loss burst the media plane
filled with silence, :attr:`omnicall.media.aligner.MediaUnit.filled`): it is neither speech
nor silence, so a burst cannot end or pause a turn (nor start one); it still counts towards
``max_turn_ms``.

An end-of-turn model (:mod:`omnicall.engine.smart_turn`) may change the hangover of the current
pause (:meth:`TurnDetector.set_hangover`): shorter when the speaker sounds finished, longer when
not; speech resuming restores ``hangover_ms``, the fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from omnicall.engine.conversation.settings import TurnSettings

TurnSignal = Literal["speech_start", "lull", "pause", "resume", "end_of_turn"]

#: 80 ms units kept from before ``speech_start`` as the turn's start (320 ms: the speech that
#: ``min_speech_ms`` waited for, and the soft onset before it)
PREROLL_UNITS = 4


@dataclass
class TurnConfig:
    start_threshold: float = 0.5
    end_threshold: float = 0.35
    min_speech_ms: int = 160
    #: the caller's sound is "onset" after this much of it (at most ``min_speech_ms``):
    #: a reply ducks then, 96 ms sooner than at the speech start (bench/room.py); 0: never
    onset_ms: int = 64
    hangover_ms: int = TurnSettings.hangover_ms  # --hangover-ms
    pause_ms: int = 96
    max_turn_ms: int = 20_000
    chunk_ms: int = 32
    #: with an end-of-turn model: the hangover when the speaker sounds finished / not
    finished_ms: int = 300  # measured (bench --cutoffs): 200 cut more speakers off than 400
    unfinished_ms: int = 1200
    finished_threshold: float = 0.5


class TurnDetector:
    def __init__(self, config: TurnConfig | None = None) -> None:
        self.config = config or TurnConfig()
        self.in_turn = False
        self.paused = False
        self._speech_run_ms = 0
        self._silence_run_ms = 0
        self._turn_ms = 0
        self.hangover_ms = self.config.hangover_ms

    @property
    def turn_ms(self) -> int:
        """How long the open turn has lasted (0: none open)."""
        return self._turn_ms if self.in_turn else 0

    @property
    def quiet(self) -> bool:
        """In a turn, silent since its latest ``lull``: the speech may be ending and the
        work on the turn's reply may have begun."""
        return self.in_turn and self._silence_run_ms > 0

    @property
    def onset(self) -> bool:
        """``onset_ms`` of sound came and no turn started yet: it may become one."""
        return not self.in_turn and 0 < self.config.onset_ms <= self._speech_run_ms

    def reset(self) -> None:
        self.in_turn = self.paused = False
        self._speech_run_ms = self._silence_run_ms = self._turn_ms = 0
        self.hangover_ms = self.config.hangover_ms

    def set_hangover(self, hangover_ms: int) -> None:
        """Change the hangover of the current pause (the next silent chunk past it ends the
        turn)."""
        if self.in_turn and self.paused:
            self.hangover_ms = hangover_ms

    def judge(self, finished_probability: float) -> None:
        """An end-of-turn model's verdict on the current pause (see :meth:`set_hangover`)."""
        c = self.config
        self.set_hangover(c.finished_ms if finished_probability >= c.finished_threshold
                          else c.unfinished_ms)

    def feed(self, prob: float, filled: bool = False) -> TurnSignal | None:
        c = self.config
        if filled:  # no audio came: the caller's state is unknown, keep it
            if self.in_turn:
                self._turn_ms += c.chunk_ms
                if self._turn_ms >= c.max_turn_ms:
                    self.reset()
                    return "end_of_turn"
            return None
        if not self.in_turn:
            self._speech_run_ms = self._speech_run_ms + c.chunk_ms if prob >= c.start_threshold \
                else 0
            if self._speech_run_ms >= c.min_speech_ms:
                self.in_turn, self.paused = True, False
                self._turn_ms, self._silence_run_ms = self._speech_run_ms, 0
                return "speech_start"
            return None
        self._turn_ms += c.chunk_ms
        if self._turn_ms >= c.max_turn_ms:
            self.reset()
            return "end_of_turn"
        if prob < c.end_threshold:
            self._silence_run_ms += c.chunk_ms
            if self._silence_run_ms >= self.hangover_ms:
                self.reset()
                return "end_of_turn"
            if not self.paused and self._silence_run_ms >= c.pause_ms:
                self.paused = True
                return "pause"
            if not self.paused and self._silence_run_ms == c.chunk_ms:
                return "lull"
            return None
        if prob >= c.start_threshold or not self.paused:
            self._silence_run_ms = 0
            self.hangover_ms = c.hangover_ms
            if self.paused:
                self.paused = False
                return "resume"
        return None
