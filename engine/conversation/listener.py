"""The listener: one call's turn-taking, the same for every engine.

Each 80 ms unit of the caller's audio goes through the VAD (on the engine's listen worker)
into the :class:`~omnicall.engine.conversation.turns.TurnDetector`; the listener keeps the 320 ms
preroll before speech and the utterance since, asks the end-of-turn model about each pause
(:class:`~omnicall.engine.conversation.turn_judge.TurnJudge`: ``--turn-model smart``), tells speech
that starts while the assistant's reply has only just begun to sound (its own voice coming
back: the echo warm-up) from a barge-in, cuts the call's live reply when the caller speaks
over it (:meth:`~omnicall.engine.conversation.replies.Replies.barge_in`), and calls the
session's hooks:

- ``on_speech_start``: the caller started speaking (a reply that was still going has been
  cut); the utterance so far is the preroll;
- ``on_audio``: each unit of the caller's turn, after the speech start;
- ``on_lull``: the speech's first silent VAD chunk (it may be ending: the pause, if one comes,
  belongs to this silence);
- ``on_pause``: speech paused (a reply may start now, held back: speculation);
- ``on_resume``: speech came back within the hangover (the speculation is void);
- ``on_end_of_turn``: the turn ended; ``speech_end_s`` is when the speech stopped (the start of
  the first silent VAD chunk), from the samples since (not from when the verdict came: that
  waited for the end of the 80 ms unit holding the hangover's last chunk, 0-64 ms later).

Cascade, qwen-omni, the remote engine's local turn mode and plug-in engines all listen with
it; what the engines share (the VAD, the listen worker, the end-of-turn model, the turn
settings, the clock) is one :class:`ListenRuntime` per engine, passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from omnicall.engine.base import InterruptRule
from omnicall.engine.conversation.backchannels import Heard, overlap_verdict
from omnicall.engine.conversation.settings import TurnSettings
from omnicall.engine.conversation.turn_judge import TurnJudge, turn_config
from omnicall.engine.conversation.turns import PREROLL_UNITS, TurnConfig, TurnDetector
from omnicall.engine.vad import CHUNK_SAMPLES, SileroVad, VadState
from omnicall.engine.worker import ModelWorker
from omnicall.media.clock import Clock
from omnicall.media.resample import Int16Array
from omnicall.media.timebase import FRAME_MS, INPUT_RATE_HZ

logger = logging.getLogger(__name__)

LISTEN_QUEUE = 512  # VAD jobs of all calls waiting (each ~0.2 ms): never reached in practice
#: interruptions by words: the caller's sound over a reply is heard for words after this
#: much, and again each time as much more came, until the speech pauses
WORDS_EVERY_S = 0.4
#: no words this long into the caller's sound over a reply: a false interruption (a cough, a
#: door, the assistant's own voice); the reply goes on, and sound over it is not heard for
#: words again for as long
FALSE_AFTER_S = 1.0
#: the speech before a speech start that the turn keeps (its first words)
PREROLL_S = PREROLL_UNITS * FRAME_MS / 1000



class ListenRuntime:
    """What the listeners of one engine share: the VAD model and its worker, the end-of-turn
    model, the turn settings and the clock. Owned by the engine (it loads and closes it)."""

    def __init__(self, settings: TurnSettings, clock: Clock, judge: bool = True) -> None:
        self.turn_config: TurnConfig = turn_config(settings.hangover_ms, settings.turn_model)
        #: ``judge=False``: another party ends turns (a model server's VAD): no model loads
        self.judge = TurnJudge(settings.turn_model if judge else "fixed")
        self.worker = ModelWorker("listen", max_pending=LISTEN_QUEUE)
        self.echo_warmup_s = settings.echo_warmup_ms / 1000
        #: the listeners hear the audio of units still being formed (``Listener.hear_ahead``)
        self.listen_ahead = settings.listen_ahead
        self.clock = clock
        self._vad: SileroVad | None = None

    @property
    def vad(self) -> SileroVad:
        if self._vad is None:
            raise RuntimeError("the VAD was not loaded (ListenRuntime.load_vad)")
        return self._vad

    def load_vad(self) -> None:
        """Load the VAD (blocking: call it where the engine loads its models)."""
        if self._vad is None:
            self._vad = SileroVad()

    def load(self) -> None:
        """The VAD and, with ``--turn-model smart``, the end-of-turn model."""
        self.load_vad()
        self.judge.load()

    def drop_session(self, session_id: str) -> None:
        self.worker.drop_session(session_id)
        self.judge.drop_session(session_id)

    def close(self) -> None:
        self.worker.close()
        self.judge.close()


class ReplyState(Protocol):
    """What the listener asks of the call's replies
    (:class:`~omnicall.engine.conversation.replies.Replies` is one)."""

    def sounding_since(self) -> float | None:
        """When the first sound of a reply that is still going went out (None: none)."""

    def pending(self) -> bool:
        """A committed reply is live but has not sounded yet (being made, or a greeting
        waiting for its first sound)."""

    async def barge_in(self) -> bool:
        """The caller speaks over the live reply: cut it (False: none was live)."""

    def duck(self) -> bool:
        """Lower the live reply's sound while the caller's words are heard (False: none)."""

    def unduck(self) -> None:
        """The caller's sound was no interruption: the reply's sound back to normal."""

    async def backchannel(self, text: str) -> None:
        """The caller said ``text`` to show they follow: recorded, no turn."""


@dataclass
class Overlap:
    """The caller's sound over a reply, not yet heard for words."""

    started_at: float
    start_samples: int  # the utterance's length when the speech started (the preroll)
    heard_samples: int = 0  # the utterance's length at the last hearing
    #: the last hearing and how long the speech had lasted then (None: not heard yet)
    last: tuple[Heard | None, float] | None = None


class ListenerHooks(Protocol):
    """What a session does at each turn signal. A protocol with no defaults: a session
    states every hook (one that has nothing to do says so), so a misspelled or missing hook
    is a type error, not a hook that silently does nothing."""

    async def on_speech_start(self) -> None:
        """Speech began (the preroll is in :attr:`Listener.utterance`)."""
        ...

    async def on_audio(self, audio: Int16Array) -> None:
        """One unit of the caller's audio during a turn (after the speech start)."""
        ...

    async def on_lull(self) -> None:
        """The caller's speech went silent for one VAD chunk: it may be ending. The next
        ``on_pause`` of this turn, if it comes before any other lull, belongs to this
        silence (work started now may serve its speculative reply)."""
        ...

    async def on_pause(self) -> None:
        """The caller paused: the turn may end (a speculative reply may start)."""
        ...

    async def on_resume(self) -> None:
        """The caller went on after a pause (a speculative reply is dropped)."""
        ...

    async def on_end_of_turn(self, speech_end_s: float) -> None:
        """The turn ended; its speech ended at ``speech_end_s`` (clock seconds)."""
        ...

    async def hear_words(self, samples: Int16Array) -> Heard | None:
        """The words in ``samples`` (the caller's sound over a reply, preroll first) and how
        sure the ASR is of them, for interruptions by words; None: this engine cannot tell
        now (the sound interrupts)."""
        ...

    def addressed(self, since_s: float) -> bool:
        """Whether the speech heard since ``since_s`` (clock seconds) is the caller's, said
        to the assistant (``--addressee camera``: the person facing the camera talked); words
        over a reply that are not cut nothing."""
        ...


class Listener:
    """One call's listening state (VAD state, detector, preroll, utterance, verdicts)."""

    def __init__(self, runtime: ListenRuntime, hooks: ListenerHooks, session_id: str,
                 replies: ReplyState | None = None, interrupt_by: InterruptRule = "sound",
                 language: str = "en") -> None:
        self.runtime = runtime
        self.hooks = hooks
        #: the call's replies (None: another party cuts them, as a model server's VAD does)
        self.replies = replies
        #: what cuts a reply: any speech over it ("sound"), or words that are not a
        #: backchannel ("words": the reply is ducked while they are heard; a cough, a door or
        #: "mm-hmm" leaves it going); a callable is asked at each decision (a client that
        #: did not say its mode: words until its microphone is found not to hear the
        #: assistant)
        self.interrupt_by = interrupt_by
        self.language = language
        self._overlap: Overlap | None = None
        #: the reply was ducked at the sound's onset, before any speech start
        self._ducked_at_onset = False
        self.onset_ducks = 0  # sounds that ducked a reply at their onset and stopped short
        self._not_words_until = float("-inf")  # after a false interruption
        self.backchannels = 0
        self.false_interruptions = 0
        self.not_addressed_interruptions = 0  # words over a reply from no one talking to it
        self.session_id = session_id
        self.turns = TurnDetector(runtime.turn_config)
        self.vad_state = VadState()
        self.preroll: list[Int16Array] = []
        self.utterance: list[Int16Array] = []  # since speech start (preroll first)
        self.verdicts: list[float] = []  # the end-of-turn model's, latest last
        self.echo_starts = 0  # speech starts taken for the assistant's own voice
        #: samples through the VAD so far, and where among them the speech of a paused
        #: turn stopped (the start of the first silent chunk)
        self.vad_samples = 0
        self._speech_end_at: int | None = None
        #: the unit whose first samples were heard ahead (``hear_ahead``), and those samples
        self._ahead_index: int | None = None
        self._ahead_audio: list[Int16Array] = []
        self.heard_ahead = 0  # samples heard ahead of their units

    @property
    def in_turn(self) -> bool:
        """The caller's turn is open (not while their sound over a reply is still being
        heard for words: that opens no turn until it is an interruption)."""
        return self.turns.in_turn and self._overlap is None

    @property
    def paused(self) -> bool:
        return self.turns.paused

    @property
    def quiet(self) -> bool:
        """The caller's turn has been silent since its latest lull (see
        :attr:`TurnDetector.quiet`)."""
        return self.in_turn and self.turns.quiet

    def _turn_audio(self) -> list[Int16Array]:
        """The turn's audio heard so far: its units, then what was heard ahead of the next
        (it holds all the speech heard, to the VAD's last chunk)."""
        return [*self.utterance, *self._ahead_audio] if self.utterance else []

    def length(self) -> int:
        return sum(len(a) for a in self._turn_audio())

    def samples(self) -> Int16Array:
        audio = self._turn_audio()
        return np.concatenate(audio) if audio else np.zeros(0, np.int16)

    def reset(self) -> None:
        """Forget the turn in progress (the client took over turn-taking, or gave it back)."""
        self._overlap = None
        self._lift_onset_duck()
        self.turns.reset()
        self.vad_state = VadState()
        self.preroll, self.utterance, self._speech_end_at = [], [], None
        self._ahead_index, self._ahead_audio = None, []

    def _ahead_samples(self) -> int:
        return sum(len(piece) for piece in self._ahead_audio)

    async def hear_ahead(self, index: int, offset: int, samples: Int16Array) -> None:
        """The first samples of unit ``index`` (from ``offset`` in it), before the unit: the
        VAD and the turn signals hear them now, so a pause or an end of turn is decided on
        the 32 ms VAD chunk rather than when its 80 ms unit is whole (0-64 ms later); the
        unit then brings only the rest to the VAD (:meth:`feed` with its index). Pieces
        that do not follow on from what was heard are left to the unit, as is the last unit
        of a turn that reaches its longest (the unit's own feed cuts it, with the unit in
        it). The utterance still grows by whole units; what was heard ahead of the next is
        in :meth:`samples` (and :meth:`length`) until its unit comes, so the audio a
        speculative reply takes at a pause runs to the last packet heard."""
        if index != self._ahead_index:
            if offset != 0:
                return
            self._ahead_index, self._ahead_audio = index, []
        if offset != self._ahead_samples() or not len(samples) or \
                self.turns.turn_ms + FRAME_MS >= self.runtime.turn_config.max_turn_ms:
            return
        probs = await self._vad(samples)
        self._ahead_audio.append(samples)
        self.heard_ahead += len(samples)
        await self._signals(probs, unknown=False)

    async def _vad(self, samples: Int16Array) -> Sequence[float]:
        runtime = self.runtime
        probs: Sequence[float] = await runtime.worker.run(
            runtime.vad.probabilities, self.vad_state, samples, session=self.session_id)
        self.vad_samples += len(samples)
        return probs

    async def feed(self, audio: Int16Array, filled: int = 0, index: int | None = None) -> None:
        """One unit of the caller's audio (16 kHz mono): VAD, turn signals, hooks.
        ``filled``: how many of its samples fill a loss burst (``MediaUnit.filled``); a unit
        mostly filled is neither speech nor silence to the turn detector; ``index``: the
        unit's (what of it was heard ahead is not heard again)."""
        heard = self._ahead_samples() if index is not None and index == self._ahead_index \
            else 0
        self._ahead_index, self._ahead_audio = None, []
        probs = await self._vad(audio[heard:]) if heard < len(audio) else []
        if self.turns.in_turn:
            self.utterance.append(audio)
            if self._overlap is None:  # sound over a reply opens no turn until it is words
                await self.hooks.on_audio(audio)
        else:
            self.preroll = [*self.preroll, audio][-PREROLL_UNITS:]
        await self._signals(probs, unknown=2 * filled >= len(audio) > 0)
        overlap = self._overlap
        if overlap is not None and self.replies is not None:
            self.replies.duck()  # a reply that began to sound while the sound was heard
        if overlap is not None and \
                self.length() - overlap.heard_samples >= WORDS_EVERY_S * INPUT_RATE_HZ:
            await self._hear_overlap()

    async def _signals(self, probs: Sequence[float], unknown: bool) -> None:
        """The turn signals of the VAD chunks just heard, and what each does."""
        runtime = self.runtime
        for chunk, prob in enumerate(probs):
            signal = self.turns.feed(prob, unknown)
            if signal is None or signal == "lull":
                self._onset()
            elif signal == "pause":
                # the speech stopped where the silence began: ``pause_ms`` before the end of
                # the chunk that paused (the samples the VAD holds back, and the chunks
                # after it, came later)
                after = len(self.vad_state.leftover) + (len(probs) - 1 - chunk) * CHUNK_SAMPLES
                silent = runtime.turn_config.pause_ms * INPUT_RATE_HZ // 1000
                self._speech_end_at = self.vad_samples - after - silent
            elif signal == "resume":
                self._speech_end_at = None
            if self._overlap is not None and signal in ("pause", "resume", "end_of_turn") \
                    and not await self._overlap_signal(signal):
                continue  # no interruption (yet): no turn to pause, resume or end
            if signal == "speech_start":
                await self._speech_start()
            elif signal == "lull" and self._overlap is None:
                await self.hooks.on_lull()
            elif signal == "pause":
                await self.hooks.on_pause()
                await runtime.judge.judge(self.turns, self._turn_audio(), self.session_id,
                                          self.verdicts)
            elif signal == "resume":
                await self.hooks.on_resume()
            elif signal == "end_of_turn":
                await self._end_of_turn()

    @property
    def by_words(self) -> bool:
        """Whether what is heard over a reply cuts it by its words now (see
        :attr:`interrupt_by`)."""
        rule = self.interrupt_by
        return (rule() if callable(rule) else rule) == "words"

    def _onset(self) -> None:
        """The caller's sound over a live reply ducks it at its onset, before it is speech
        (``TurnConfig.onset_ms``); a sound that stops short of a speech start lifts it."""
        if not self.turns.onset:
            if self._ducked_at_onset:
                self.onset_ducks += 1
                self._lift_onset_duck()
            return
        if self._ducked_at_onset or self.replies is None or not self.by_words:
            return
        sounding_since = self.replies.sounding_since()
        now = self.runtime.clock.now()
        if sounding_since is not None and now >= self._not_words_until and \
                now - sounding_since >= self.runtime.echo_warmup_s:
            self._ducked_at_onset = self.replies.duck()

    def _lift_onset_duck(self) -> None:
        if self._ducked_at_onset and self.replies is not None:
            self.replies.unduck()
        self._ducked_at_onset = False

    async def _overlap_signal(self, signal: str) -> bool:
        """The caller's sound over the reply paused (heard for words), resumed (heard again
        as more comes), or ended: decided from the last hearing. True: an interruption."""
        overlap = self._overlap
        assert overlap is not None
        if signal == "pause":
            return await self._hear_overlap(paused=True)
        if signal == "end_of_turn":
            heard, speech_s = overlap.last if overlap.last is not None else \
                await self._hear(paused=True)
            return await self._decide(heard, speech_s, final=True)
        return False

    async def _hear_overlap(self, paused: bool = False) -> bool:
        """Hear the caller's sound over the reply for words and decide what it means, if it
        can be decided yet (:meth:`_decide`)."""
        heard, speech_s = await self._hear(paused)
        return await self._decide(heard, speech_s, final=False, paused=paused)

    async def _hear(self, paused: bool) -> tuple[Heard | None, float]:
        overlap = self._overlap
        assert overlap is not None
        overlap.heard_samples = self.length()
        samples = self.samples()
        if paused and self._speech_end_at is not None:  # its words without the silence
            # since (the ASR can make words of a silent tail); the utterance ends at the
            # last whole unit, the VAD may have heard part of the next
            silent = self.vad_samples - self._speech_end_at
            samples = samples[:max(len(samples) - silent, len(samples) // 2)]
        heard = await self.hooks.hear_words(samples)
        speech_s = (len(samples) - overlap.start_samples) / INPUT_RATE_HZ
        overlap.last = (heard, speech_s)
        return heard, speech_s

    async def _decide(self, heard: Heard | None, speech_s: float, final: bool,
                      paused: bool = False) -> bool:
        """Other words than a backchannel cut the reply and open the turn (True); a
        backchannel (heard at a pause or the end) is recorded and the reply goes on, as it
        does after sound with no words (by the end, or after :data:`FALSE_AFTER_S`) and
        after a short sound whose words the ASR is unsure of, by the end
        (:func:`~omnicall.engine.conversation.backchannels.overlap_verdict`; ``final``: the
        speech ended, the turn detector's end of turn). Anything else waits: a pause can be
        a comma, and the words after it are heard with the ones before. Words that would
        cut the reply but are not the caller's (:meth:`ListenerHooks.addressed`) are
        dropped and the reply goes on."""
        overlap, replies = self._overlap, self.replies
        assert overlap is not None and replies is not None
        meaning: str | None = "interrupt" if heard is None else \
            overlap_verdict(heard, self.language, final=final, speech_s=speech_s)
        now = self.runtime.clock.now()
        logger.debug("heard %r over the reply (%.1f s%s): %s", heard, speech_s,
                     ", ended" if final else ", paused" if paused else "",
                     meaning or "undecided")
        if meaning == "interrupt" and not self.hooks.addressed(overlap.started_at - PREROLL_S):
            # words, but not the caller's (a bystander's, a TV's): the reply goes on
            self.not_addressed_interruptions += 1
            logger.info("words over the reply from no one talking to it; the reply "
                        "goes on")
            meaning, final = "not addressed", True
        if meaning == "interrupt":
            self._overlap = None
            await replies.barge_in()
            await self.hooks.on_speech_start()
            return True
        if meaning == "backchannel" and (final or paused):
            assert heard is not None
            self.backchannels += 1
            await replies.backchannel(heard.text)
        elif meaning == "not addressed":  # and not heard for words again for a while
            self._not_words_until = now + FALSE_AFTER_S
        elif meaning == "nothing" and (final or now - overlap.started_at >= FALSE_AFTER_S):
            self.false_interruptions += 1
            if not final and not paused:  # a long sound: not heard for words for a while
                self._not_words_until = now + FALSE_AFTER_S
        else:
            return False  # not decided yet
        self._overlap = None
        replies.unduck()
        self._drop_speech()
        return False

    def _drop_speech(self) -> None:
        """The speech heard since it started is no turn (the assistant's echo, a sound over
        a reply, a backchannel): forget it, the VAD's state and the preroll stay."""
        self.turns.reset()
        self.utterance, self._speech_end_at = [], None

    async def _speech_start(self) -> None:
        # the preroll the unit path keeps: its last units, the one being heard included
        keep = PREROLL_UNITS - 1 if self._ahead_audio else PREROLL_UNITS
        self.utterance, self.preroll = self.preroll[max(0, len(self.preroll) - keep):], []
        self._speech_end_at = None
        replies = self.replies
        sounding_since = replies.sounding_since() if replies is not None else None
        if sounding_since is not None and \
                self.runtime.clock.now() - sounding_since < self.runtime.echo_warmup_s:
            # most likely the assistant's own voice coming back: not a barge-in
            self._lift_onset_duck()
            self._drop_speech()
            self.echo_starts += 1
            logger.debug("speech at the reply's first sound taken for its echo")
            return
        if replies is not None and self.by_words and \
                (sounding_since is not None or replies.pending()):
            # over a reply, or one about to sound: a cough as the answer or the greeting
            # is made is no more an interruption than one over its sound
            now = self.runtime.clock.now()
            if now < self._not_words_until:  # the long sound that was no interruption
                self._lift_onset_duck()
                self._drop_speech()
                return
            # at once (if its onset did not already; a reply yet to sound, when it does:
            # feed); whether it is an interruption, its words will tell
            replies.duck()
            self._ducked_at_onset = False  # the overlap's duck now
            self._overlap = Overlap(now, start_samples=self.length(),
                                    heard_samples=self.length())
            return
        self._ducked_at_onset = False  # the reply is cut (or none sounds)
        if replies is not None:
            await replies.barge_in()
        await self.hooks.on_speech_start()

    async def _end_of_turn(self) -> None:
        """The turn ended: its speech stopped when the pause began (a turn cut at its
        longest, with no pause, stops now)."""
        now = self.runtime.clock.now()
        speech_end_s = now
        if self._speech_end_at is not None:
            speech_end_s -= (self.vad_samples - self._speech_end_at) / INPUT_RATE_HZ
        await self.hooks.on_end_of_turn(speech_end_s)
        self.utterance, self._speech_end_at = [], None
