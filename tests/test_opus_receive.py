import numpy as np

from omnicall.media.opus_encoder import SpeechOpusEncoder
from omnicall.media.opus_receive import OpusPacketDecoder
from tests.utils import piper_speech, tone


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


def test_a_lost_packet_is_filled_at_its_own_pts_so_nothing_shifts() -> None:
    decoder = OpusPacketDecoder()
    packets = encoded(0.1)
    frames = [f for i, p in enumerate(packets) if i != 2 for f in decoder.decode(p, i * 960)]
    assert [f.pts for f in frames] == [0, 960, 1920, 2880, 3840]
    assert all(f.samples == 960 for f in frames)
    assert decoder.recovered == 1 and decoder.concealed == 0


def test_a_burst_is_concealed_then_recovered_and_a_long_gap_left_to_ingest() -> None:
    decoder = OpusPacketDecoder()
    packets = encoded(0.6)
    kept = [i for i in range(len(packets)) if i not in (3, 4, 5) and not 10 <= i < 20]
    pts = [f.pts for i in kept for f in decoder.decode(packets[i], i * 960)]
    # 3-5 lost: 3 and 4 concealed, 5 from packet 6's FEC; 10-19 (200 ms): left as a gap
    assert pts == [i * 960 for i in range(10)] + [i * 960 for i in range(20, len(packets))]
    assert decoder.concealed == 2 and decoder.recovered == 1


def speech_packets(loss_percent: int) -> tuple[np.ndarray, list[bytes]]:
    encoder = SpeechOpusEncoder()
    encoder.expect_loss(loss_percent / 100)
    audio = piper_speech("Please set a timer for ten minutes and tell me when it rings.",
                         rate=48_000)
    n = len(audio) // 960
    return audio[:n * 960], [bytes(encoder.encode(audio[i * 960:(i + 1) * 960], i * 960))
                             for i in range(n)]


def received(packets: list[bytes], lost: set[int]) -> np.ndarray:
    decoder = OpusPacketDecoder()
    frames = [f for i, p in enumerate(packets) if i not in lost
              for f in decoder.decode(p, i * 960)]
    assert [f.pts for f in frames] == [i * 960 for i in range(len(packets))]
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(float)


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(reference ** 2) / max(np.sum((reference - test) ** 2), 1)))


def test_in_band_fec_recovers_lost_speech_better_than_concealment() -> None:
    """Every 7th packet lost (14 %): with FEC in the stream the lost packets come back
    from the next one; without it libopus can only conceal them."""
    _, with_fec = speech_packets(loss_percent=15)
    _, without = speech_packets(loss_percent=0)
    lost = {i for i in range(len(with_fec)) if i % 7 == 3}
    clean_fec, clean = received(with_fec, set()), received(without, set())
    fec = snr_db(clean_fec, received(with_fec, lost))
    plc = snr_db(clean, received(without, lost))
    print(f"lost 1 in 7: {fec:.1f} dB with FEC, {plc:.1f} dB concealed")
    assert fec > plc + 3


def test_garbage_and_empty_payloads_are_skipped_and_decoding_goes_on() -> None:
    decoder = OpusPacketDecoder()
    assert list(decoder.decode(b"", 0)) == []  # would be end-of-stream to libavcodec
    assert list(decoder.decode(b"\xff\xff\xff\xff", 960)) == []
    assert decoder.errors == 1
    frames = list(decoder.decode(encoded(0.02)[0], 1920))
    # pts count from the first timestamp that reached the decoder (960)
    assert len(frames) == 1 and frames[0].samples == 960 and frames[0].pts == 960
