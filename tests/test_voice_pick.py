from omnicall.engine.cascade.voice_pick import Voice, VoicePick


def test_server_audio_picks_the_server_voice_and_its_text_is_not_spoken_twice() -> None:
    pick = VoicePick(server_may_speak=True, wait_s=1.5)
    assert pick.clauses(["Hello there,"], 0.0) == []  # held: the voice is undecided
    assert pick.clauses(["how are you?"], 0.4) == []
    assert pick.audio() and pick.voice is Voice.SERVER
    assert pick.clauses(["More words."], 2.0) == []  # the server speaks them
    assert pick.end() == []


def test_a_text_only_reply_falls_back_to_the_local_voice_at_its_end() -> None:
    pick = VoicePick(server_may_speak=True)
    assert pick.clauses(["One,"], 0.0) == []
    assert pick.end() == ["One,"]
    assert pick.voice is Voice.LOCAL


def test_waiting_too_long_picks_the_local_voice_and_later_audio_is_dropped() -> None:
    pick = VoicePick(server_may_speak=True, wait_s=1.0)
    assert pick.clauses(["First,"], 10.0) == []
    assert pick.clauses(["second,"], 10.5) == []
    assert pick.clauses(["third."], 11.0) == ["First,", "second,", "third."]
    assert pick.clauses(["fourth."], 11.2) == ["fourth."]
    assert not pick.audio() and pick.dropped_audio == 1  # never two voices at once
    assert pick.end() == []


def test_without_audio_out_every_clause_is_spoken_at_once() -> None:
    pick = VoicePick(server_may_speak=False)
    assert pick.clauses(["Hi."], 0.0) == ["Hi."]
    assert not pick.audio()
