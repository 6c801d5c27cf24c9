"""The call's conversation in the Thinker (engine.qwen_omni.prompt): what is kept of a reply
cut after the caller heard part of it, on the tiny model."""

from __future__ import annotations

import torch

from omnicall.engine.qwen_omni import prompt
from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.model import OmniModel
from tests.qwen_fixtures import noise

#: chunks of sound out (samples at 24 kHz after each) and the reply tokens voiced by then
FRAMES_AT = [(1920, 2), (3840, 3), (7680, 5), (24_000, 14)]


def decode(m: OmniModel, state: th.ThinkerState, tokens: list[int]) -> None:
    with torch.inference_mode():
        for token in tokens:
            th.step(m, state, token)


def test_the_tokens_heard_are_those_of_the_last_chunk_played_out() -> None:
    assert prompt.heard_tokens(FRAMES_AT, 0, 20) == 0
    assert prompt.heard_tokens(FRAMES_AT, 79, 20) == 0
    assert prompt.heard_tokens(FRAMES_AT, 80, 20) == 2  # 1920 samples are exactly 80 ms
    assert prompt.heard_tokens(FRAMES_AT, 319, 20) == 3
    assert prompt.heard_tokens(FRAMES_AT, 320, 20) == 5
    assert prompt.heard_tokens(FRAMES_AT, 60_000, 20) == 14
    assert prompt.heard_tokens(FRAMES_AT, 60_000, 9) == 9  # never more than were generated
    assert prompt.heard_tokens([], 500, 9) == 0


def test_a_cut_reply_keeps_the_heard_tokens_and_is_closed(omni: OmniModel) -> None:
    state = th.ThinkerState()
    prompt.append_ids(omni, state, prompt.system_ids(omni, "You are helpful."))
    prompt.append_ids(omni, state, [*prompt.user_open_ids(omni), omni.audio_start_id])
    prompt.append_audio(omni, state, (noise(1.0) * 32767).astype("int16"))
    prompt.append_ids(omni, state, prompt.user_close_ids(omni))
    start = state.length
    reply = [omni.encode(word)[0] for word in ("one", " two", " three", " four", " five")]
    decode(omni, state, reply[:4])  # the fifth was sampled, never forwarded (a final token)

    keep = prompt.heard_tokens(FRAMES_AT, 100, len(reply))  # 100 ms heard: 2 tokens
    prompt.close_reply(omni, state, start, reply, keep, window_s=30.0, protect_from=None)
    newline = omni.encode("\n")
    assert state.ids[start:] == [*reply[:2], omni.im_end_id, *newline]
    assert state.cache_length() == state.length

    # all heard, the final token too (it is appended with the close)
    state2 = th.ThinkerState()
    prompt.append_ids(omni, state2, prompt.user_close_ids(omni)[1:])
    begin = state2.length
    decode(omni, state2, reply[:4])
    prompt.close_reply(omni, state2, begin, reply, len(reply), 30.0, None)
    assert state2.ids[begin:] == [*reply, omni.im_end_id, *newline]
    assert state2.cache_length() == state2.length


def test_a_cancelled_speculation_rolls_back_to_the_open_user_turn(omni: OmniModel) -> None:
    state = th.ThinkerState()
    prompt.append_ids(omni, state, [*prompt.user_open_ids(omni), omni.audio_start_id])
    mark = state.length
    prompt.append_ids(omni, state, prompt.user_close_ids(omni))
    decode(omni, state, omni.encode("hi")[:1])
    prompt.rollback(state, mark)
    assert state.length == mark == state.cache_length()
