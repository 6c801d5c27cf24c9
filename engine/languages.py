"""Which languages the cascade's models can do, checked at startup (``--language``).

- Speech recognition: a Whisper model is multilingual when its vocabulary has the
  multilingual size (51,865+ tokens; English-only ``.en`` models have 51,864). ``auto`` lets
  Whisper detect the language per turn; with an English-only model it means English.
- Voice: a Piper voice's ``.onnx.json`` names its language (``language.code``); espeak-ng
  speaks ~100 languages (``espeak-ng --voices=CODE``).
- Replies: the LLM is told which language to answer in (the language asked for, or the one
  Whisper detected in the user's turn); how well it does depends on the model - the
  bundled SmolLM2-135M answers in English, whatever it is told.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from functools import cache
from pathlib import Path

from omnicall.engine.bundled_models import (
    BUNDLED_ASR,
    ModelMissing,
    joe_voice_onnx,
    whisper_files,
    whisper_name,
)

logger = logging.getLogger(__name__)

MULTILINGUAL_VOCAB = 51_865
AUTO = "auto"


class LanguageError(ValueError):
    """The chosen models cannot do the language asked for (the message says what to do)."""


@cache
def language_names() -> dict[str, str]:
    """Whisper's language codes and English names (``de`` -> ``german``)."""
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    return dict(LANGUAGES)


def language_name(code: str) -> str:
    return language_names().get(code, code).title()


def asr_is_multilingual(asr: str) -> bool:
    """``asr``: what ``--asr`` takes ('' or tiny.en, base, or a CTranslate2 Whisper folder)."""
    folder = whisper_files(asr).folder
    vocabulary = folder / "vocabulary.txt"
    if vocabulary.is_file():
        with vocabulary.open(encoding="utf-8", errors="replace") as lines:
            return sum(1 for _ in lines) >= MULTILINGUAL_VOCAB
    tokenizer = folder / "tokenizer.json"
    if tokenizer.is_file():
        vocab = json.loads(tokenizer.read_text(encoding="utf-8")).get("model", {}).get(
            "vocab", {})
        return len(vocab) >= MULTILINGUAL_VOCAB
    return False


def voice_language(voice: str) -> str | None:
    """The language code a Piper voice speaks ('en'); None for espeak-ng (many)."""
    if voice == "espeak":
        return None
    try:
        path = Path(voice) if voice else joe_voice_onnx()
    except ModelMissing:
        return None  # the bundled voice is missing: the engine falls back to espeak-ng
    config = json.loads(Path(str(path) + ".json").read_text(encoding="utf-8"))
    code = str((config.get("language") or {}).get("code") or config.get(
        "espeak", {}).get("voice", "en"))
    return code.replace("-", "_").split("_")[0].lower()


def espeak_speaks(code: str) -> bool:
    exe = shutil.which("espeak-ng")
    if exe is None:
        return False
    listed = subprocess.run([exe, f"--voices={code}"], capture_output=True, text=True,
                            timeout=10, check=False).stdout
    return len(listed.strip().splitlines()) > 1


def check_languages(language: str, asr: str, voice: str, asr_url: str = "",
                    tts_url: str = "") -> None:
    """Raise :class:`LanguageError` when the ASR or the voice cannot do ``language``. A
    server by URL (``asr_url``, ``tts_url``) is trusted to know its languages (there is no
    asking it): then the local model that stands in while it fails is checked with a warning
    instead of an error."""
    if language != AUTO and language not in language_names():
        raise LanguageError(f"--language {language}: not a language Whisper knows (codes "
                            "such as en, de, fr, es, it, ja, zh)")
    for check, server in ((_check_asr, asr_url), (_check_voice, tts_url)):
        if server and language == AUTO:
            continue  # the server detects (ASR) or speaks (voice) what it is given
        try:
            check(language, asr if check is _check_asr else voice)
        except LanguageError as exc:
            if not server:
                raise
            logger.warning("%s (only for the local stand-in: the server at %s is trusted to "
                           "do it)", exc, server)


def _check_asr(language: str, asr: str) -> None:
    multilingual = asr_is_multilingual(asr)
    asr_name = f"the bundled whisper {whisper_name(asr)}" if asr in ("", *BUNDLED_ASR) else asr
    if language == AUTO:
        if not multilingual:
            logger.warning("--language auto: %s is English-only, so every turn is heard as "
                           "English (--asr base, or a multilingual Whisper folder, detects "
                           "languages)", asr_name)
        return
    if language != "en" and not multilingual:
        raise LanguageError(f"--language {language}: {asr_name} hears English only; give "
                            "--asr base (the bundled multilingual Whisper base) or a "
                            "multilingual Whisper model folder (CTranslate2, e.g. converted "
                            "with ct2-transformers-converter)")


def _check_voice(language: str, voice: str) -> None:
    if language == AUTO:
        return
    spoken = voice_language(voice)
    if voice == "espeak":
        if not espeak_speaks(language):
            raise LanguageError(f"--language {language}: espeak-ng has no voice for it")
    elif spoken is not None and spoken != language:
        raise LanguageError(f"--language {language}: the voice {voice or 'en_US-joe (bundled)'}"
                            f" speaks {language_name(spoken)} ({spoken}); give --voice a "
                            f"Piper voice in {language_name(language)} (NAME.onnx with "
                            "NAME.onnx.json) or --voice espeak")


def reply_language_note(code: str) -> str:
    """The system-prompt line that asks the LLM to answer in ``code``'s language."""
    return f"Always reply in {language_name(code)}."
