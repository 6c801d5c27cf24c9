"""libopus itself, through ctypes: the parts PyAV's ``libopus`` codec does not reach.

FFmpeg's libopus wrapper opens the encoder with fixed settings (in-band FEC and the expected
packet loss cannot change during a call) and its decoder never asks libopus for the forward
error correction carried in the next packet, nor conceals a packet that never came. The same
libopus that PyAV bundles (``av.libs``; else the system's ``libopus.so.0``) is called directly
here: :class:`OpusEncoderHandle` and :class:`OpusDecoderHandle` own one libopus state each,
mono or stereo, 48 kHz, int16.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from pathlib import Path

import av
import numpy as np

from omnicall.media.resample import Int16Array
from omnicall.media.timebase import OPUS_RATE_HZ

logger = logging.getLogger(__name__)

MAX_FRAME_SAMPLES = 5760  # 120 ms at 48 kHz, the longest Opus packet
MAX_PACKET_BYTES = 1500
APPLICATION_VOIP, APPLICATION_AUDIO = 2048, 2049
_SET_BITRATE, _SET_COMPLEXITY, _SET_INBAND_FEC = 4002, 4010, 4012
_SET_PACKET_LOSS_PERC, _SET_VBR_CONSTRAINT = 4014, 4020
_GET_INBAND_FEC, _GET_PACKET_LOSS_PERC = 4013, 4015


class OpusError(RuntimeError):
    """libopus refused a call (the message names libopus's error)."""


def _find_library() -> str:
    bundled = Path(av.__file__).resolve().parent.parent / "av.libs"
    for candidate in sorted(bundled.glob("libopus*.so*")):
        return str(candidate)
    found = ctypes.util.find_library("opus")
    if found is None:
        raise OpusError("libopus not found (neither in PyAV's av.libs nor on the system)")
    return found


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(_find_library())
    p, i32, i16p, u8p = ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_int16), \
        ctypes.c_char_p
    ip = ctypes.POINTER(ctypes.c_int)
    lib.opus_decoder_create.argtypes, lib.opus_decoder_create.restype = [i32, ctypes.c_int, ip], p
    lib.opus_decode.argtypes = [p, u8p, i32, i16p, ctypes.c_int, ctypes.c_int]
    lib.opus_decode.restype = ctypes.c_int
    lib.opus_decoder_destroy.argtypes, lib.opus_decoder_destroy.restype = [p], None
    lib.opus_encoder_create.argtypes = [i32, ctypes.c_int, ctypes.c_int, ip]
    lib.opus_encoder_create.restype = p
    lib.opus_encode.argtypes = [p, i16p, ctypes.c_int, ctypes.c_void_p, i32]
    lib.opus_encode.restype = i32
    lib.opus_encoder_destroy.argtypes, lib.opus_encoder_destroy.restype = [p], None
    lib.opus_encoder_ctl.restype = ctypes.c_int  # variadic: arguments typed at each call
    lib.opus_strerror.argtypes, lib.opus_strerror.restype = [ctypes.c_int], ctypes.c_char_p
    return lib


_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        _lib = _load()
    return _lib


def _check(code: int, what: str) -> int:
    if code < 0:
        raise OpusError(f"{what}: {lib().opus_strerror(code).decode()}")
    return code


class OpusDecoderHandle:
    """One libopus decoder: packets, FEC from a later packet, or concealment -> int16."""

    def __init__(self, channels: int = 1) -> None:
        error = ctypes.c_int(0)
        self.channels = channels
        self._state = lib().opus_decoder_create(OPUS_RATE_HZ, channels, ctypes.byref(error))
        _check(error.value, "opus_decoder_create")
        self._pcm = (ctypes.c_int16 * (MAX_FRAME_SAMPLES * channels))()

    def _run(self, data: bytes | None, frame_samples: int, fec: bool) -> Int16Array:
        n = lib().opus_decode(self._state, data, len(data) if data else 0, self._pcm,
                              frame_samples, int(fec))
        _check(n, "opus_decode")
        return np.frombuffer(memoryview(self._pcm), np.int16, n * self.channels).copy()

    def decode(self, payload: bytes) -> Int16Array:
        return self._run(payload, MAX_FRAME_SAMPLES, False)

    def decode_fec(self, next_payload: bytes, frame_samples: int) -> Int16Array:
        """The packet before ``next_payload``, from its in-band FEC (concealed by libopus
        when it carries none)."""
        return self._run(next_payload, frame_samples, True)

    def conceal(self, frame_samples: int) -> Int16Array:
        """Packet loss concealment for one missing packet of ``frame_samples``."""
        return self._run(None, frame_samples, False)

    def __del__(self) -> None:
        state, self._state = getattr(self, "_state", None), None
        if state and _lib is not None:
            _lib.opus_decoder_destroy(state)


class OpusEncoderHandle:
    """One libopus encoder; bit rate, complexity, in-band FEC and the expected packet loss
    can change between frames."""

    def __init__(self, channels: int = 1, application: int = APPLICATION_AUDIO) -> None:
        error = ctypes.c_int(0)
        self.channels = channels
        self._state = lib().opus_encoder_create(OPUS_RATE_HZ, channels, application,
                                                ctypes.byref(error))
        _check(error.value, "opus_encoder_create")
        self._out = ctypes.create_string_buffer(MAX_PACKET_BYTES)

    def _set(self, request: int, value: int) -> None:
        state = ctypes.c_void_p(self._state)
        _check(lib().opus_encoder_ctl(state, ctypes.c_int(request), ctypes.c_int32(value)),
               f"opus_encoder_ctl({request}, {value})")

    def _get(self, request: int) -> int:
        out = ctypes.c_int32(0)
        state = ctypes.c_void_p(self._state)
        _check(lib().opus_encoder_ctl(state, ctypes.c_int(request), ctypes.byref(out)),
               f"opus_encoder_ctl({request})")
        return out.value

    def set_bitrate(self, bps: int) -> None:
        self._set(_SET_BITRATE, bps)

    def set_complexity(self, complexity: int) -> None:
        self._set(_SET_COMPLEXITY, complexity)

    def set_vbr_constraint(self, on: bool) -> None:
        """Constrained VBR (libopus's default) or free VBR (FFmpeg's libopusenc default)."""
        self._set(_SET_VBR_CONSTRAINT, int(on))

    def set_fec(self, on: bool) -> None:
        self._set(_SET_INBAND_FEC, int(on))

    def set_packet_loss(self, percent: int) -> None:
        self._set(_SET_PACKET_LOSS_PERC, max(0, min(100, percent)))

    @property
    def fec(self) -> bool:
        return bool(self._get(_GET_INBAND_FEC))

    @property
    def packet_loss(self) -> int:
        return self._get(_GET_PACKET_LOSS_PERC)

    def encode(self, samples: Int16Array) -> bytes:
        pcm = np.ascontiguousarray(samples, np.int16)
        n = lib().opus_encode(self._state, pcm.ctypes.data_as(ctypes.POINTER(ctypes.c_int16)),
                              len(pcm) // self.channels, self._out, MAX_PACKET_BYTES)
        return self._out.raw[:_check(n, "opus_encode")]

    def __del__(self) -> None:
        state, self._state = getattr(self, "_state", None), None
        if state and _lib is not None:
            _lib.opus_encoder_destroy(state)
