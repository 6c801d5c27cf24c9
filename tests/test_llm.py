import threading

from engine.cascade.engine import CascadeEngine
from engine.cascade.llm import Conversation, clean_delta


def test_streams_a_guarded_reply(cascade_engine: CascadeEngine) -> None:
    llm = cascade_engine.llm
    deltas = list(llm.stream(Conversation().messages("", "What is the capital of France?"),
                             threading.Event()))
    text = "".join(deltas)
    assert len(deltas) > 2 and len(text.split()) >= 3
    assert not any(c in text for c in "*#`")
    assert sum(text.count(p) for p in ".!?") <= 3


def test_cancel_stops_generation(cascade_engine: CascadeEngine) -> None:
    cancel = threading.Event()
    got = []
    for delta in cascade_engine.llm.stream(
            Conversation().messages("", "Tell me a long story about dragons."), cancel):
        got.append(delta)
        cancel.set()
    assert len(got) == 1


def test_memory_is_bounded_by_tokens(cascade_engine: CascadeEngine) -> None:
    conv = Conversation(max_tokens=60)
    for i in range(20):
        conv.add("user", f"question number {i} about the weather in the mountains")
        conv.add("assistant", f"answer number {i}: it will be sunny and warm")
    conv.trim(cascade_engine.llm.count_tokens)
    total = sum(cascade_engine.llm.count_tokens(t) + 4 for _, t in conv.turns)
    assert total <= 60 and conv.turns and conv.turns[0][0] == "user"
    assert "19" in conv.turns[-1][1]  # the newest exchange survives
    messages = conv.messages("one person is facing the camera.", "and now?")
    assert messages[0]["role"] == "system" and "camera" in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "and now?"}
    # the changing camera facts come after the history: the cached prefix stays valid
    assert messages[-2]["role"] == "system" and "one person" in messages[-2]["content"]
    assert messages[:-2] == conv.messages("", "x")[:-1]


def test_clean_delta_strips_markup() -> None:
    assert clean_delta("**Hi** `there` # yes") == "Hi there  yes"
