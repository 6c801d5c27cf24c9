"""Whether the caller's microphone hears the assistant's voice at all.

WebRTC's AEC3 assumes an echo until its filter has found one: with no echo path (a headset,
earbuds, or a browser whose own canceller already removed the echo) its filter never
converges, and its suppressor keeps treating the caller's voice, whenever the assistant
talks, as the echo it expects (measured on the bundled Piper voice: a caller 10 dB under the
reply came out 30-60 dB lower; the kiosk page's interruptions over a headset were missed).
So the call's :class:`~omnicall.media.echo_canceller.EchoCanceller` asks this detector, and
uses AEC3's output only while an echo is there or not yet ruled out.

How: the reference the canceller pairs with each 10 ms of the microphone, and that
microphone block, both brought down to :data:`RATE_HZ` (block means), are kept for the last
:data:`WINDOW_S` (the reference :data:`MAX_LAG_S` longer: silence before the call). Every
:data:`EVERY_S` from :data:`MIN_WINDOW_S` into the call (every :data:`EVERY_DECIDED_S` once
decided), while the assistant talked for at least :data:`ACTIVE_SHARE` of the window, the
normalized
cross-correlation of the two over lags 0 to :data:`MAX_LAG_S` (AEC3's own reach) is taken
by FFT, on first differences (whiter spectra: two voices hardly correlate by chance): an
echo, even through a reverberant room and under the caller's voice, correlates with the
reference at its delay (:data:`ECHO_RHO` and above, :data:`ECHO_CHECKS` checks in a row); a
caller's voice does not. A
microphone with no sound at all while the assistant talks hears no echo either (decided at
the first such check).

The verdict (:attr:`EchoPresence.echo`): None (not known yet: the canceller then treats it
as an echo, the safe side for a loudspeaker), True from the checks that find one, and
False after :data:`NO_ECHO_CHECKS` checks in a row found none (:data:`NO_ECHO_CHECKS_AFTER`
once an echo was found: the caller talking over it lowers the correlation for a while).

Pure, synchronous: blocks in, a verdict out.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from omnicall.media.resample import Int16Array

RATE_HZ = 4000  # both sides, brought down by block means (speech's energy lies below 2 kHz)
BLOCK_S = 0.010
WINDOW_S = 2.0  # the microphone's part of each check, at most
MIN_WINDOW_S = 0.75  # ... at least (the call's first check)
MAX_LAG_S = 0.5  # the echo's delay searched (AEC3's reach, docs/room.md)
EVERY_S = 0.25  # until the first verdict
EVERY_DECIDED_S = 1.0  # after it
ACTIVE_SHARE = 0.25  # of the window's reference blocks loud, for a check to count
LOUD_PEAK = 300  # a reference block with a sample past this is the assistant talking
SILENT_RMS = 2.0  # a microphone this quiet (int16 units) hears nothing, echo included
ECHO_RHO = 0.2  # a correlation this high is an echo ...
ECHO_CHECKS = 2  # ... in this many checks in a row (the onset of a caller's word, a short
#                  burst, can correlate by chance once: 0.14 measured)
NO_ECHO_RHO = 0.08  # below this, no echo
NO_ECHO_CHECKS = 3  # checks in a row with none: no echo (0.75 s of checks)
NO_ECHO_CHECKS_AFTER = 8  # ... once an echo was found in this call (8 s)

_WINDOW_BLOCKS = round(WINDOW_S / BLOCK_S)
_LAG_BLOCKS = round(MAX_LAG_S / BLOCK_S)
_EVERY_BLOCKS = round(EVERY_S / BLOCK_S)
_EVERY_DECIDED_BLOCKS = round(EVERY_DECIDED_S / BLOCK_S)
_PER_BLOCK = round(RATE_HZ * BLOCK_S)
_MIN_WINDOW_BLOCKS = round(MIN_WINDOW_S / BLOCK_S)


def _down(block: Int16Array) -> np.ndarray:
    """A 10 ms block (any rate that divides into :data:`RATE_HZ`) at :data:`RATE_HZ`."""
    step = len(block) // _PER_BLOCK
    if step < 1 or len(block) != step * _PER_BLOCK:
        raise ValueError(f"a 10 ms block of a multiple of {RATE_HZ} Hz, not {len(block)} "
                         "samples")
    return block.astype(np.float64).reshape(_PER_BLOCK, step).mean(axis=1)


def correlation(far: np.ndarray, near: np.ndarray) -> float:
    """The largest normalized cross-correlation of ``near`` with ``far`` delayed by 0 to
    ``len(far) - len(near)`` samples (``far`` starts that much earlier); 0 when either is
    silent."""
    lags = len(far) - len(near)
    if lags < 0:
        raise ValueError("the reference must be at least as long as the microphone's part")
    near_energy = float(np.dot(near, near))
    if near_energy <= 0:
        return 0.0
    # lags only forward, within ``far``: a transform as long as ``far`` never wraps
    n = 1 << int(np.ceil(np.log2(len(far))))
    cross = np.fft.irfft(np.fft.rfft(far, n) * np.conj(np.fft.rfft(near, n)), n)[:lags + 1]
    squares = np.concatenate([[0.0], np.cumsum(far * far)])
    far_energy = squares[len(near):len(near) + lags + 1] - squares[:lags + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(far_energy > 0, np.abs(cross) / np.sqrt(far_energy * near_energy), 0.0)
    return float(rho.max())


class EchoPresence:
    """One call's verdict on whether its microphone hears the assistant (module docstring)."""

    def __init__(self) -> None:
        # the reference before the call began was silence: the lags reach back into it
        self._far: deque[np.ndarray] = deque([np.zeros(_PER_BLOCK)] * _LAG_BLOCKS,
                                             maxlen=_WINDOW_BLOCKS + _LAG_BLOCKS)
        self._far_loud: deque[bool] = deque(maxlen=_WINDOW_BLOCKS)
        self._near: deque[np.ndarray] = deque(maxlen=_WINDOW_BLOCKS)
        self._since_check = 0
        self._quiet_checks = 0
        self._echo_checks = 0
        self._found = False
        #: None: not known yet; True: an echo is there; False: none
        self.echo: bool | None = None
        self.checks = 0  # that counted (enough of the assistant talking)
        self.last_rho = float("nan")

    def feed(self, far: Int16Array | None, near: Int16Array) -> None:
        """The reference block paired with this 10 ms of the microphone (None: none was
        given, silence is assumed) and that microphone block."""
        far_down = np.zeros(_PER_BLOCK) if far is None else _down(far)
        loud = far is not None and len(far) > 0 and int(np.abs(far).max()) > LOUD_PEAK
        self._far.append(far_down)
        self._far_loud.append(loud)
        self._near.append(_down(near))
        self._since_check += 1
        every = _EVERY_BLOCKS if self.echo is None else _EVERY_DECIDED_BLOCKS
        if self._since_check >= every and len(self._near) >= _MIN_WINDOW_BLOCKS:
            self._since_check = 0
            self._check()

    def _check(self) -> None:
        blocks = len(self._near)
        if sum(self._far_loud) < ACTIVE_SHARE * blocks:
            return  # the assistant hardly talked: nothing to hear an echo of
        self.checks += 1
        near = np.concatenate(self._near)
        far = np.concatenate(list(self._far)[-(blocks + _LAG_BLOCKS):])
        if float(np.sqrt(np.mean(near * near))) < SILENT_RMS:
            # no sound at all while the assistant talked: surely no echo (a muted or
            # gated microphone, a headset's digital silence)
            self.last_rho = 0.0
            if not self._found:
                self.echo = False
            return
        # first differences: whiter spectra, so two voices do not correlate by chance
        rho = self.last_rho = correlation(np.diff(far), np.diff(near))
        self._echo_checks = self._echo_checks + 1 if rho >= ECHO_RHO else 0
        if self._echo_checks >= ECHO_CHECKS:
            self.echo, self._found, self._quiet_checks = True, True, 0
        elif rho >= ECHO_RHO:
            self._quiet_checks = 0
        elif rho < NO_ECHO_RHO:
            self._quiet_checks += 1
            if self._quiet_checks >= (NO_ECHO_CHECKS_AFTER if self._found else NO_ECHO_CHECKS):
                self.echo = False
