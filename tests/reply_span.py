"""How much of one reply a client received, found in the audio it decoded.

The reference is the reply as the engine made it (the server's egress input, resampled to
48 kHz as the egress does); the received stream is what the client's decoder produced for
the whole call: the reply sits in it somewhere, after Opus (its delay, its small changes),
possibly stretched by underruns (the server's paced track sends silence when the jitter
buffer runs dry, so the reply continues later), and cut at a barge-in (silence from there).

:func:`received_interval_ms` walks the reference in 20 ms blocks, finds each loud block in
the received stream where the previous one puts it (a normalized cross-correlation; when it
is not there, the reply's next 80 ms are looked for up to 3 s later: an underrun's shift),
and stops at the first loud block that is missing: the cut lies between the end of the last
loud sample received and the first loud sample of the reference where the client got
silence (a fade that the codec made quieter was still received). When the cut falls in a
pause of the reply, both are silent there and the interval spans the pause: the caller
heard the same words anywhere inside it. Opus's decoder rings on for a few ms after a loud
cut, so the measure reads 0-5 ms late there (tests/test_reply_span.py).
"""

from __future__ import annotations

import numpy as np

from omnicall.media.resample import StreamConverter

RATE_HZ = 48_000
BLOCK = 960  # 20 ms
LOUD_RMS = 300.0  # a block of speech; Piper's pauses and decoded silence are far below
LOUD_SAMPLE = 400  # one sample of speech (the edges of the cut are found on these)
QUIET_SAMPLE = 100  # received no louder than this around a loud sample: it never arrived
MATCH = 0.6  # normalized correlation of a received block with its reference
TRACK = 0.8  # ... of the reply's next TRACK_BLOCKS, to follow a shift (an underrun)
TRACK_BLOCKS = 4  # long enough that a pitch period's repeat does not fool it
EDGE = 96  # 2 ms: the codec moves a block's best match by less
MAX_SHIFT = RATE_HZ * 3  # an underrun delays the rest of the reply by up to 3 s a block


def reference_48k(chunks: list[tuple[np.ndarray, int]]) -> np.ndarray:
    """A reply's audio as its engine emitted it (samples, rate) -> the 48 kHz stream the
    egress makes of it (with the resampler's delay, as the meter counts it)."""
    converter = StreamConverter(RATE_HZ)
    parts = [converter.convert(samples, rate) for samples, rate in chunks]
    parts.append(converter.flush())
    return np.concatenate(parts).astype(np.int16) if parts else np.zeros(0, np.int16)


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x.astype(np.float64) ** 2))) if len(x) else 0.0


def _best_lag(window: np.ndarray, pattern: np.ndarray) -> tuple[int, float]:
    """Where ``pattern`` best matches inside ``window`` and how well (normalized, 0..1)."""
    n, m = len(window), len(pattern)
    if n < m:
        return 0, 0.0
    w, p = window.astype(np.float64), pattern.astype(np.float64)
    size = 1 << int(np.ceil(np.log2(n + m)))
    corr = np.fft.irfft(np.fft.rfft(w, size) * np.conj(np.fft.rfft(p, size)), size)[:n - m + 1]
    energy = np.convolve(w * w, np.ones(m), mode="valid")
    score = corr / np.sqrt(np.maximum(energy, 1e-9) * max(float(p @ p), 1e-9))
    lag = int(np.argmax(score))
    return lag, float(score[lag])


def _start(received: np.ndarray, reference: np.ndarray, first_loud: int) -> int | None:
    """The received index of reference sample 0, from the reply's first 0.3 s of sound.

    An underrun inside those 0.3 s splits them, and the best match may then be their later
    part. The reply's first sound lies at or before it (an underrun only ever delays what
    follows), so its first 80 ms and its first 40 ms (in case an underrun split those too)
    are looked for there: the earliest found is the start (a split match is later)."""
    pattern = reference[first_loud:first_loud + RATE_HZ * 3 // 10]
    lag, score = _best_lag(received, pattern)
    if score < MATCH:
        return None
    begin = max(0, lag - MAX_SHIFT)
    for blocks in (TRACK_BLOCKS, TRACK_BLOCKS // 2):
        head = reference[first_loud:first_loud + blocks * BLOCK]
        head_lag, head_score = _best_lag(received[begin:lag + len(head) + EDGE], head)
        if head_score >= TRACK:
            lag = min(lag, begin + head_lag)
    return lag - first_loud


def _here(received: np.ndarray, block: np.ndarray, offset: int, j: int) -> tuple[bool, int]:
    """Is reference block ``j`` in ``received`` where ``offset`` puts it (give or take the
    codec's EDGE)? Returns that and the offset, moved onto the best match when found."""
    at = offset + j * BLOCK
    near = max(0, at - EDGE)
    lag, score = _best_lag(received[near:at + BLOCK + EDGE], block)
    found = near + lag
    if score >= MATCH and _rms(received[found:found + BLOCK]) > 0.3 * _rms(block):
        return True, found - j * BLOCK
    return False, offset


def received_interval_ms(received: np.ndarray, reference: np.ndarray
                         ) -> tuple[float, float] | None:
    """(lo, hi): the client received at least ``lo`` and at most ``hi`` ms of the reply
    (reference time: underruns excluded); None when the reply is not found in ``received``.
    A reply received in full gives hi = its length."""
    blocks = len(reference) // BLOCK
    loud = [j for j in range(blocks) if _rms(reference[j * BLOCK:(j + 1) * BLOCK]) > LOUD_RMS]
    if not loud:
        return None
    offset = _start(received, reference, loud[0] * BLOCK)
    if offset is None:
        return None
    last_matched: int | None = None
    missing: int | None = None
    for j in loud:
        block = reference[j * BLOCK:(j + 1) * BLOCK]
        matched, offset = _here(received, block, offset, j)
        if not matched:  # an underrun delayed the rest of the reply, or it was cut here
            pattern = reference[j * BLOCK:(j + TRACK_BLOCKS) * BLOCK]
            begin = max(0, offset + j * BLOCK - EDGE)
            lag, score = _best_lag(received[begin:begin + MAX_SHIFT + len(pattern)], pattern)
            if score >= TRACK:
                matched, offset = _here(received, block, begin + lag - j * BLOCK, j)
        if matched:
            last_matched = j
            continue
        if _rms(received[offset + j * BLOCK:offset + (j + 1) * BLOCK]) < 0.1 * _rms(block):
            missing = j
            break
        # neither there nor silent: a block the codec changed too much; go on from here
    if last_matched is None:
        return None
    if missing is None:
        return (len(reference) * 1000 / RATE_HZ,) * 2
    # sample edges: the last loud sample received (aligned to the reference), and the
    # first loud sample of the reference after it where the client got silence
    span_start = last_matched * BLOCK
    got = np.abs(received[offset + span_start:offset + (missing + 1) * BLOCK].astype(np.int32))
    heard = np.flatnonzero(got > LOUD_SAMPLE)
    lo = span_start + (int(heard[-1]) + 1 if len(heard) else 0)
    hi = _first_not_received(received, reference, offset, lo, (missing + 1) * BLOCK)
    return lo * 1000 / RATE_HZ, hi * 1000 / RATE_HZ


def _first_not_received(received: np.ndarray, reference: np.ndarray, offset: int, lo: int,
                        end: int) -> int:
    """The first loud reference sample in [lo, end) where the client got silence (nothing
    louder than QUIET_SAMPLE within EDGE of it); ``end`` if none. A loud sample that arrived
    quieter (a fade the codec lowered under LOUD_SAMPLE) is not one: it was received."""
    loud = lo + np.flatnonzero(np.abs(reference[lo:end].astype(np.int32)) > LOUD_SAMPLE)
    if not len(loud):
        return end
    start = offset + lo - EDGE
    got = np.abs(received[max(0, start):max(0, offset + end + EDGE)].astype(np.int32))
    got = np.concatenate([np.zeros(max(0, -start), np.int32), got,
                          np.zeros(end - lo + 2 * EDGE - len(got) - max(0, -start), np.int32)])
    envelope = np.lib.stride_tricks.sliding_window_view(got, 2 * EDGE + 1).max(axis=1)
    silent = loud[envelope[loud - lo] < QUIET_SAMPLE]
    return int(silent[0]) if len(silent) else end


def truncation_error_ms(kept_ms: float, interval: tuple[float, float]) -> float:
    """How far what an engine kept lies from what the client received (0 inside)."""
    lo, hi = interval
    return 0.0 if lo <= kept_ms <= hi else min(abs(kept_ms - lo), abs(kept_ms - hi))
