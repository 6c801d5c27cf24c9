from omnicall.engine.cascade.clauses import ClauseSplitter


def stream(text: str, size: int = 3, first_max_words: int | None = None,
           phrases: bool = False) -> list[str]:
    sp = ClauseSplitter(min_words=4, first_max_words=first_max_words, phrases=phrases)
    out = []
    for i in range(0, len(text), size):
        out += sp.feed(text[i:i + size])
    rest = sp.flush()
    return out + ([rest] if rest else [])


def test_streaming_equals_batch_and_cuts_early() -> None:
    text = "Sure, I can see you. You are wearing glasses, and you look happy today! Anything else?"
    streamed = stream(text)
    assert streamed == stream(text, size=len(text)) == [
        "Sure, I can see you.", "You are wearing glasses,", "and you look happy today!",
        "Anything else?"]


def test_no_cut_inside_numbers_or_short_clauses() -> None:
    assert stream("It costs 3.50, roughly.") == ["It costs 3.50, roughly."]


def test_overlong_text_without_punctuation_is_cut_at_a_space() -> None:
    sp = ClauseSplitter(max_chars=20, first_max_words=None)
    out = sp.feed("one two three four five six seven eight")
    assert out and all(len(c) <= 20 for c in out)


def test_a_long_first_clause_is_cut_early_only_once() -> None:
    text = "The capital of France is the city of Paris on the Seine. It is a very big city"
    assert stream(text, first_max_words=6) == stream(text, size=len(text), first_max_words=6) \
        == ["The capital of France is the city", "of Paris on the Seine.",
            "It is a very big city"]


def test_the_first_clause_ends_where_speech_can_pause() -> None:
    text = "Paris is the capital and the largest city of France, with many museums."
    assert stream(text, first_max_words=8, phrases=True) == stream(
        text, size=len(text), first_max_words=8, phrases=True) == [
        "Paris is the capital", "and the largest city of France,", "with many museums."]
    # never before the third word, and only the first clause is cut without punctuation
    assert stream("The sky on a clear day is blue in the summer and grey in winter.",
                  first_max_words=8, phrases=True) == ["The sky on a clear day is blue",
                                         "in the summer and grey in winter."]
    sp = ClauseSplitter(weak_endings=False)  # the fixed 4-word cut
    assert sp.feed("The sky on a clear day is blue. ") == ["The sky on a",
                                                            "clear day is blue."]


def test_the_first_clause_does_not_end_on_a_weak_word() -> None:
    def first(text: str) -> str:
        streamed = stream(text, first_max_words=4)
        assert streamed == stream(text, size=len(text), first_max_words=4)
        return streamed[0]

    assert first("The sky on a clear day is blue.") == "The sky on a clear"
    assert first("Paris is the capital and the largest city of France.") == \
        "Paris is the capital"
    assert first("Mount Everest is the tallest mountain in the world.") == \
        "Mount Everest is the tallest"
    assert first("It is one of the very best cities in the world.") == \
        "It is one of the very best"
    # past WEAK_EXTEND_WORDS (3) weak words the cut comes anyway
    assert first("It is one of the very very best cities in the world.") == \
        "It is one of the very very"
    # the cut waits for the word after the weak ones
    sp = ClauseSplitter()
    assert sp.feed("The sky on a ") == [] and sp.feed("clear ") == []
    assert sp.feed("day ") == ["The sky on a clear"]
