from fractions import Fraction

import numpy as np

from omnicall.media.aligner import Aligner, MediaUnit
from omnicall.media.audio_ring import AudioRing
from omnicall.media.clock import ManualClock
from omnicall.media.ingest import AudioIngestCore, IngestPump, VideoIngestCore
from omnicall.media.resample import make_audio_frame
from omnicall.media.video_ring import VideoRing
from tests.utils import stereo_frames, tone, video_frame


def test_browser_frames_become_80ms_units() -> None:
    ring = AudioRing(capacity_frames=100)
    core = AudioIngestCore(ring)
    made = sum(core.feed(f) for f in stereo_frames(tone(440, 1.0, rate=48_000)))
    assert made == 12 and len(ring) == 12  # 1 s = 12.5 frames
    assert ring.clock_samples == 16_000
    assert core.rejected_frames == 0 and core.gap_samples == 0


def test_frames_complete_on_packet_boundaries() -> None:
    # the resampler's held-back filter delay is padded once, so the 4th 20 ms packet (not
    # the 5th) completes the first 80 ms frame
    core = AudioIngestCore(AudioRing(capacity_frames=10))
    made = [core.feed(f) for f in stereo_frames(tone(440, 0.16, rate=48_000))]
    assert made == [0, 0, 0, 1, 0, 0, 0, 1]


def test_lost_packets_are_filled_on_the_clock() -> None:
    ring = AudioRing(capacity_frames=100)
    core = AudioIngestCore(ring)
    frames = stereo_frames(tone(440, 1.0, rate=48_000))
    for i, f in enumerate(frames):
        if i not in (10, 11, 12):  # 60 ms lost
            core.feed(f)
    assert core.gap_samples == 960
    assert ring.clock_samples == 16_000  # clock stays on real time


def test_a_gap_filled_with_silence_is_marked_filled_and_real_audio_is_not() -> None:
    """300 ms lost (a loss burst longer than the decoder conceals): ingest fills it with
    silence from pts, and the units say how much of each is fill, so the turn detector does
    not take it for the caller going quiet; the audio that came is never marked."""
    ring = AudioRing(capacity_frames=100)
    core = AudioIngestCore(ring)
    units: list[MediaUnit] = []
    pump = IngestPump(core, None, Aligner(ring, VideoRing()),
                      lambda unit: units.append(unit) is None, ManualClock())
    for i, f in enumerate(stereo_frames(tone(440, 1.0, rate=48_000))):
        if not 10 <= i < 25:  # packets 10-24 (200-500 ms) lost
            pump.feed_audio(f)
    assert core.gap_samples == 4800
    # 200-500 ms on the 80 ms grid: the end of unit 2, units 3-5, the start of unit 6
    assert [u.filled for u in units] == [0, 0, 640, 1280, 1280, 1280, 320, 0, 0, 0, 0, 0]
    assert all(np.abs(u.audio).max() > 5000 for u in units if u.filled < len(u.audio))
    assert all(not u.audio.any() for u in units if u.filled == len(u.audio))
    # a gap too long to fill (a resync) marks nothing either
    ring = AudioRing(capacity_frames=100)
    core = AudioIngestCore(ring)
    frames = stereo_frames(tone(440, 0.4, rate=48_000))
    later = stereo_frames(tone(440, 0.4, rate=48_000), start_pts=48_000 * 5)
    for f in [*frames, *later]:
        core.feed(f)
    marked = []
    while (frame := ring.read()) is not None:
        marked.append(frame.filled)
    assert core.resyncs == 1 and len(marked) == 10 and not any(marked)


def test_long_gap_resyncs_instead_of_filling() -> None:
    core = AudioIngestCore(AudioRing(capacity_frames=100))
    frames = stereo_frames(tone(440, 0.1, rate=48_000))
    core.feed(frames[0])
    later = stereo_frames(tone(440, 0.1, rate=48_000), start_pts=48_000 * 5)
    core.feed(later[0])
    assert core.resyncs == 1 and core.gap_samples == 0


def test_huge_and_odd_frames_are_refused_not_fatal() -> None:
    ring = AudioRing(capacity_frames=100)
    core = AudioIngestCore(ring)
    assert core.feed(make_audio_frame(np.zeros(48_000 * 3, np.int16), 48_000)) == 0
    assert core.feed(make_audio_frame(np.zeros(100, np.int16), 2_000)) == 0
    assert core.rejected_frames == 2
    # an odd but valid rate is accepted
    core.feed(make_audio_frame(tone(440, 0.5, rate=22_050), 22_050))
    assert ring.clock_samples > 7000


def test_video_sampled_at_fps_onto_audio_clock_and_resized() -> None:
    ring = VideoRing(depth=8)
    audio_clock = Fraction(2)  # audio already 2 s in when video starts
    core = VideoIngestCore(ring, fps=2, size=(64, 48), audio_clock=lambda: audio_clock)
    kept = [core.feed(video_frame(pts=i * 3000)) for i in range(60)]  # 2 s at 30 fps
    units = [k for k in kept if k is not None]
    assert len(units) == 4
    assert units[0].image.shape == (48, 64, 3)
    assert [u.audio_index for u in units] == [25, 31, 37, 43]  # 2.0, 2.5, 3.0, 3.5 s
    assert core.feed(video_frame(width=8000, height=6000)) is None
    assert core.rejected_frames == 1


def test_video_fit_keeps_aspect_and_never_upscales() -> None:
    core = VideoIngestCore(VideoRing(depth=8), fps=2, size=(640, 480),
                           audio_clock=lambda: Fraction(0))
    wide = core.feed(video_frame(width=1280, height=720, pts=0))
    assert wide is not None and wide.image.shape == (360, 640, 3)  # 16:9 kept
    small = core.feed(video_frame(width=320, height=240, pts=90_000))
    assert small is not None and small.image.shape == (240, 320, 3)  # not upscaled


def test_pump_back_pressure_holds_units_in_the_ring() -> None:
    accept = {"ok": False}
    got: list[MediaUnit] = []

    def sink(unit: MediaUnit) -> bool:
        if accept["ok"]:
            got.append(unit)
        return accept["ok"]

    ring = AudioRing(capacity_frames=100)
    pump = IngestPump(AudioIngestCore(ring), None, Aligner(ring, VideoRing()), sink,
                      ManualClock())
    ring.write(np.zeros(1280 * 3, np.int16))
    pump.drain()
    assert pump.refusals == 1 and not got and len(ring) == 2
    accept["ok"] = True
    pump.drain()
    assert [u.index for u in got] == [0, 1, 2] and pump.units_out == 3


def test_unreadable_video_frame_is_skipped() -> None:
    class Corrupt:
        width, height, pts, time_base = 640, 480, 0, Fraction(1, 90_000)

        def to_ndarray(self, **_: object) -> None:
            raise ValueError("corrupt picture")

    ring = VideoRing(depth=8)
    core = VideoIngestCore(ring, fps=2, size=(64, 48), audio_clock=lambda: Fraction(0))
    assert core.feed(Corrupt()) is None  # type: ignore[arg-type]
    assert core.rejected_frames == 1 and len(ring) == 0
    assert core.feed(video_frame(pts=90_000)) is not None  # the next frame still works


def test_the_forming_units_audio_is_offered_ahead_only_when_nothing_waits_and_it_may() -> None:
    """Every 20 ms packet's audio goes ahead while the engine took every unit before it
    and ``may_ahead`` (no echo canceller at work); a unit held back by a full engine, or
    the canceller at work, offers nothing (the unit brings it)."""
    accept = {"ok": True}
    may = {"ok": True}
    units: list[MediaUnit] = []
    ahead: list[tuple[int, int, int]] = []

    def sink(unit: MediaUnit) -> bool:
        if accept["ok"]:
            units.append(unit)
        return accept["ok"]

    ring = AudioRing(capacity_frames=100)
    pump = IngestPump(AudioIngestCore(ring), None, Aligner(ring, VideoRing()), sink,
                      ManualClock(), ahead=lambda i, o, s: ahead.append((i, o, len(s))),
                      may_ahead=lambda: may["ok"])
    frames = list(stereo_frames(tone(440, 0.32, rate=48_000)))  # 16 packets of 20 ms
    for frame in frames[:8]:
        pump.feed_audio(frame)
    assert [u.index for u in units] == [0, 1]
    # packets 1-3 of each unit go ahead (the 4th completes it); the first packet's
    # resampler delay is padded in, so unit 0's first offer is a whole packet too
    assert ahead == [(0, 0, 320), (0, 320, 320), (0, 640, 320),
                     (1, 0, 320), (1, 320, 320), (1, 640, 320)]
    accept["ok"] = False  # the engine is behind: unit 2 waits, so nothing goes ahead
    for frame in frames[8:12]:
        pump.feed_audio(frame)
    pump.feed_audio(frames[12])
    assert len(ahead) == 9 and pump.refusals > 0
    accept["ok"], may["ok"] = True, False
    pump.drain()
    for frame in frames[13:16]:
        pump.feed_audio(frame)
    assert len(ahead) == 9 and [u.index for u in units] == [0, 1, 2, 3]
