"""Flags and environment variables into a ServerConfig: precedence, types, errors that name
their source."""

from __future__ import annotations

import pytest

from omnicall.app.config import ConfigError, ServerConfig
from omnicall.app.config_sources import parse_config


def test_defaults_env_and_flag_precedence() -> None:
    assert parse_config([], {}) == ServerConfig()
    env = {"OMNICALL_PORT": "9000", "OMNICALL_ENGINE": "loopback", "OMNICALL_ICE_LOOPBACK": "yes"}
    cfg = parse_config([], env)
    assert (cfg.port, cfg.engine, cfg.ice_loopback) == (9000, "loopback", True)
    cfg = parse_config(["--port", "9100", "--no-ice-loopback", "--video-fps", "1.5"], env)
    assert (cfg.port, cfg.ice_loopback, cfg.video_fps) == (9100, False, 1.5)
    assert cfg.url == "http://localhost:9100/"

def test_video_is_on_unless_turned_off_by_flag_or_variable() -> None:
    assert ServerConfig().video is True
    assert parse_config(["--no-video"], {}).video is False
    assert parse_config([], {"OMNICALL_VIDEO": "0"}).video is False
    assert parse_config(["--video"], {"OMNICALL_VIDEO": "0"}).video is True  # flag wins
    with pytest.raises(ConfigError, match="OMNICALL_VIDEO"):
        parse_config([], {"OMNICALL_VIDEO": "sometimes"})

def test_bad_env_bool() -> None:
    with pytest.raises(ConfigError):
        parse_config([], {"OMNICALL_LOW_LATENCY_RECEIVE": "maybe"})

def test_errors_name_the_flag_or_variable_that_was_wrong() -> None:
    with pytest.raises(ConfigError, match=r"OMNICALL_PORT='abc' is not an integer"):
        parse_config([], {"OMNICALL_PORT": "abc"})
    with pytest.raises(ConfigError, match=r"--video-fps='x' is not a number"):
        parse_config(["--video-fps", "x"], {})
    with pytest.raises(ConfigError, match=r"port out of range: 70000 \(from OMNICALL_PORT\)"):
        parse_config([], {"OMNICALL_PORT": "70000"})
    with pytest.raises(ConfigError, match=r"server_ice_servers: not a STUN/TURN URL"):
        parse_config(["--server-ice-servers", "http://x"], {})
