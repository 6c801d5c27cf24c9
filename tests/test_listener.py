"""The listener every engine shares: VAD -> turn signals -> hooks, the preroll, the echo
warm-up, the end-of-turn model's verdict at each pause, and when the speech ended. Fed 80 ms
units through a scripted VAD, on a manual clock."""

from __future__ import annotations

import numpy as np
import pytest

from omnicall.engine.conversation.backchannels import SURE_LOGPROB, UNSURE_LONG_S, Heard
from omnicall.engine.conversation.listener import Listener, ListenRuntime
from omnicall.engine.conversation.settings import TurnSettings
from omnicall.engine.conversation.turns import PREROLL_UNITS
from omnicall.media.clock import ManualClock
from tests.utils import ScriptedVad

UNIT = 1280  # 80 ms at 16 kHz: 2.5 VAD chunks


class Recorder:
    """The session's hooks, and the call's replies (a reply sounding since
    ``sounding_since``, cut by a barge-in)."""

    def __init__(self, clock: ManualClock, sounding_since: float | None = None) -> None:
        self.clock = clock
        self.since = sounding_since
        self.calls: list[tuple[str, float]] = []
        self.lulls: list[float] = []  # on_lull (apart: every silence in a turn has one)
        self.units_in_turn = 0
        self.queued = False  # a reply is live but has not sounded (pending)

    def sounding_since(self) -> float | None:
        return self.since

    def pending(self) -> bool:
        return self.queued

    async def barge_in(self) -> bool:
        cut = self.since is not None or self.queued
        self.since, self.queued = None, False
        if cut:
            self.calls.append(("barge_in", self.clock.now()))
        return cut

    async def on_speech_start(self) -> None:
        self.calls.append(("speech_start", self.clock.now()))

    async def on_audio(self, audio: np.ndarray) -> None:
        self.units_in_turn += 1

    async def on_lull(self) -> None:
        self.lulls.append(self.clock.now())

    async def on_pause(self) -> None:
        self.calls.append(("pause", self.clock.now()))

    async def on_resume(self) -> None:
        self.calls.append(("resume", self.clock.now()))

    async def on_end_of_turn(self, speech_end_s: float) -> None:
        self.calls.append(("end_of_turn", speech_end_s))

    async def hear_words(self, samples: np.ndarray) -> Heard | None:
        return None  # the sound interrupts

    def addressed(self, since_s: float) -> bool:
        return True


def runtime(clock: ManualClock, **settings: object) -> ListenRuntime:
    rt = ListenRuntime(TurnSettings(**settings), clock)  # type: ignore[arg-type]
    rt._vad = ScriptedVad()  # type: ignore[assignment]
    return rt


async def feed(listener: Listener, clock: ManualClock, units: list[float]) -> None:
    """One unit per entry: its speech level (the scripted VAD's probability); 80 ms each."""
    for level in units:
        await listener.feed(np.full(UNIT, int(level * 10_000), np.int16))
        await clock.advance(0.08)


@pytest.mark.parametrize(("speech_units", "first_silent_sample"), [
    (10, 23_040),  # the speech ends on a chunk boundary (45 x 512)
    (11, 24_576),  # in the middle of chunk 47: the next chunk is the first silent one
])
async def test_the_speech_end_is_where_the_first_silent_chunk_began(
        speech_units: int, first_silent_sample: int) -> None:
    """To the sample: not moved by where the pausing chunk fell in its 80 ms unit (the pause
    is decided only when the unit holding that chunk came, up to 64 ms after it)."""
    clock = ManualClock(100.0)
    hooks = Recorder(clock)
    listener = Listener(runtime(clock, hangover_ms=400), hooks, "s")
    await feed(listener, clock, [0.0] * 8 + [0.9] * speech_units + [0.0] * 10)
    assert [c for c, _ in hooks.calls] == ["speech_start", "pause", "end_of_turn"]
    # unit k is fed at 100 + 0.08 k and ends at sample (k + 1) * 1280: sample s is heard at
    # 100 + s / 16000 - 0.08 on this clock
    assert hooks.calls[-1][1] == pytest.approx(100 + first_silent_sample / 16_000 - 0.08)


async def test_signals_reach_the_hooks_in_order_with_the_preroll_and_the_speech_end() -> None:
    clock = ManualClock(100.0)
    rt = runtime(clock, hangover_ms=400)
    hooks = Recorder(clock)
    listener = Listener(rt, hooks, "s")
    await feed(listener, clock, [0.0] * 8 + [0.9] * 10)
    assert [c for c, _ in hooks.calls] == ["speech_start"]
    assert listener.in_turn and len(listener.utterance) > PREROLL_UNITS  # preroll first
    assert np.array_equal(listener.utterance[0], np.zeros(UNIT, np.int16))  # a silent unit
    await feed(listener, clock, [0.0] * 2 + [0.9] * 3)  # a short gap: pause, then resume
    assert [c for c, _ in hooks.calls] == ["speech_start", "pause", "resume"]
    length_before_pause = listener.length()
    await feed(listener, clock, [0.0] * 8)  # 640 ms of silence: the 400 ms hangover ends it
    names = [c for c, _ in hooks.calls]
    assert names == ["speech_start", "pause", "resume", "pause", "end_of_turn"]
    speech_end_s = hooks.calls[-1][1]
    # the speech stopped where the silence began: before the last pause's 96 ms detection
    # and the 400 ms hangover, to the VAD chunk (32 ms)
    ended_at = 100.0 + 0.08 * (18 + 5 + 5)  # the unit in which the hangover ran out
    assert ended_at - 0.56 < speech_end_s < ended_at - 0.4, (speech_end_s, ended_at)
    assert length_before_pause > 0 and not listener.in_turn and listener.utterance == []
    assert hooks.units_in_turn > 10
    rt.close()


async def test_speech_at_a_replys_first_sound_is_its_echo_not_a_barge_in() -> None:
    clock = ManualClock(50.0)
    rt = runtime(clock, echo_warmup_ms=600)
    hooks = Recorder(clock, sounding_since=50.0)  # the reply began to sound just now
    listener = Listener(rt, hooks, "s", replies=hooks)
    await feed(listener, clock, [0.9] * 3)  # 7 chunks: one speech start (after 5)
    assert hooks.calls == [] and listener.echo_starts == 1 and not listener.in_turn
    await feed(listener, clock, [0.0] * 4)
    await clock.advance(0.6)  # past the warm-up: the same speech is the caller's
    await feed(listener, clock, [0.9] * 4)
    # the caller speaking over the reply cuts it, before the turn's hooks hear of it
    assert [c for c, _ in hooks.calls] == ["barge_in", "speech_start"]
    assert listener.echo_starts == 1
    rt.close()


class FixedVerdict:
    def __init__(self, finished: float) -> None:
        self.finished = finished
        self.seen: list[int] = []

    def probability(self, samples: np.ndarray) -> float:
        self.seen.append(len(samples))
        return self.finished


@pytest.mark.parametrize("finished, hangover_ms", [(0.9, 300), (0.1, 1200)])
async def test_each_pause_is_judged_and_the_verdict_sets_its_hangover(
        finished: float, hangover_ms: int) -> None:
    clock = ManualClock()
    rt = runtime(clock, turn_model="smart", hangover_ms=400)
    model = FixedVerdict(finished)
    rt.judge.model, rt.judge.window_samples = model, 8 * 16_000  # type: ignore[assignment]
    hooks = Recorder(clock)
    listener = Listener(rt, hooks, "s")
    await feed(listener, clock, [0.9] * 10 + [0.0] * 2)
    assert [c for c, _ in hooks.calls] == ["speech_start", "pause"]
    assert listener.verdicts == [finished] and model.seen == [listener.length()]
    assert listener.turns.hangover_ms == hangover_ms
    rt.close()


async def test_reset_forgets_the_turn_in_progress() -> None:
    clock = ManualClock()
    rt = runtime(clock)
    listener = Listener(rt, Recorder(clock), "s")
    await feed(listener, clock, [0.9] * 6)
    assert listener.in_turn
    listener.reset()
    assert not listener.in_turn and listener.utterance == [] and listener.preroll == []
    rt.close()


def test_the_vad_must_be_loaded_first() -> None:
    rt = ListenRuntime(TurnSettings(), ManualClock())
    with pytest.raises(RuntimeError, match="VAD"):
        _ = rt.vad
    rt.close()


async def test_units_mostly_filled_by_a_loss_burst_do_not_end_the_turn() -> None:
    clock = ManualClock(100.0)
    rt = runtime(clock, hangover_ms=400, turn_model="fixed")
    hooks = Recorder(clock)
    listener = Listener(rt, hooks, "s")
    await feed(listener, clock, [0.9] * 5)
    for _ in range(8):  # 640 ms of silence filled over a loss burst
        await listener.feed(np.zeros(UNIT, np.int16), filled=UNIT)
        await clock.advance(0.08)
    assert [name for name, _ in hooks.calls] == ["speech_start"] and listener.in_turn
    units = hooks.units_in_turn
    await listener.feed(np.zeros(UNIT, np.int16), filled=UNIT // 4)  # mostly real: silence
    assert hooks.units_in_turn == units + 1  # filled or not, the audio is still the turn's
    await feed(listener, clock, [0.0] * 5)
    assert [name for name, _ in hooks.calls] == ["speech_start", "pause", "end_of_turn"]


async def test_a_real_loss_burst_mid_sentence_ends_the_turn_unless_it_is_marked() -> None:
    """The real VAD on the bundled voice, 480 ms of it lost mid-sentence and filled with
    silence (as ingest fills a gap from pts): taken for silence, the burst ends the turn
    (and the rest of the sentence starts another); marked as filled, it is one turn."""
    from tests.utils import piper_speech

    speech = piper_speech("Could you please tell me what the weather will be like in Paris "
                          "tomorrow afternoon", lead_s=0.4, tail_s=1.0)
    units = [speech[i:i + UNIT] for i in range(0, len(speech) - UNIT + 1, UNIT)]
    burst = range(14, 20)  # 1.12-1.6 s: inside the sentence
    assert all(np.abs(units[k]).max() > 1000 for k in (burst.start - 1, burst.stop))

    async def turns(mark: bool) -> list[str]:
        clock = ManualClock(0.0)
        rt = ListenRuntime(TurnSettings(hangover_ms=400, turn_model="fixed"), clock)
        rt.load_vad()
        hooks = Recorder(clock)
        listener = Listener(rt, hooks, "s")
        try:
            for k, unit in enumerate(units):
                lost = k in burst
                await listener.feed(np.zeros(UNIT, np.int16) if lost else unit,
                                    UNIT if lost and mark else 0)
                await clock.advance(0.08)
        finally:
            rt.close()
        return [name for name, _ in hooks.calls if name in ("speech_start", "end_of_turn")]

    assert await turns(mark=False) == ["speech_start", "end_of_turn"] * 2
    assert await turns(mark=True) == ["speech_start", "end_of_turn"]


class WordsRecorder(Recorder):
    """A call whose reply has sounded since ``sounding_since``, heard for words: each hearing
    returns the next of ``heard`` (the last one repeats; a bare text is heard for sure);
    duck, unduck and backchannels noted."""

    def __init__(self, clock: ManualClock, heard: list[Heard | str | None]) -> None:
        super().__init__(clock, sounding_since=clock.now())
        self.heard = heard
        self.hearings: list[int] = []  # samples heard each time

    ducked = False

    def duck(self) -> bool:  # noted once while ducked, as Replies counts it
        if self.since is None:  # nothing sounds yet
            return False
        if not self.ducked:
            self.calls.append(("duck", self.clock.now()))
        self.ducked = True
        return True

    def unduck(self) -> None:
        if self.ducked:
            self.calls.append(("unduck", self.clock.now()))
        self.ducked = False

    async def backchannel(self, text: str) -> None:
        self.calls.append((f"backchannel:{text}", self.clock.now()))

    async def hear_words(self, samples: np.ndarray) -> Heard | None:
        self.hearings.append(len(samples))
        heard = self.heard[min(len(self.hearings), len(self.heard)) - 1]
        return Heard(heard) if isinstance(heard, str) else heard


def words_listener(clock: ManualClock, heard: list[Heard | str | None]
                   ) -> tuple[Listener, WordsRecorder]:
    rt = runtime(clock, hangover_ms=400, echo_warmup_ms=0)
    hooks = WordsRecorder(clock, heard)
    return Listener(rt, hooks, "s", replies=hooks, interrupt_by="words"), hooks


def names(hooks: Recorder) -> list[str]:
    return [c for c, _ in hooks.calls]


async def test_words_over_a_reply_duck_it_then_other_words_cut_it_and_open_the_turn() -> None:
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, ["Wait, what about tomorrow?"])
    await feed(listener, clock, [0.0] * 4 + [0.9] * 3)  # speech starts: ducked, not cut
    assert names(hooks) == ["duck"] and not listener.in_turn  # no turn until words
    await feed(listener, clock, [0.9] * 6)  # 0.4 s more: heard for words, which interrupt
    assert names(hooks) == ["duck", "barge_in", "speech_start"]
    assert hooks.hearings[0] >= PREROLL_UNITS * UNIT  # the preroll and the speech so far
    await feed(listener, clock, [0.0] * 8)  # the turn goes on as any other
    assert names(hooks)[-2:] == ["pause", "end_of_turn"]
    rt_close(listener)


async def test_the_reply_ducks_at_the_sounds_onset_before_it_is_speech() -> None:
    """64 ms of sound duck the reply, two units before the 160 ms that start speech."""
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, ["Wait, what about tomorrow?"])
    await feed(listener, clock, [0.0] * 4)
    onset_s = clock.now()
    await feed(listener, clock, [0.9])  # 2 VAD chunks: 64 ms
    assert hooks.calls == [("duck", onset_s)] and not listener.turns.in_turn
    await feed(listener, clock, [0.9] * 2)  # the speech start: still ducked, once
    assert names(hooks) == ["duck"] and listener.turns.in_turn
    await feed(listener, clock, [0.9] * 5)
    assert names(hooks) == ["duck", "barge_in", "speech_start"]
    rt_close(listener)


async def test_a_sound_that_stops_short_of_speech_lifts_its_duck_at_once() -> None:
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, ["Wait."])
    await feed(listener, clock, [0.0] * 4 + [0.9] + [0.0])  # a click: 80 ms
    assert names(hooks) == ["duck", "unduck"] and listener.onset_ducks == 1
    assert hooks.calls[1][1] - hooks.calls[0][1] == pytest.approx(0.08)
    assert not hooks.hearings and not listener.turns.in_turn  # never heard for words
    await feed(listener, clock, [0.0] * 4)
    assert names(hooks) == ["duck", "unduck"]
    rt_close(listener)


async def test_no_duck_at_an_onset_in_the_echo_warm_up() -> None:
    clock = ManualClock(10.0)
    rt = runtime(clock, hangover_ms=400, echo_warmup_ms=400)
    hooks = WordsRecorder(clock, ["Wait."])
    listener = Listener(rt, hooks, "s", replies=hooks, interrupt_by="words")
    await feed(listener, clock, [0.0] + [0.9] + [0.0] * 2)  # 80 ms into the reply's sound
    assert hooks.calls == [] and listener.onset_ducks == 0
    rt.close()


async def test_a_sound_before_a_replys_first_sound_leaves_it_and_words_cut_it() -> None:
    """A reply queued, not sounding yet (the greeting at the call's start, an answer being
    made): a cough leaves it queued (no words: no cut, no turn); when the reply begins to
    sound under the next sound, it is ducked at once; that sound's words cut it."""
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, [Heard("")])
    hooks.since, hooks.queued = None, True
    await feed(listener, clock, [0.0] * 4 + [0.9] * 4 + [0.0] * 8)  # a cough: 320 ms
    assert hooks.calls == [] and hooks.queued and hooks.hearings  # heard: no words
    assert listener.false_interruptions == 1 and not listener.turns.in_turn
    hooks.heard = [Heard("")] * len(hooks.hearings) + ["Sorry, where is the exit?"]
    await feed(listener, clock, [0.9] * 3)  # speech starts, the reply still queued
    assert hooks.calls == []
    hooks.since, hooks.queued = clock.now(), False  # its first sound goes out
    await feed(listener, clock, [0.9])
    assert names(hooks) == ["duck"]  # at once
    await feed(listener, clock, [0.9] * 4)  # the words: an interruption
    assert names(hooks) == ["duck", "barge_in", "speech_start"]
    rt_close(listener)


async def test_a_backchannel_is_recorded_and_the_reply_goes_on_with_no_turn() -> None:
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, ["Mm-hmm."])
    await feed(listener, clock, [0.0] * 4 + [0.9] * 6 + [0.0] * 8)  # a short "mm-hmm"
    assert names(hooks) == ["duck", "backchannel:Mm-hmm.", "unduck"]
    assert listener.backchannels == 1 and not listener.in_turn and not listener.utterance
    await feed(listener, clock, [0.0] * 8)
    assert "speech_start" not in names(hooks) and "end_of_turn" not in names(hooks)
    rt_close(listener)


async def test_sound_with_no_words_is_a_false_interruption_within_a_second() -> None:
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, [""])  # a door, a cough: no words
    await feed(listener, clock, [0.0] * 4 + [0.9] * 20)  # 1.6 s of it, and on
    assert names(hooks) == ["duck", "unduck"] and listener.false_interruptions == 1
    await feed(listener, clock, [0.9] * 5)  # the same sound goes on: not heard again yet
    assert names(hooks) == ["duck", "unduck"]
    rt_close(listener)


UNSURE = SURE_LOGPROB - 0.3


async def test_a_short_sound_heard_as_unsure_words_is_no_interruption() -> None:
    """"Mm-hmm" that the ASR reads, unsure, as "and then them": the reply goes on."""
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, [Heard("And then them.", UNSURE)])
    await feed(listener, clock, [0.0] * 4 + [0.9] * 8 + [0.0] * 8)  # 0.64 s of it, a pause
    assert names(hooks) == ["duck", "unduck"] and len(hooks.hearings) == 2  # 0.4 s, pause
    assert listener.false_interruptions == 1 and listener.backchannels == 0
    assert not listener.in_turn and not listener.utterance
    rt_close(listener)


async def test_unsure_words_wait_for_more_and_interrupt_once_sure() -> None:
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, [Heard("Hanyo", UNSURE), "Hang on, when"])
    await feed(listener, clock, [0.0] * 4 + [0.9] * 8)  # first hearing: unsure, waits
    assert names(hooks) == ["duck"] and len(hooks.hearings) == 1
    await feed(listener, clock, [0.9] * 5)  # the next: sure words, an interruption
    assert names(hooks) == ["duck", "barge_in", "speech_start"]
    rt_close(listener)


async def test_a_pause_in_unsure_words_waits_for_what_comes_after_it() -> None:
    """"Hang on, when does the next tour start?" with a comma pause: the first words, unsure,
    decide nothing at the pause; the speech resumes, and the whole is heard, surely."""
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, [Heard("hang on.", UNSURE), Heard("hang on.", UNSURE),
                                             "Hang on, when does the next"])
    await feed(listener, clock, [0.0] * 4 + [0.9] * 6 + [0.0] * 3)  # 0.4 s heard, a pause
    assert names(hooks) == ["duck"] and len(hooks.hearings) == 2
    await feed(listener, clock, [0.9] * 7)  # it resumes: heard again 0.4 s later
    assert names(hooks) == ["duck", "barge_in", "speech_start"]
    assert hooks.hearings[-1] > hooks.hearings[0]  # with the words before the pause
    rt_close(listener)


@pytest.mark.parametrize("pause", [False, True])
async def test_unsure_words_spoken_long_interrupt(pause: bool) -> None:
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, [Heard("Sorry, well on the", UNSURE)])
    units = int(UNSURE_LONG_S * 1000 / 80) + 6
    await feed(listener, clock, [0.0] * 4 + [0.9] * units + [0.0] * (8 if pause else 0))
    assert names(hooks)[:3] == ["duck", "barge_in", "speech_start"]
    assert listener.false_interruptions == 0
    rt_close(listener)


async def test_an_engine_that_cannot_hear_words_is_interrupted_by_the_sound() -> None:
    clock = ManualClock(10.0)
    listener, hooks = words_listener(clock, [None])
    await feed(listener, clock, [0.0] * 4 + [0.9] * 8)
    assert names(hooks) == ["duck", "barge_in", "speech_start"]
    rt_close(listener)


async def test_with_interruption_by_sound_speech_over_a_reply_cuts_it_at_once() -> None:
    clock = ManualClock(10.0)
    rt = runtime(clock, hangover_ms=400, echo_warmup_ms=0)
    hooks = WordsRecorder(clock, ["Mm-hmm."])
    listener = Listener(rt, hooks, "s", replies=hooks)  # interrupt_by="sound", the default
    await feed(listener, clock, [0.0] * 4 + [0.9] * 3)
    assert names(hooks) == ["barge_in", "speech_start"] and not hooks.hearings
    rt.close()


def rt_close(listener: Listener) -> None:
    listener.runtime.close()


async def test_a_rule_asked_at_each_decision_follows_the_call() -> None:
    """A client that did not say its mode: words while an echo may be there (speech over the
    reply ducks it and is heard for words), sound once the call is found to have none (the
    same speech cuts it at once); the call's rule is asked at each decision."""
    clock = ManualClock(10.0)
    rt = runtime(clock, hangover_ms=400, echo_warmup_ms=0)
    echo = [True]
    hooks = WordsRecorder(clock, ["Mm-hmm."])
    listener = Listener(rt, hooks, "s", replies=hooks,
                        interrupt_by=lambda: "words" if echo[0] else "sound")
    assert listener.by_words
    await feed(listener, clock, [0.0] * 4 + [0.9] * 3)
    assert names(hooks) == ["duck"]  # heard for words, not cut
    await feed(listener, clock, [0.9] * 6 + [0.0] * 12)  # a backchannel: the reply goes on
    assert "barge_in" not in names(hooks)
    echo[0] = False  # the call was found to have no echo
    assert not listener.by_words
    hooks.calls.clear()
    await feed(listener, clock, [0.9] * 3)
    assert names(hooks)[:1] == ["barge_in"]
    rt.close()


async def _deliver(listener: Listener, hooks: Recorder, clock: ManualClock, audio: np.ndarray,
                   ahead: bool) -> tuple[float | None, list[int]]:
    """``audio`` to ``listener`` as a call delivers it, in 20 ms packets: units only, or each
    unit's packets also heard ahead as they come (``hear_ahead``). The clock reads the
    arrival of the last sample delivered. Returns when the turn was decided to have ended
    (clock) and the utterance's length after each unit."""
    ended_at: float | None = None
    lengths: list[int] = []
    for index in range(len(audio) // UNIT):
        for packet in range(4):
            start = index * UNIT + packet * 320
            await clock.advance(320 / 16_000)
            if packet < 3 and ahead:
                await listener.hear_ahead(index, packet * 320, audio[start:start + 320])
            elif packet == 3:
                await listener.feed(audio[index * UNIT:(index + 1) * UNIT], 0, index)
            if ended_at is None and any(c == "end_of_turn" for c, _ in hooks.calls):
                ended_at = clock.now()
        lengths.append(listener.length())
    return ended_at, lengths


def _audio(levels: list[float]) -> np.ndarray:
    return np.concatenate([np.full(UNIT, int(level * 10_000), np.int16) for level in levels])


async def _listen(audio: np.ndarray, ahead: bool) -> tuple[list[tuple[str, float]],
                                                           float | None, Listener]:
    clock = ManualClock(100.0)
    hooks = Recorder(clock)
    listener = Listener(runtime(clock, hangover_ms=400), hooks, "s")
    ended_at, _ = await _deliver(listener, hooks, clock, audio, ahead)
    return hooks.calls, ended_at, listener


@pytest.mark.parametrize("speech_units", [10, 11, 12])
async def test_hearing_ahead_decides_as_units_do_only_sooner(speech_units: int) -> None:
    """Streaming equals batch: the same signals and the same speech end, to the sample; the
    end of the turn is decided when the VAD chunk that ends it has come (its 20 ms packet),
    not its 80 ms unit (here 40-60 ms sooner)."""
    audio = _audio([0.0] * 8 + [0.9] * speech_units + [0.0] * 10)
    units, units_ended, _ = await _listen(audio, ahead=False)
    packets, packets_ended, listener = await _listen(audio, ahead=True)
    assert [c for c, _ in units] == [c for c, _ in packets] == \
        ["speech_start", "pause", "end_of_turn"]
    assert packets[-1][1] == pytest.approx(units[-1][1])  # the same speech end
    assert units_ended is not None and packets_ended is not None
    # the hangover's last chunk ends 416 ms after the speech end; its packet comes within
    # 20 ms of it, its unit within 80
    speech_end = units[-1][1]
    assert speech_end + 0.416 <= packets_ended < speech_end + 0.416 + 0.02
    assert speech_end + 0.416 <= units_ended < speech_end + 0.416 + 0.08
    assert packets_ended < units_ended
    assert listener.vad_samples == len(audio)  # each sample through the VAD once


@pytest.mark.parametrize(("ahead", "heard_at_lull"), [
    (False, 19 * UNIT),  # the unit holding the first silent chunk (23040-23552)
    (True, 74 * 320),  # its packet (23360-23680)
])
async def test_each_silence_starts_with_a_lull_and_its_pause_comes_two_chunks_later(
        ahead: bool, heard_at_lull: int) -> None:
    """The lull (where the cascade starts the final transcript) is the first silent VAD
    chunk of each silence in a turn, heard with the audio to its packet when heard ahead;
    a pause comes 64 ms (two chunks) after its silence's lull, so the transcript started
    there is 60-80 ms ahead of the pause."""
    clock = ManualClock(100.0)
    hooks = Recorder(clock)
    listener = Listener(runtime(clock, hangover_ms=400), hooks, "s")
    heard: list[int] = []
    recorded = hooks.on_lull

    async def on_lull() -> None:
        heard.append(listener.vad_samples)
        await recorded()

    hooks.on_lull = on_lull  # type: ignore[method-assign]
    # speech, a 160 ms gap (a pause, then a resume), speech, and the silence that ends it
    await _deliver(listener, hooks, clock, _audio([0.0] * 8 + [0.9] * 10 + [0.0] * 2
                                                  + [0.9] * 4 + [0.0] * 10), ahead)
    assert names(hooks) == ["speech_start", "pause", "resume", "pause", "end_of_turn"]
    pauses = [t for c, t in hooks.calls if c == "pause"]
    assert len(hooks.lulls) == 2 and heard[0] == heard_at_lull
    for lull, pause in zip(hooks.lulls, pauses, strict=True):
        assert (0.06 - 1e-9 <= pause - lull <= 0.08 + 1e-9) if ahead else \
            (0 <= pause - lull <= 0.08 + 1e-9)


async def test_audio_heard_ahead_out_of_step_is_left_to_its_unit() -> None:
    """A piece that does not follow what was heard of its unit (one was not offered) is not
    heard: the unit brings the rest, and every sample goes through the VAD once, in order."""
    clock = ManualClock(100.0)
    listener = Listener(runtime(clock), Recorder(clock), "s")
    silence = np.zeros(UNIT, np.int16)
    await listener.hear_ahead(0, 0, silence[:320])
    await listener.hear_ahead(0, 640, silence[640:960])  # 320-640 was not offered
    await listener.hear_ahead(1, 320, silence[:320])  # mid-way into a unit: left to it
    assert listener.vad_samples == 320
    await listener.feed(silence, 0, 0)
    assert listener.vad_samples == UNIT
    await listener.feed(silence, 0, 1)  # nothing of unit 1 was heard ahead
    assert listener.vad_samples == 2 * UNIT


@pytest.mark.parametrize("speech_units", [3, 4, 5])
async def test_hearing_ahead_keeps_the_same_utterance_and_hears_words_to_the_speech_end(
        speech_units: int) -> None:
    """Over a reply, heard for words: the utterance holds the same audio unit after unit
    (the same preroll when the speech starts in a unit heard ahead), and the words heard at
    the pause end where the speech did, whichever way the audio came."""
    audio = _audio([0.0] * 6 + [0.9] * speech_units + [0.0] * 10)
    seen = {}
    for ahead in (False, True):
        clock = ManualClock(10.0)
        listener, hooks = words_listener(clock, ["okay"])
        _, lengths = await _deliver(listener, hooks, clock, audio, ahead)
        seen[ahead] = (names(hooks), lengths, hooks.hearings)
        assert hooks.lulls == []  # its silence is no turn's: the words were a backchannel
        rt_close(listener)
    assert seen[True] == seen[False]
    calls, _, hearings = seen[True]
    assert calls == ["duck", "backchannel:okay", "unduck"] and len(hearings) == 1
    # from the preroll (units 4-7: the speech started in unit 7, 160 ms into it) to the
    # chunk in which the speech ended ((6 + n) * 1280, in chunks of 512)
    speech_end = -(-(6 + speech_units) * UNIT // 512) * 512
    assert hearings[0] == speech_end - 4 * UNIT, hearings


@pytest.mark.parametrize("max_turn_ms", [1_040, 1_200])  # cut in a unit's first packets
async def test_a_turn_cut_at_its_longest_keeps_its_last_unit_when_heard_ahead(
        max_turn_ms: int) -> None:
    """The unit in which a turn reaches its longest is in the turn it ends (its speech is
    not left to the next turn's preroll) either way."""
    clock = ManualClock(100.0)
    cut_at = {}
    for ahead in (False, True):
        hooks = Recorder(clock)
        rt = runtime(clock)
        rt.turn_config.max_turn_ms = max_turn_ms
        listener = Listener(rt, hooks, "s")

        async def ended(speech_end_s: float, listener: Listener = listener,
                        hooks: Recorder = hooks, ahead: bool = ahead) -> None:
            hooks.calls.append(("end_of_turn", speech_end_s))
            cut_at[ahead] = listener.length()

        hooks.on_end_of_turn = ended  # type: ignore[method-assign]
        await _deliver(listener, hooks, clock, _audio([0.0] * 4 + [0.9] * 20), ahead)
        assert names(hooks)[:2] == ["speech_start", "end_of_turn"]
    assert cut_at[True] == cut_at[False] > 0


@pytest.mark.parametrize("speech_units", [10, 11, 12])
async def test_the_audio_at_a_pause_runs_to_the_last_packet_heard(speech_units: int) -> None:
    """What a speculative reply transcribes at the pause (``samples``) runs to the last
    packet heard, not the last whole unit: a soft ending the VAD already takes for silence
    is in it (the unit ending 16 ms into the silence left one out: "capital of friends")."""
    soft = [0.2, 0.2]  # a soft final consonant: under the VAD's end threshold (0.35)
    audio = _audio([0.0] * 8 + [0.9] * speech_units + soft + [0.0] * 10)
    clock = ManualClock(100.0)
    hooks = Recorder(clock)
    listener = Listener(runtime(clock, hangover_ms=400), hooks, "s")
    at_pause: list[tuple[np.ndarray, int]] = []

    async def paused() -> None:
        hooks.calls.append(("pause", clock.now()))
        at_pause.append((listener.samples(), listener.vad_samples))

    hooks.on_pause = paused  # type: ignore[method-assign]
    await _deliver(listener, hooks, clock, audio, ahead=True)
    assert len(at_pause) == 1
    samples, heard = at_pause[0]
    assert np.array_equal(samples, audio[heard - len(samples):heard])  # to the last sample
    assert heard > (8 + speech_units + 1) * UNIT  # into the second soft unit
