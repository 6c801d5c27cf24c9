from aiortc.sdp import SessionDescription

from omnicall.media.negotiated import audio_codecs, opus_payload_types

ANSWER_SDP = ("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"
              "m=audio 9 UDP/TLS/RTP/SAVPF 111 0\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\n"
              "a=rtpmap:111 opus/48000/2\r\na=rtpmap:0 PCMU/8000\r\n")


def test_the_codecs_of_one_audio_section_in_preference_order() -> None:
    answer = SessionDescription.parse(ANSWER_SDP)
    assert [(c.mimeType.lower(), c.payloadType) for c in audio_codecs(answer, "0")] == [
        ("audio/opus", 111), ("audio/pcmu", 0)]
    assert [c.payloadType for c in audio_codecs(answer, None)] == [111, 0]


def test_a_missing_section_has_no_codecs() -> None:
    assert audio_codecs(SessionDescription.parse(ANSWER_SDP), "1") == []
    empty = SessionDescription.parse("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n")
    assert audio_codecs(empty, "0") == []


def test_payload_types_of_opus_among_an_answers_codecs() -> None:
    codecs = audio_codecs(SessionDescription.parse(ANSWER_SDP), "0")
    assert opus_payload_types(codecs) == {111}
    assert opus_payload_types(audio_codecs(SessionDescription.parse(ANSWER_SDP), "1")) == set()
