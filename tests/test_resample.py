import numpy as np
import pytest

from omnicall.media.resample import (
    AudioConverter,
    StreamConverter,
    UnsupportedAudioError,
    make_audio_frame,
)
from tests.utils import stereo_frames, tone


def test_stereo_48k_to_mono_16k_streaming_equals_batch() -> None:
    mono = tone(440, 1.0, rate=48_000)
    streaming = AudioConverter(16_000)
    out = np.concatenate([streaming.convert(f) for f in stereo_frames(mono)]
                         + [streaming.flush()])
    batch = AudioConverter(16_000)
    whole = np.concatenate([batch.convert(make_audio_frame(np.repeat(mono, 2), 48_000,
                                                           layout="stereo")), batch.flush()])
    assert len(out) == len(whole) == 16_000
    assert np.array_equal(out, whole)


def test_first_call_holds_back_filter_history() -> None:
    conv = AudioConverter(16_000)
    sizes = [len(conv.convert(f)) for f in stereo_frames(tone(440, 0.1, rate=48_000))]
    assert sizes[0] == 304 and all(s == 320 for s in sizes[1:])


def test_downmix_keeps_the_tone() -> None:
    mono = tone(1000, 0.5, rate=48_000, amp=0.5)
    conv = AudioConverter(16_000)
    out = np.concatenate([conv.convert(f) for f in stereo_frames(mono)])
    spectrum = np.abs(np.fft.rfft(out.astype(float)))
    assert abs(np.argmax(spectrum) * 16_000 / len(out) - 1000) < 5
    assert np.abs(out).max() > 0.3 * 32767


def test_odd_rate_change_rebuilds() -> None:
    conv = AudioConverter(16_000)
    conv.convert(stereo_frames(tone(440, 0.04, rate=48_000))[0])
    out = conv.convert(make_audio_frame(tone(440, 0.1, rate=11_025), 11_025))
    assert conv.rebuilds == 1 and len(out) > 0


@pytest.mark.parametrize("rate", [1_000, 1_000_000])
def test_absurd_rates_refused(rate: int) -> None:
    with pytest.raises(UnsupportedAudioError):
        AudioConverter(16_000).convert(make_audio_frame(np.zeros(100, np.int16), rate))


def test_upsample_24k_to_48k_length() -> None:
    conv = AudioConverter(48_000)
    out = np.concatenate([conv.convert_array(tone(300, 0.08, rate=24_000), 24_000)
                          for _ in range(10)] + [conv.flush()])
    assert len(out) == 10 * 3840


def test_stream_converter_gives_each_chunk_its_whole_share_and_equals_batch() -> None:
    audio = tone(300, 0.4, rate=24_000)
    stream = StreamConverter(48_000)
    chunks = [stream.convert(audio[i:i + 1920], 24_000) for i in range(0, len(audio), 1920)]
    assert [len(c) for c in chunks] == [3840] * 5  # the filter delay is paid once, up front
    tail = stream.flush()
    batch = StreamConverter(48_000)
    whole = np.concatenate([batch.convert(audio, 24_000), batch.flush()])
    assert np.array_equal(np.concatenate([*chunks, tail]), whole)
    # after a flush the next chunk starts a new stream, primed again
    assert len(stream.convert(audio[:1920], 24_000)) == 3840
