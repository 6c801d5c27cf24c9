from pathlib import Path

import pytest

from omnicall.app.config import ConfigError, ServerConfig
from omnicall.app.config_sources import parse_config
from omnicall.media.echo_canceller import RoomSettings


def test_the_cascade_gets_its_settings_from_the_config() -> None:
    from omnicall.app.engine_settings import cascade_settings

    cfg = parse_config(["--asr-partial-threads", "0", "--asr-beam-size", "3"], {})
    settings = cascade_settings(cfg)
    assert (settings.asr_partial_threads, settings.asr_beam_size) == (0, 3)
    assert cascade_settings(ServerConfig()).asr_partial_threads == 1
    eyes = cascade_settings(parse_config(["--camera-fact-confidence", "0.7",
                                          "--camera-read-timeout-s", "1.5"], {}))
    assert (eyes.camera_fact_confidence, eyes.camera_read_timeout_s) == (0.7, 1.5)


@pytest.mark.parametrize("argv", [
    ["--port", "70000"], ["--engine", "nope"], ["--jitter-frames", "0"],
    ["--cert", "a.pem"], ["--video-fps", "0"], ["--port", "abc"],
    ["--asr-partial-threads", "-1"], ["--camera-fact-confidence", "1.5"],
    ["--camera-read-timeout-s", "0"], ["--duck", "mute"], ["--interruptions", "cough"],
])
def test_invalid_values(argv: list[str]) -> None:
    with pytest.raises(ConfigError):
        parse_config(argv, {})


def test_engine_settings_come_from_their_flags_and_variables() -> None:
    """Each engine's flags land in its section; a section's own checks name the flag."""
    cfg = parse_config(["--engine", "remote", "--engine-url", "ws://a", "--engine-url",
                        "ws://b, ws://c", "--camera-size", "320", "--speaker", "chelsie"],
                       {"OMNICALL_LLM_CONTEXT": "4096"})
    assert cfg.remote.engine_urls == ("ws://a", "ws://b", "ws://c")
    assert (cfg.conversation.camera.size, cfg.omni.speaker, cfg.cascade.llm_context) == \
        (320, "chelsie", 4096)
    env = parse_config(["--engine", "remote"], {"OMNICALL_ENGINE_URL": "ws://x,ws://y"})
    assert env.remote.engine_urls == ("ws://x", "ws://y")
    with pytest.raises(ConfigError, match=r"camera_size: need 16 <= size.*from --camera-size"):
        parse_config(["--camera-size", "8"], {})
    with pytest.raises(ConfigError, match="from OMNICALL_HANGOVER_MS"):
        parse_config([], {"OMNICALL_HANGOVER_MS": "20"})


def test_the_end_of_turn_model_needs_local_turns_on_the_remote_engine() -> None:
    remote = ["--engine", "remote", "--engine-url", "ws://127.0.0.1:9/v1/realtime"]
    with pytest.raises(ConfigError, match="turn-mode local"):
        parse_config([*remote, "--turn-model", "smart"], {})
    cfg = parse_config([*remote, "--turn-model", "smart", "--turn-mode", "local"], {})
    assert (cfg.conversation.turns.turn_model, cfg.remote.turn_mode) == ("smart", "local")


def test_wrong_model_and_voice_paths_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--voice /x/joe.onnx: no such file \(expected a "
                                          r"Piper voice: NAME.onnx with NAME.onnx.json"):
        parse_config(["--voice", "/x/joe.onnx"], {})
    voice = tmp_path / "v.onnx"
    voice.write_bytes(b"onnx")
    with pytest.raises(ConfigError, match=r"v.onnx.json is missing"):
        parse_config(["--voice", str(voice)], {})
    with pytest.raises(ConfigError, match=r"--llm /x/m.gguf: no such file \(expected a GGUF"):
        parse_config(["--llm", "/x/m.gguf"], {})
    with pytest.raises(ConfigError, match=r"--asr .*: no model.bin in that folder"):
        parse_config(["--asr", str(tmp_path)], {})
    with pytest.raises(ConfigError, match=r"--asr /x/whisper: no such folder \(expected a "
                                          r"CTranslate2 .* bundled model's name: tiny.en, base"):
        parse_config(["--asr", "/x/whisper"], {})
    assert parse_config(["--asr", "base"], {}).cascade.asr == "base"
    assert parse_config([], {"OMNICALL_ASR": "tiny.en"}).cascade.asr == "tiny.en"
    with pytest.raises(ConfigError, match=r"--instructions-file /x/p.txt: no such file"):
        parse_config(["--instructions-file", "/x/p.txt"], {})
    # other engines do not load the cascade's models: their paths are not checked
    assert parse_config(["--engine", "loopback", "--voice", "/x/joe.onnx"], {}).engine == "loopback"


def test_instructions_from_flag_or_file(tmp_path: Path) -> None:
    persona = tmp_path / "persona.txt"
    persona.write_text("You are Ada, the museum guide.\n", encoding="utf-8")
    assert parse_config(["--instructions-file", str(persona)], {}).system_instructions == \
        "You are Ada, the museum guide."
    assert parse_config([], {"OMNICALL_INSTRUCTIONS": " Be brief. "}).system_instructions == \
        "Be brief."


def test_metrics_listen_is_a_port_on_loopback_or_host_and_port() -> None:
    assert ServerConfig().metrics_address is None
    assert parse_config([], {"OMNICALL_METRICS_LISTEN": "9464"}).metrics_address == (
        "127.0.0.1", 9464)
    assert parse_config(["--metrics-listen", "0.0.0.0:9464"], {}).metrics_address == (
        "0.0.0.0", 9464)
    assert parse_config(["--metrics-listen", "[::1]:9100"], {}).metrics_address == ("::1", 9100)
    assert parse_config(["--metrics-token", "s3cret"], {}).metrics_token == "s3cret"
    for bad in ("metrics", "host:", ":9464", "1:70000"):
        with pytest.raises(ConfigError, match="metrics_listen"):
            parse_config(["--metrics-listen", bad], {})


def test_the_room_follows_the_page_mode_unless_forced() -> None:
    """--echo-cancel auto: on for the loudspeaker pages (kiosk, companion) and for clients
    that do not say (until their microphone is found not to hear the assistant), off for the
    call page; the noise suppressor is off unless asked for, and its auto follows the pages
    only (docs/room.md). Interruptions: words on the loudspeaker pages, 'echo' (words while
    an echo may be there) for clients that do not say, sound on the call page."""
    default = parse_config([], {})
    assert (default.echo_cancel, default.noise_suppression) == ("auto", "off")
    for mode in ("kiosk", "companion", None):
        assert default.room_settings(mode) == RoomSettings(True, False)
    assert not default.room_settings("call").any
    assert [default.interrupt_by(m) for m in ("kiosk", "companion", None, "call")] == [
        "words", "words", "echo", "sound"]
    assert parse_config(["--interruptions", "sound"], {}).interrupt_by(None) == "sound"
    auto = parse_config(["--noise-suppression", "auto"], {})
    assert auto.room_settings("kiosk") == RoomSettings(True, True)
    assert auto.room_settings(None) == RoomSettings(True, False)
    assert not auto.room_settings("call").any
    forced = parse_config(["--echo-cancel", "on"], {"OMNICALL_NOISE_SUPPRESSION": "on"})
    assert forced.room_settings("call") == RoomSettings(True, True)
    assert forced.room_settings("kiosk") == RoomSettings(True, True)
    off = parse_config(["--echo-cancel", "off"], {})
    assert not off.room_settings("kiosk").any
    with pytest.raises(ConfigError, match="echo_cancel"):
        parse_config(["--echo-cancel", "maybe"], {})


def test_speech_servers_by_url_reach_the_cascade_and_bad_values_name_their_flag() -> None:
    from omnicall.app.engine_settings import cascade_settings

    cfg = parse_config(["--asr-url", "http://gpu:8001/v1", "--asr-model", "whisper-large-v3",
                        "--tts-url", "https://gpu:8880/v1", "--tts-voice", "af_heart",
                        "--tts-timeout-s", "5", "--no-asr-partials"], {})
    settings = cascade_settings(cfg)
    assert (settings.asr_url, settings.asr_model, settings.asr_partials) == (
        "http://gpu:8001/v1", "whisper-large-v3", False)
    assert (settings.tts_url, settings.tts_voice, settings.tts_timeout_s) == (
        "https://gpu:8880/v1", "af_heart", 5.0)
    with pytest.raises(ConfigError, match=r"asr_url 'gpu:8001' must be an http\(s\)://.*"
                                          r"\(from --asr-url\)"):
        parse_config(["--asr-url", "gpu:8001"], {})
    with pytest.raises(ConfigError, match=r"tts_model needs tts_url.*OMNICALL_TTS_MODEL"):
        parse_config([], {"OMNICALL_TTS_MODEL": "kokoro"})
    with pytest.raises(ConfigError, match=r"asr_timeout_s must be in \[0.1, 60\]"):
        parse_config(["--asr-url", "http://x/v1", "--asr-timeout-s", "0"], {})


def test_who_the_assistant_talks_to_follows_the_page_mode() -> None:
    auto = parse_config([], {})
    assert [auto.addressee_for(m) for m in ("kiosk", "call", "companion", None)] == \
        ["camera", "auto", "auto", "auto"]  # people pass a kiosk; glasses face away
    assert parse_config(["--no-video"], {}).addressee_for("kiosk") == "auto"  # no camera
    assert parse_config(["--addressee", "any"], {}).addressee_for("kiosk") == "any"
    assert parse_config(["--addressee", "wake", "--wake-phrase", "hey kiosk"],
                        {}).addressee_for("call") == "wake"
    for argv, error in [(["--addressee", "wake"], "needs --wake-phrase"),
                        (["--addressee", "camera", "--no-video"], "needs the camera"),
                        (["--addressee", "room"], "use one of"),
                        (["--addressee", "camera", "--engine", "loopback"], "cascade")]:
        with pytest.raises(ConfigError, match=error):
            parse_config(argv, {})
