import numpy as np

from omnicall.media.opus_encoder import SpeechOpusEncoder
from omnicall.media.opus_receive import OpusPacketDecoder
from tests.utils import tone


def encoded(seconds: float, freq_hz: float = 440) -> list[bytes]:
    encoder = SpeechOpusEncoder()
    audio = tone(freq_hz, seconds, rate=48_000)
    return [bytes(encoder.encode(audio[i:i + 960], i)) for i in range(0, len(audio) - 959, 960)]


def test_decodes_mono_48k_with_rtp_timestamps_as_pts_across_the_wrap() -> None:
    decoder = OpusPacketDecoder()
    start = (1 << 32) - 5 * 960  # the 32-bit RTP clock wraps after 5 packets
    frames = []
    for i, payload in enumerate(encoded(0.5)):
        frames += decoder.decode(payload, (start + i * 960) % (1 << 32))
    assert [f.pts for f in frames] == [i * 960 for i in range(25)]
    assert all(f.sample_rate == 48_000 and f.layout.name == "mono" for f in frames)
    out = np.concatenate([f.to_ndarray().reshape(-1) for f in frames])[4800:].astype(float)
    spectrum = np.abs(np.fft.rfft(out))
    assert abs(np.argmax(spectrum) * 48_000 / len(out) - 440) < 5
    assert decoder.decoded == 25 and decoder.errors == 0


def test_a_lost_packet_leaves_a_pts_gap_for_ingest_to_fill() -> None:
    decoder = OpusPacketDecoder()
    packets = encoded(0.1)
    pts = [f.pts for i, p in enumerate(packets) if i != 2 for f in decoder.decode(p, i * 960)]
    assert pts == [0, 960, 2880, 3840]


def test_garbage_and_empty_payloads_are_skipped_and_decoding_goes_on() -> None:
    decoder = OpusPacketDecoder()
    assert list(decoder.decode(b"", 0)) == []  # would be end-of-stream to libavcodec
    assert list(decoder.decode(b"\xff\xff\xff\xff", 960)) == []
    assert decoder.errors == 1
    frames = list(decoder.decode(encoded(0.02)[0], 1920))
    # pts count from the first timestamp that reached the decoder (960)
    assert len(frames) == 1 and frames[0].samples == 960 and frames[0].pts == 960
