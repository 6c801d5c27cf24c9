"""Integration: a real aiortc client <-> the server with the echo engine."""

from __future__ import annotations

import asyncio

import numpy as np

from app.server import REGISTRY_KEY
from tests.utils import ColorVideoTrack, SignalTrack, connect_client, running_server, tone, wait_for


async def test_echo_call_round_trip_with_video() -> None:
    signal = tone(440, 3.0, rate=48_000)
    async with running_server() as (url, app):
        call = await connect_client(url, SignalTrack(signal), ColorVideoTrack())
        registry = app[REGISTRY_KEY]
        await wait_for(lambda: len(registry) == 1)
        session = next(iter(registry.sessions.values()))
        await wait_for(lambda: session.pump.units_out >= 20, timeout_s=15)
        await wait_for(lambda: session.video_ingest.sampled_frames >= 2, timeout_s=10)
        # the page-side channel receives stats
        await wait_for(lambda: any(m["type"] == "stats" for m in call.messages), timeout_s=5)
        await asyncio.sleep(1.0)
        audio = call.received_audio()
        await call.close()
        await wait_for(lambda: len(registry) == 0, timeout_s=10)
    assert session.engine_session.video_units >= 2  # type: ignore[attr-defined]
    # the echo came back: a 440 Hz tone with real energy
    loud = np.abs(audio.astype(np.int32)) > 3000
    assert loud.sum() > 48_000 * 0.5, f"echo too quiet: {loud.sum()} loud samples"
    spectrum = np.abs(np.fft.rfft(audio[-48_000:].astype(np.float64)))
    peak_hz = np.argmax(spectrum) * 48_000 / 48_000
    assert abs(peak_hz - 440) < 10, peak_hz
