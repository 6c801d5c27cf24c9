"""Each engine's settings carry the server's flags; the conversation's are the same for all."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from omnicall.app.config import ServerConfig
from omnicall.app.engine_settings import (
    cascade_settings,
    engine_settings,
    omni_settings,
    remote_settings,
)
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.conversation.settings import (
    ConversationSettings,
    FramePolicySettings,
    TurnSettings,
)
from omnicall.engine.qwen_omni.settings import OmniSettings
from omnicall.engine.remote.settings import RemoteSettings

CONFIG = ServerConfig(engine="loopback", hangover_ms=550, turn_model="smart",
                      echo_warmup_ms=300, instructions="  Be a pirate. ", max_sessions=7,
                      greeting="Ahoy! " * 200, camera_size=320, camera_max_images=2,
                      language="de")


def test_the_turn_settings_are_one_object_from_their_flags() -> None:
    assert CONFIG.turn_settings() == TurnSettings(hangover_ms=550, turn_model="smart",
                                                  echo_warmup_ms=300)


def test_every_engine_gets_the_conversation_settings() -> None:
    for settings in (cascade_settings(CONFIG), omni_settings(CONFIG), remote_settings(CONFIG)):
        assert isinstance(settings, ConversationSettings)
        assert settings.turns == CONFIG.turn_settings()
        assert settings.camera == CONFIG.camera_settings()
        assert (settings.camera.size, settings.camera.max_images) == (320, 2)
        assert (settings.instructions, settings.language) == ("Be a pirate.", "de")


def test_the_servers_defaults_are_the_engines() -> None:
    """Each default is written once, on the engine's side: a config of defaults builds
    settings equal to the engines' own defaults (but for what the server sets itself)."""
    config = ServerConfig()
    assert cascade_settings(config) == CascadeSettings()
    assert omni_settings(config) == OmniSettings(max_calls=config.max_sessions)
    assert remote_settings(config) == RemoteSettings(max_calls=config.max_sessions)
    assert config.camera_settings() == FramePolicySettings()
    assert config.turn_settings() == TurnSettings()


def test_engine_specific_flags() -> None:
    assert len(cascade_settings(CONFIG).greeting) == 500  # the greeting is cut
    assert omni_settings(CONFIG).max_calls == 7
    remote = remote_settings(ServerConfig(engine="remote", engine_url="ws://a, ws://b"))
    assert remote.engine_urls == ("ws://a", "ws://b")


def test_no_video_turns_the_remote_engines_images_off() -> None:
    remote = {"engine": "remote", "engine_url": "ws://a"}
    assert remote_settings(ServerConfig(**remote)).remote_video is True
    assert remote_settings(ServerConfig(**remote, remote_video=False)).remote_video is False
    assert remote_settings(ServerConfig(**remote, video=False)).remote_video is False


def test_only_the_chosen_engines_settings_are_built() -> None:
    def built(engine: str) -> dict[str, object]:
        return engine_settings(dataclasses.replace(CONFIG, engine=engine))

    assert built("cascade") == {"cascade": cascade_settings(CONFIG)}
    assert built("qwen-omni") == {"omni": omni_settings(CONFIG)}
    assert set(built("remote")) == {"remote"}
    assert built("loopback") == {} and built("pirate") == {}  # a package's engine: none


def test_a_loopback_server_does_not_import_the_other_engines() -> None:
    """Every ``--workers`` worker builds its app after the fork: what it imports, each start
    and each restart pays (the remote engine's modules alone took over a second). The
    engines' settings modules are light (the server's defaults are theirs)."""
    code = ("import sys\n"
            "from omnicall.app.config import ServerConfig\n"
            "from omnicall.app.http.server import create_app\n"
            "create_app(ServerConfig(engine='loopback'))\n"
            "print(sorted(m for m in sys.modules if m.startswith(('omnicall.engine.remote.',"
            " 'omnicall.engine.cascade.engine', 'omnicall.engine.qwen_omni.engine'))"
            " and not m.endswith('.settings')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout
