"""The third-party internals omnicall patches, all in this one module, each written against
the version in :data:`WRITTEN_AGAINST` (``constraints.txt`` pins them).

Three libraries have no setting for what omnicall needs, so it replaces one of their
internals:

- **aiortc**: an audio receiver's jitter buffer, ``RTCRtpReceiver``'s name-mangled
  ``__jitter_buffer`` (aiortc hard-codes a 4-frame prefetch: ~80 ms on every call;
  :mod:`omnicall.media.receive_jitter` has the buffer put there):
  :func:`receiver_jitter_buffer`, :func:`set_receiver_jitter_buffer`;
- **aioice**: its module-level ``get_host_addresses``, for ICE candidates on the loopback
  address only (hermetic tests, a client on the same host): :func:`use_loopback_candidates`;
- **faster-whisper**: ``faster_whisper.transcribe.pad_or_trim``, which pads every input to
  Whisper's 30 s window; the cascade pads an utterance to its own length
  (:mod:`omnicall.engine.cascade.asr`): :func:`pad_whisper_input`.

Each looks for the internal where the version written against keeps it and raises
:class:`ThirdPartyChanged` naming the library and that version when it is gone;
``tests/test_third_party.py`` checks the installed versions against :data:`WRITTEN_AGAINST`
and that each internal is still there, so an upgrade fails loudly in the tests instead of
quietly bringing the delay (or the 30 s window) back. The libraries are imported where a
patch is made, so a process that makes none imports none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

WRITTEN_AGAINST = {"aiortc": "1.16.0", "aioice": "0.13.0", "faster-whisper": "1.2.1"}

_RECEIVER_BUFFER = "_RTCRtpReceiver__jitter_buffer"


class ThirdPartyChanged(RuntimeError):
    """A library no longer keeps the internal omnicall patches where it did."""

    def __init__(self, library: str, what: str) -> None:
        super().__init__(f"{library} changed since {WRITTEN_AGAINST[library]}: {what}; update "
                         "media/third_party.py")


# -- aiortc: an audio receiver's jitter buffer ----------------------------------------------
def receiver_jitter_buffer(receiver: Any) -> Any:
    """The ``RTCRtpReceiver``'s jitter buffer (an ``aiortc.jitterbuffer.JitterBuffer``)."""
    from aiortc.jitterbuffer import JitterBuffer

    current = getattr(receiver, _RECEIVER_BUFFER, None)
    if not isinstance(current, JitterBuffer):
        raise ThirdPartyChanged("aiortc", f"RTCRtpReceiver has no {_RECEIVER_BUFFER} "
                                "JitterBuffer")
    return current


def set_receiver_jitter_buffer(receiver: Any, buffer: Any) -> None:
    """Put ``buffer`` (a ``JitterBuffer``) where the receiver keeps its own."""
    receiver_jitter_buffer(receiver)
    setattr(receiver, _RECEIVER_BUFFER, buffer)


# -- aioice: host candidates -----------------------------------------------------------------
_original_host_addresses: Callable[[bool, bool], list[str]] | None = None


def _loopback_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
    return ["127.0.0.1"] if use_ipv4 else ["::1"]


def use_loopback_candidates(enabled: bool) -> None:
    """Offer only the loopback address as an ICE host candidate (aioice lists every
    interface's address but 127.0.0.1); ``False`` puts aioice's own back. Process-wide."""
    global _original_host_addresses
    import aioice.ice

    if not hasattr(aioice.ice, "get_host_addresses"):
        raise ThirdPartyChanged("aioice", "aioice.ice.get_host_addresses is gone")
    if enabled and _original_host_addresses is None:
        _original_host_addresses = aioice.ice.get_host_addresses
        aioice.ice.get_host_addresses = _loopback_addresses
        logger.info("ICE: offering loopback candidates only")
    elif not enabled and _original_host_addresses is not None:
        aioice.ice.get_host_addresses = _original_host_addresses  # type: ignore[assignment]
        _original_host_addresses = None


# -- faster-whisper: the input's padding ------------------------------------------------------
def pad_whisper_input(frames: Callable[[int], int]) -> None:
    """faster-whisper pads (or trims) each input's mel frames to ``frames(length)`` instead
    of ``length`` (its 30 s window). Once per process; a second call changes nothing."""
    from faster_whisper import transcribe

    original = getattr(transcribe, "pad_or_trim", None)
    if original is None:
        raise ThirdPartyChanged("faster-whisper", "faster_whisper.transcribe.pad_or_trim is "
                                "gone")
    if getattr(original, "omnicall_padding", False):
        return

    def pad_or_trim(array: Any, length: int = 3000, *, axis: int = -1) -> Any:
        return original(array, frames(length), axis=axis)

    pad_or_trim.omnicall_padding = True  # type: ignore[attr-defined]
    transcribe.pad_or_trim = pad_or_trim
