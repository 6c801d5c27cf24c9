from omnicall.engine.conversation.turns import TurnConfig, TurnDetector


def run(det: TurnDetector, probs: list[float]) -> list[tuple[int, str]]:
    return [(i, s) for i, p in enumerate(probs) if (s := det.feed(p)) is not None]


def test_start_pause_resume_end() -> None:
    det = TurnDetector(TurnConfig(min_speech_ms=96, hangover_ms=320, pause_ms=64, chunk_ms=32))
    probs = [0.1] * 3 + [0.9] * 10 + [0.1] * 4 + [0.9] * 5 + [0.1] + [0.9] + [0.1] * 12
    # a one-chunk gap between words is not a pause (only a lull: every silence in a turn
    # starts with one, and a pause belongs to the latest); the hangover counts from its first
    # chunk
    assert run(det, probs) == [(5, "speech_start"), (13, "lull"), (14, "pause"),
                               (17, "resume"), (22, "lull"), (24, "lull"), (25, "pause"),
                               (33, "end_of_turn")]
    assert not det.in_turn


def test_short_blips_do_not_start_a_turn() -> None:
    det = TurnDetector(TurnConfig(min_speech_ms=160, chunk_ms=32))
    assert run(det, [0.9, 0.9, 0.1, 0.9, 0.9, 0.9, 0.1] * 3) == []


def test_very_long_utterance_is_cut() -> None:
    det = TurnDetector(TurnConfig(min_speech_ms=32, max_turn_ms=320, chunk_ms=32))
    # cut at 320 ms; the speech that goes on starts a new turn
    assert run(det, [0.9] * 12) == [(0, "speech_start"), (9, "end_of_turn"),
                                    (10, "speech_start")]


def test_hysteresis_between_thresholds_keeps_the_pause() -> None:
    det = TurnDetector(TurnConfig(min_speech_ms=32, hangover_ms=128, pause_ms=32, chunk_ms=32))
    # 0.4 is between end (0.35) and start (0.5): it neither ends the pause nor extends it
    assert run(det, [0.9, 0.2, 0.4, 0.2, 0.2, 0.2]) == [(0, "speech_start"), (1, "pause"),
                                                        (5, "end_of_turn")]


def test_an_end_of_turn_model_shortens_or_lengthens_the_pause_then_speech_restores_it() -> None:
    config = TurnConfig(min_speech_ms=32, hangover_ms=320, pause_ms=64, chunk_ms=32,
                        finished_ms=128, unfinished_ms=640)
    det = TurnDetector(config)
    assert run(det, [0.9, 0.1, 0.1]) == [(0, "speech_start"), (1, "lull"), (2, "pause")]
    det.judge(0.9)  # sounds finished: the turn ends after 128 ms of silence, not 320
    assert run(det, [0.1] * 3) == [(1, "end_of_turn")]
    assert det.hangover_ms == 320  # the next turn starts from the fallback

    assert run(det, [0.9, 0.1, 0.1]) == [(0, "speech_start"), (1, "lull"), (2, "pause")]
    det.judge(0.2)  # sounds unfinished: waits 640 ms (the fixed 320 would have cut here)
    assert run(det, [0.1] * 10) == []
    assert run(det, [0.9]) == [(0, "resume")]  # the speaker goes on
    assert det.hangover_ms == 320  # ... and the next pause is judged afresh
    assert run(det, [0.1] * 10) == [(0, "lull"), (1, "pause"), (9, "end_of_turn")]


def test_a_verdict_outside_a_pause_changes_nothing() -> None:
    det = TurnDetector(TurnConfig(min_speech_ms=32, chunk_ms=32))
    det.judge(0.99)  # a late verdict, after the turn ended or before it paused
    assert det.hangover_ms == 400
    run(det, [0.9, 0.9])
    det.judge(0.99)
    assert det.hangover_ms == 400


def test_a_filled_loss_burst_neither_pauses_nor_ends_the_turn() -> None:
    config = TurnConfig(min_speech_ms=96, hangover_ms=320, pause_ms=64, chunk_ms=32)
    speech, burst = [0.9] * 10, [0.0] * 20  # 640 ms of silence: twice the hangover
    # the same 640 ms taken for silence ends the turn (what a loss burst did before)
    assert run(TurnDetector(config), speech + burst) == [(2, "speech_start"), (10, "lull"),
                                                         (11, "pause"), (19, "end_of_turn")]
    # marked as filled (no audio came), it is neither: the turn goes on, and ends on the
    # caller's own silence after it
    det = TurnDetector(config)
    signals = [(i, s) for i, (p, f) in enumerate(
        [(p, False) for p in speech] + [(p, True) for p in burst]
        + [(0.9, False)] * 3 + [(0.1, False)] * 12) if (s := det.feed(p, f)) is not None]
    assert signals == [(2, "speech_start"), (33, "lull"), (34, "pause"), (42, "end_of_turn")]


def test_filled_chunks_start_nothing_and_still_count_towards_the_longest_turn() -> None:
    det = TurnDetector(TurnConfig(min_speech_ms=32, max_turn_ms=320, chunk_ms=32))
    assert [det.feed(0.9, filled=True) for _ in range(5)] == [None] * 5 and not det.in_turn
    assert det.feed(0.9) == "speech_start"
    assert [s for _ in range(12) if (s := det.feed(0.0, filled=True))] == ["end_of_turn"]


def test_onset_marks_a_sound_on_its_way_to_a_speech_start_and_clears_when_it_stops() -> None:
    det = TurnDetector(TurnConfig(min_speech_ms=160, onset_ms=64, chunk_ms=32))
    onsets = []
    for p in [0.1, 0.9, 0.9, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]:
        signal = det.feed(p)
        onsets.append((det.onset, signal))
    assert [o for o, _ in onsets] == [False, False, True, True, False, False, True, True, True,
                                      False, False]
    assert onsets[9][1] == "speech_start"  # the turn took over from the onset


def test_onset_off() -> None:
    det = TurnDetector(TurnConfig(min_speech_ms=160, onset_ms=0, chunk_ms=32))
    assert not any(det.feed(0.9) is None and det.onset for _ in range(6))
    assert det.in_turn


def test_every_silence_in_a_turn_starts_with_a_lull_and_a_pause_belongs_to_the_latest() -> None:
    det = TurnDetector(TurnConfig(min_speech_ms=32, hangover_ms=320, pause_ms=96, chunk_ms=32))
    # a gap between words: a lull and no pause; a longer one: a lull, then its pause 64 ms
    # later; the hysteresis band (0.35-0.5) is speech before the pause, so it ends a silence
    probs = [0.9, 0.2, 0.9, 0.2, 0.2, 0.4, 0.2, 0.2, 0.2, 0.4, 0.2]
    assert run(det, probs) == [(0, "speech_start"), (1, "lull"), (3, "lull"), (6, "lull"),
                               (8, "pause")]
    # none before the turn, nor while it is paused (the 0.4 at 9 keeps the pause)
    assert run(TurnDetector(TurnConfig(min_speech_ms=96, chunk_ms=32)), [0.9, 0.1] * 4) == []
    # a pause as long as one chunk comes without a lull (nothing would be gained by one)
    det = TurnDetector(TurnConfig(min_speech_ms=32, pause_ms=32, chunk_ms=32))
    assert run(det, [0.9, 0.1]) == [(0, "speech_start"), (1, "pause")]


def test_a_turn_is_quiet_from_its_lull_until_the_speech_resumes_or_the_turn_ends() -> None:
    det = TurnDetector(TurnConfig(min_speech_ms=32, hangover_ms=320, pause_ms=96, chunk_ms=32))
    quiet = []
    for prob in [0.1, 0.9, 0.2, 0.9, 0.2, 0.2, 0.2, 0.4, 0.9] + [0.1] * 10:
        det.feed(prob)
        quiet.append(det.quiet)
    # not before the turn nor while speaking; from each lull, through its pause (the 0.4
    # keeps it), until the speech resumes; not after the end of the turn
    assert quiet == [False, False, True, False, True, True, True, True, False,
                     *[True] * 9, False]
