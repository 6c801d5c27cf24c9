"""`omnicall memory`: the KV arithmetic against measured tensors of the tiny model."""

from __future__ import annotations

from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.gpu_memory import estimate, kv_bytes_per_token, main
from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.tiny import real_size_config_dict, tiny_config_dict
from tests.qwen_fixtures import noise, prefill_audio_turn


def test_kv_per_token_matches_the_cache_tensors(omni: OmniModel) -> None:
    state = th.ThinkerState()
    prefill_audio_turn(omni, state, noise(2.0))
    assert state.cache is not None
    measured = sum(layer.keys.numel() * layer.keys.element_size()
                   + layer.values.numel() * layer.values.element_size()
                   for layer in state.cache.layers)
    per_token = kv_bytes_per_token(tiny_config_dict()["thinker_config"]["text_config"], 4)
    assert measured == per_token * state.cache_length()


def test_parameter_count_matches_the_loaded_model(omni: OmniModel) -> None:
    loaded = sum(p.numel() for p in omni.model.parameters())
    e = estimate(tiny_config_dict(), 10, "float32")
    assert abs(e.weights_gb * 1e9 / 4 - loaded) < 1
    measured_bytes = sum(p.numel() * p.element_size() for p in omni.model.parameters())
    assert abs(e.weights_gb * 1e9 - measured_bytes) < 8


def test_real_size_numbers() -> None:
    config = real_size_config_dict()
    assert kv_bytes_per_token(config["thinker_config"]["text_config"], 2) == 96 * 1024
    assert kv_bytes_per_token(config["talker_config"]["text_config"], 2) == 20 * 1024
    windowed = [estimate(config, d, parameters=35_000_000_000).kv_gb for d in (60, 600)]
    unbounded = [estimate(config, d, window_s=None, parameters=35_000_000_000).kv_gb
                 for d in (60, 600)]
    assert windowed[0] == windowed[1]  # the window stops growth
    assert unbounded[1] > 5 * unbounded[0] > 0
    assert abs(estimate(config, 120, parameters=1).seed_gb - 122.7) < 1e-9


def test_cli_prints_a_table(capsys: object) -> None:
    assert main(["--model", "tiny", "--duration", "60", "120"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "KV per token" in out and out.count("\n") >= 5
