"""The call watchdog's verdicts from times alone: connect and media timeouts, a stalled
reply (once), when the network is sampled, and what the page is told of a stall."""

from __future__ import annotations

import numpy as np

from omnicall.app.call.watchdog import STALL_MESSAGE, CallWatchdog
from omnicall.app.calls import SessionTimeouts
from omnicall.engine.events import AssistantAudio, TurnEvent

TIMEOUTS = SessionTimeouts(media_timeout_s=3.0, connect_timeout_s=30.0, reply_timeout_s=20.0,
                           network_interval_s=5.0)
NEVER = float("-inf")  # no audio yet


def test_a_call_that_never_connects_is_closed_after_the_connect_timeout() -> None:
    dog = CallWatchdog(TIMEOUTS, 0.0)
    dog.start(100.0)  # counts from the answer, not from when the session was made
    assert dog.close_reason(129.0, connected=False, last_audio_s=NEVER) is None
    assert dog.close_reason(130.5, connected=False, last_audio_s=NEVER) == "connect_timeout"


def test_a_connected_call_without_audio_is_closed_after_the_media_timeout() -> None:
    dog = CallWatchdog(TIMEOUTS, 0.0)
    assert dog.close_reason(2.5, connected=True, last_audio_s=NEVER) is None  # from the start
    assert dog.close_reason(3.5, connected=True, last_audio_s=NEVER) == "media_timeout"
    assert dog.close_reason(10.0, connected=True, last_audio_s=8.0) is None
    assert dog.close_reason(11.5, connected=True, last_audio_s=8.0) == "media_timeout"
    assert dog.close_reason(500.0, connected=False, last_audio_s=8.0) == "connect_timeout"


def test_a_reply_that_goes_quiet_stalls_once() -> None:
    dog = CallWatchdog(TIMEOUTS, 0.0)
    assert dog.stalled_reply(100.0) is None  # no reply open: quiet is fine
    dog.engine_event(TurnEvent("assistant", "start", 7), 100.0)
    dog.engine_event(AssistantAudio(np.zeros(10, np.int16), 24_000, 0, 7), 105.0)
    assert dog.reply_open == 7 and dog.quiet_s(115.0) == 10.0
    assert dog.stalled_reply(125.0) is None
    assert dog.stalled_reply(125.5) == 7
    assert dog.stalled_reply(200.0) is None and dog.stalls == 1 and dog.reply_open is None


def test_a_reply_whose_sound_still_plays_has_not_stalled() -> None:
    """A long reply made long ago (a kiosk's 35 s welcome) is quiet on the engine's side for
    longer than the timeout while it plays out: that is progress."""
    dog = CallWatchdog(TIMEOUTS, 0.0)
    dog.engine_event(TurnEvent("assistant", "start", 3), 0.0)
    dog.engine_event(AssistantAudio(np.zeros(10, np.int16), 24_000, 0, 3), 1.0)
    for t in range(2, 40):  # its sound goes out for 38 s
        assert dog.stalled_reply(float(t), playing=True) is None
    assert dog.stalled_reply(40.0 + TIMEOUTS.reply_timeout_s - 1) is None
    assert dog.stalled_reply(40.0 + TIMEOUTS.reply_timeout_s + 1) == 3  # then it can stall


def test_a_reply_that_ends_is_not_watched() -> None:
    dog = CallWatchdog(TIMEOUTS, 0.0)
    dog.engine_event(TurnEvent("assistant", "start", 1), 1.0)
    dog.engine_event(TurnEvent("assistant", "end", 1), 2.0)
    dog.engine_event(TurnEvent("user", "start", 2), 3.0)  # the caller's turn opens nothing
    assert dog.reply_open is None and dog.stalled_reply(100.0) is None


def test_the_network_is_sampled_when_connected_and_due() -> None:
    dog = CallWatchdog(TIMEOUTS, 0.0)
    assert dog.network_due(5.0, sampled_at_s=0.0, connected=True)
    assert not dog.network_due(4.9, sampled_at_s=0.0, connected=True)
    assert not dog.network_due(50.0, sampled_at_s=0.0, connected=False)


def test_a_stall_tells_the_page_an_error_and_the_cut_replys_end() -> None:
    error, end = CallWatchdog.stall_messages(3)
    assert error == {"type": "error", "recoverable": True, "message": STALL_MESSAGE}
    assert end == {"type": "turn", "role": "assistant", "phase": "end", "turn": 3,
                   "interrupted": True}
