import pytest

from engine import models


def test_bundled_models_are_found_inside_packages() -> None:
    for finder in (models.silero_vad_onnx, models.whisper_tiny_en_dir, models.smollm2_gguf,
                   models.joe_voice_onnx):
        path = finder()
        assert path.exists() and "site-packages" in str(path)


def test_missing_package_names_the_fix() -> None:
    with pytest.raises(models.ModelMissing, match=r"pip install no-such-voice"):
        models.package_dir("no_such_voice_pkg", "no-such-voice")
