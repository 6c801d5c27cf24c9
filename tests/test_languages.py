"""--language: what the bundled models can do, checked before anything loads."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from omnicall.engine.languages import (
    LanguageError,
    asr_is_multilingual,
    check_languages,
    language_name,
    reply_language_note,
    voice_language,
)


def fake_whisper(folder: Path, vocab: int) -> str:
    folder.mkdir()
    (folder / "vocabulary.txt").write_text("\n".join(f"t{i}" for i in range(vocab)) + "\n")
    return str(folder)


def piper_voice(folder: Path, code: str) -> str:
    onnx = folder / f"{code}-test.onnx"
    onnx.write_bytes(b"")
    Path(str(onnx) + ".json").write_text(json.dumps({"language": {"code": code}}))
    return str(onnx)


def test_the_bundled_models_are_english_only() -> None:
    assert not asr_is_multilingual("")
    assert voice_language("") == "en"
    check_languages("en", "", "")  # the default works
    check_languages("auto", "", "")  # auto with tiny.en: English (a warning, not an error)


def test_a_language_the_bundled_asr_cannot_hear_is_a_clear_error() -> None:
    with pytest.raises(LanguageError, match=r"--language de: the bundled whisper tiny.en hears "
                                            r"English only; give --asr base \(the bundled "
                                            r"multilingual Whisper base\) or a multilingual"):
        check_languages("de", "", "")
    with pytest.raises(LanguageError, match="not a language Whisper knows"):
        check_languages("xx", "", "")


def test_the_bundled_base_asr_hears_other_languages() -> None:
    assert asr_is_multilingual("base")
    check_languages("de", "base", "espeak")
    check_languages("auto", "base", "espeak")


def test_a_voice_of_another_language_is_a_clear_error(tmp_path: Path) -> None:
    multilingual = fake_whisper(tmp_path / "whisper-small", 51_865)
    assert asr_is_multilingual(multilingual)
    german = piper_voice(tmp_path, "de_DE")
    assert voice_language(german) == "de"
    check_languages("de", multilingual, german)
    check_languages("de", multilingual, "espeak")  # espeak-ng speaks German
    with pytest.raises(LanguageError, match=r"the voice en_US-joe \(bundled\) speaks English "
                                            r"\(en\); give --voice a Piper voice in German"):
        check_languages("de", multilingual, "")
    with pytest.raises(LanguageError, match="speaks German"):
        check_languages("fr", multilingual, german)


def test_the_reply_language_note_names_the_language() -> None:
    assert language_name("de") == "German"
    assert reply_language_note("ja") == "Always reply in Japanese."


def test_a_speech_server_by_url_is_trusted_with_the_language(
        caplog: pytest.LogCaptureFixture) -> None:
    """--language de with tiny.en and the English voice is an error, unless servers by URL
    hear and speak: then only their local stand-ins are warned about."""
    with pytest.raises(LanguageError, match="hears English only"):
        check_languages("de", "", "", tts_url="http://gpu:8880/v1")  # the ASR is still local
    with pytest.raises(LanguageError, match="speaks English"):
        check_languages("de", "", "", asr_url="http://gpu:8001/v1")  # the voice is local
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="omnicall.engine.languages"):
        check_languages("de", "", "", asr_url="http://gpu:8001/v1",
                        tts_url="http://gpu:8880/v1")
    assert len(caplog.records) == 2 and all("stand-in" in r.message for r in caplog.records)
