import av
import numpy as np
import pytest
from aiortc.sdp import SessionDescription

import omnicall.media.opus_encoder as opus_encoder
from omnicall.app.app_state import CALLS_KEY
from omnicall.client import Microphone, connect
from omnicall.media.clock import ManualClock
from omnicall.media.negotiated import audio_codecs
from omnicall.media.opus_encoder import SILENCE_SETTLE_FRAMES, EncodedAudioTrack, SpeechOpusEncoder
from omnicall.media.paced_track import PacedAudioTrack
from omnicall.media.playout_queue import PlayoutQueue
from tests.test_negotiated import ANSWER_SDP
from tests.utils import running_server, tone, wait_for


def frames_of(samples: np.ndarray) -> list[np.ndarray]:
    return [samples[i:i + 960] for i in range(0, len(samples) - 959, 960)]


def decode(packets: list[av.Packet]) -> np.ndarray:
    decoder = av.CodecContext.create("libopus", "r")
    decoder.format, decoder.layout, decoder.sample_rate = "s16", "stereo", 48_000
    return np.concatenate([f.to_ndarray().reshape(-1)[::2] for p in packets
                           for f in decoder.decode(p)])


def test_speech_round_trips_mono_one_packet_a_frame_with_the_frames_pts() -> None:
    encoder = SpeechOpusEncoder()
    frames = frames_of(tone(440, 1.0, rate=48_000))
    packets = [encoder.encode(f, 5_000 + i * 960) for i, f in enumerate(frames)]
    assert [p.pts for p in packets] == [5_000 + i * 960 for i in range(len(frames))]
    assert all(p.time_base == encoder.time_base for p in packets)
    assert sum(p.size for p in packets) * 8 < 48_000  # ~32 kbps, not aiortc's 96
    out = decode(packets)[4800:]
    spectrum = np.abs(np.fft.rfft(out.astype(float)))
    assert abs(np.argmax(spectrum) * 48_000 / len(out) - 440) < 3
    assert np.abs(out).max() > 0.2 * 32767
    with pytest.raises(ValueError):
        encoder.encode(np.zeros(480, np.int16), 0)


def test_reused_silence_is_exactly_what_the_encoder_would_send(
        monkeypatch: pytest.MonkeyPatch) -> None:
    speech = frames_of(tone(300, 0.4, rate=48_000))
    stream = [*speech, *[np.zeros(960, np.int16)] * 60, *speech]
    cached = SpeechOpusEncoder()
    got = [bytes(cached.encode(f, i * 960)) for i, f in enumerate(stream)]
    assert 0 < cached.reused_silence < 60 - SILENCE_SETTLE_FRAMES
    monkeypatch.setattr(opus_encoder, "SILENCE_SETTLE_FRAMES", 10**9)
    every = SpeechOpusEncoder()
    want = [bytes(every.encode(f, i * 960)) for i, f in enumerate(stream)]
    assert every.reused_silence == 0
    assert got[:80] == want[:80]  # the silence itself is byte-identical
    # the speech after it differs only by the encoder's analysis history, not audibly
    a, b = (decode([av.Packet(x) for x in packets]).astype(float) for packets in (got, want))
    assert not a[50 * 960:78 * 960].any()
    snr_db = 10 * np.log10(np.sum(b ** 2) / max(np.sum((a - b) ** 2), 1.0))
    print(f"decoded streams differ at {snr_db:.1f} dB SNR")
    assert snr_db > 30


async def test_opus_calls_get_our_packets_and_pcmu_calls_aiortcs_frames() -> None:
    async with running_server() as (url, app):
        registry = app[CALLS_KEY]
        for codec, ours, rate in (("audio/opus", True, 48_000), ("audio/PCMU", False, 8_000)):
            call = await connect(url, Microphone(tone(500, 4, rate=48_000)),
                                        audio_codec=codec)
            session = registry.sessions[call.session_id]
            assert session.output.send_track.encodes is ours
            # and the caller's Opus is decoded on the loop (media.opus_receive), PCMU by aiortc
            assert (session.opus_in is not None) is ours
            # the echo comes back in either case, as a 500 Hz tone (PCMU decodes at 8 kHz)
            await wait_for(lambda c=call, r=rate: len(c.received_audio()) > 2 * r,
                           timeout_s=10)
            out = call.received_audio()[-rate // 2:].astype(float)
            spectrum = np.abs(np.fft.rfft(out))
            assert abs(np.argmax(spectrum) * rate / len(out) - 500) < 5
            if ours:
                assert session.opus_in.decoded > 50 and session.opus_in.errors == 0
            await call.close()
            await wait_for(lambda: len(registry) == 0, timeout_s=10)


def test_a_missing_audio_section_leaves_encoding_to_aiortc() -> None:
    track = EncodedAudioTrack(PacedAudioTrack(PlayoutQueue(), ManualClock()))
    track.use_codec([])
    assert not track.encodes
    track.use_codec(audio_codecs(SessionDescription.parse(ANSWER_SDP), "0"))
    assert track.encodes  # opus first in that answer
    track.stop()


def test_reported_loss_sets_the_encoders_expected_loss_and_decays() -> None:
    encoder = SpeechOpusEncoder()
    assert encoder.expect_loss(None) == 0
    assert encoder.expect_loss(0.05) == 5
    assert encoder.expect_loss(0.0) == 4  # a quiet report: 5 % x 0.8
    assert encoder.expect_loss(0.6) == 25  # capped
    for _ in range(29):
        encoder.expect_loss(0.0)
    assert encoder.expect_loss(0.0) == 0


def test_fec_costs_bits_only_once_loss_is_expected() -> None:
    from tests.utils import piper_speech

    audio = piper_speech("How far is it to the airport from here?", rate=48_000)
    frames = [audio[i:i + 960] for i in range(0, len(audio) - 959, 960)]

    def size(loss: float) -> int:
        encoder = SpeechOpusEncoder()
        encoder.expect_loss(loss)
        return sum(len(bytes(encoder.encode(f, i * 960))) for i, f in enumerate(frames))

    lossless, lossy = size(0.0), size(0.1)
    assert lossy != lossless  # the FEC copy is inside the 32 kbps budget, not on top
    assert lossy < lossless * 1.25


def test_speech_is_encoded_as_ffmpeg_s_libopusenc_encodes_it() -> None:
    """Calling libopus directly (for FEC and the expected loss) keeps the packets the PyAV
    encoder made before at no loss, byte for byte: the same bitrate, complexity and free VBR
    (libopus's own default, constrained VBR, spent ~25% fewer bits on speech)."""
    from fractions import Fraction

    from tests.utils import piper_speech

    speech = piper_speech("Once upon a time a brave knight rode out.", rate=48_000,
                          lead_s=0.0, tail_s=0.0)
    speech = np.concatenate([speech, np.zeros(-len(speech) % 960, np.int16)])
    ffmpeg = av.CodecContext.create("libopus", "w")
    ffmpeg.bit_rate, ffmpeg.format, ffmpeg.layout = opus_encoder.SPEECH_BIT_RATE, "s16", "mono"
    ffmpeg.sample_rate, ffmpeg.time_base = 48_000, Fraction(1, 48_000)
    ffmpeg.options = {"application": "audio",
                      "compression_level": str(opus_encoder.COMPLEXITY)}
    ours = SpeechOpusEncoder()
    for k in range(len(speech) // 960):
        block = speech[k * 960:(k + 1) * 960]
        frame = av.AudioFrame.from_ndarray(block.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate, frame.pts = 48_000, k * 960
        (theirs,) = ffmpeg.encode(frame)
        assert bytes(ours.encode(block, k * 960)) == bytes(theirs), k
