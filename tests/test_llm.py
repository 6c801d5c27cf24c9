import threading

from omnicall.engine.cascade.engine import CascadeEngine
from omnicall.engine.cascade.history import Conversation


def test_streams_a_guarded_reply(cascade_engine: CascadeEngine) -> None:
    llm = cascade_engine.llm
    deltas = list(llm.stream(Conversation().messages("", "What is the capital of France?"),
                             threading.Event()))
    text = "".join(deltas)
    assert len(deltas) > 2 and len(text.split()) >= 3
    assert not any(c in text for c in "*#`")
    assert sum(text.count(p) for p in ".!?") <= 3


def test_prefilled_partial_words_give_the_same_answer(cascade_engine: CascadeEngine) -> None:
    """The words heard so far go into the cache while the user speaks: the answer is the
    one an unprefilled prompt gets (greedy), and a differing final transcript is fine."""
    from omnicall.engine.cascade.llm import LlamaLlm

    llm = cascade_engine.llm
    assert isinstance(llm, LlamaLlm)
    conv = Conversation()

    def answer(text: str) -> str:
        return "".join(d for d in llm.stream(conv.messages("", text), threading.Event(),
                                             max_tokens=16, greedy=True)
                       if isinstance(d, str))

    final = "How many legs does a spider have?"
    llm.llm.reset()  # nothing cached
    plain = answer(final)
    llm.llm.reset()
    assert llm.prefill(conv.messages("", "")) > 5  # the prompt up to the user's words
    added = llm.prefill(conv.messages("", "How many legs"))
    assert 0 < added <= 4  # only the new words
    assert llm.prefill(conv.messages("", "How many legs")) == 0  # already cached
    assert answer(final) == plain
    llm.prefill(conv.messages("", "How many eggs"))  # a partial the final will not match
    assert answer(final) == plain


def test_decodes_on_two_threads_until_the_first_clause_then_on_one(
        cascade_engine: CascadeEngine) -> None:
    """Sprint to the first clause (the user waits for it), cruise after it: llama.cpp's own
    thread count follows, and the reply goes on after the switch."""
    import llama_cpp

    from omnicall.engine.cascade.llm import LlamaLlm

    llm = cascade_engine.llm
    assert isinstance(llm, LlamaLlm)
    assert (llm.sprint_threads, llm.threads) == (2, 1)  # the defaults
    ctx = llm.llm._ctx.ctx
    messages = Conversation().messages("", "Tell me something about the moon.")

    def answer(cruise_after: int | None) -> tuple[str, list[int]]:
        text, threads = "", []
        for i, delta in enumerate(llm.stream(messages, threading.Event(), max_tokens=24,
                                             greedy=True)):
            assert isinstance(delta, str)
            threads.append(llama_cpp.llama_n_threads(ctx))
            text += delta
            if cruise_after is not None and i + 1 >= cruise_after:
                llm.cruise()
        return text, threads

    sprinting, threads = answer(None)
    assert set(threads) == {2} and len(sprinting.split()) >= 3
    switched, threads = answer(2)
    assert threads[:2] == [2, 2] and set(threads[2:]) == {1} and len(threads) > 3
    assert len(switched.split()) >= 5
    assert llama_cpp.llama_n_threads_batch(ctx) == 2  # prompts are always prefilled on 2


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
    total = sum(cascade_engine.llm.count_tokens(t.text) + 4 for t in conv.turns)
    assert total <= 60 and conv.turns and conv.turns[0][0] == "user"
    assert "19" in conv.turns[-1][1]  # the newest exchange survives
    messages = conv.messages("one person is facing the camera.", "and now?")
    assert messages[0]["role"] == "system" and "camera" in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "and now?"}
    # the changing camera facts come after the history: the cached prefix stays valid
    assert messages[-2]["role"] == "system" and "one person" in messages[-2]["content"]
    assert messages[:-2] == conv.messages("", "x")[:-1]


async def test_instructions_become_the_system_prompt(cascade_engine: CascadeEngine) -> None:
    from omnicall.engine.base import SessionOptions
    from omnicall.engine.cascade.settings import CascadeSettings

    persona = CascadeEngine(CascadeSettings(instructions="You are Ada, the museum guide.",
                                            llm_context=4096), progress=None)
    conversation = persona.new_conversation()
    assert conversation.messages("", "hi")[0] == {"role": "system",
                                                  "content": "You are Ada, the museum guide."}
    assert conversation.max_tokens == 1536  # 3/8 of the context window
    session = cascade_engine.open_session("persona", SessionOptions(
        history=(("user", "Where is the cafe?"), ("assistant", "On the ground floor."))))
    session.set_instructions("Answer like a pirate.")
    messages = session.conversation.messages("", "And the shop?")  # type: ignore[attr-defined]
    assert messages[0]["content"] == "Answer like a pirate."
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    await session.close()
