"""The third-party internals omnicall patches (media/third_party.py): the versions they were
written against are the installed ones, and each internal is still where it was."""

from __future__ import annotations

import asyncio
from importlib.metadata import version

import aioice.ice
import numpy as np
import pytest
from aiortc import RTCPeerConnection, RTCRtpReceiver
from aiortc.jitterbuffer import JitterBuffer

from omnicall.media.third_party import (
    WRITTEN_AGAINST,
    ThirdPartyChanged,
    pad_whisper_input,
    receiver_jitter_buffer,
    set_receiver_jitter_buffer,
    use_loopback_candidates,
)


@pytest.mark.parametrize("library", sorted(WRITTEN_AGAINST))
def test_the_installed_version_is_the_one_the_patch_was_written_against(library: str) -> None:
    assert version(library) == WRITTEN_AGAINST[library], (
        f"{library} {version(library)} is installed; media/third_party.py was written against "
        f"{WRITTEN_AGAINST[library]}: check its patch, then update WRITTEN_AGAINST")


def audio_receiver() -> RTCRtpReceiver:
    """A real aiortc audio receiver (of a closed peer connection)."""
    async def make() -> RTCRtpReceiver:
        pc = RTCPeerConnection()
        receiver = pc.addTransceiver("audio").receiver
        await pc.close()
        return receiver

    return asyncio.run(make())


def test_aiortc_keeps_a_4_frame_prefetch_buffer_where_it_is_replaced() -> None:
    receiver = audio_receiver()
    original = receiver_jitter_buffer(receiver)
    assert type(original) is JitterBuffer
    assert original._prefetch == 4, "aiortc changed its audio prefetch: revisit the patch"
    mine = JitterBuffer(capacity=16, prefetch=0)
    set_receiver_jitter_buffer(receiver, mine)
    assert receiver_jitter_buffer(receiver) is mine
    with pytest.raises(ThirdPartyChanged, match=r"aiortc changed since 1\.16\.0"):
        set_receiver_jitter_buffer(object(), mine)


def test_the_loopback_switch_is_reversible() -> None:
    original = aioice.ice.get_host_addresses
    use_loopback_candidates(True)
    try:
        assert aioice.ice.get_host_addresses(True, False) == ["127.0.0.1"]
    finally:
        use_loopback_candidates(False)
    assert aioice.ice.get_host_addresses is original
    assert "127.0.0.1" not in original(True, False)  # why the switch exists


def test_faster_whisper_pads_through_the_wrapped_helper() -> None:
    from faster_whisper import transcribe

    pad_whisper_input(lambda length: 1000)  # what the cascade's ASR installs, once
    pad_whisper_input(lambda length: 5)  # a second call changes nothing
    assert getattr(transcribe.pad_or_trim, "omnicall_padding", False)
    mel = np.ones((80, 250), np.float32)
    assert transcribe.pad_or_trim(mel).shape[-1] in (1000, 3000)  # the first wrap's frames
