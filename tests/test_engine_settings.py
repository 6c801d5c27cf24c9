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
    turn_settings,
)
from omnicall.engine.conversation.settings import TurnSettings

CONFIG = ServerConfig(engine="loopback", hangover_ms=550, turn_model="smart",
                      echo_warmup_ms=300, instructions="  Be a pirate. ", max_sessions=7,
                      greeting="Ahoy! " * 200)


def test_turn_settings_are_every_field_of_turn_settings() -> None:
    assert set(turn_settings(CONFIG)) == {f.name for f in dataclasses.fields(TurnSettings)}
    assert turn_settings(CONFIG)["instructions"] == "Be a pirate."


def test_every_engine_gets_the_conversation_settings() -> None:
    for settings in (cascade_settings(CONFIG), omni_settings(CONFIG), remote_settings(CONFIG)):
        assert isinstance(settings, TurnSettings)
        assert (settings.hangover_ms, settings.turn_model, settings.echo_warmup_ms) == \
            (550, "smart", 300)


def test_engine_specific_flags() -> None:
    assert len(cascade_settings(CONFIG).greeting) == 500  # the greeting is cut
    assert omni_settings(CONFIG).max_calls == 7
    remote = remote_settings(ServerConfig(engine="remote", engine_url="ws://a, ws://b"))
    assert remote.urls == ("ws://a", "ws://b")


def test_no_video_turns_the_remote_engines_images_off() -> None:
    remote = {"engine": "remote", "engine_url": "ws://a"}
    assert remote_settings(ServerConfig(**remote)).video is True
    assert remote_settings(ServerConfig(**remote, remote_video=False)).video is False
    assert remote_settings(ServerConfig(**remote, video=False)).video is False


def test_only_the_chosen_engines_settings_are_built() -> None:
    def built(engine: str) -> dict[str, object]:
        return engine_settings(dataclasses.replace(CONFIG, engine=engine))

    assert built("cascade") == {"cascade": cascade_settings(CONFIG)}
    assert built("qwen-omni") == {"omni": omni_settings(CONFIG)}
    assert set(built("remote")) == {"remote"}
    assert built("loopback") == {} and built("pirate") == {}  # a package's engine: none


def test_a_loopback_server_does_not_import_the_other_engines() -> None:
    """Every ``--workers`` worker builds its app after the fork: what it imports, each start
    and each restart pays (the remote engine's modules alone took over a second)."""
    code = ("import sys\n"
            "from omnicall.app.config import ServerConfig\n"
            "from omnicall.app.http.server import create_app\n"
            "create_app(ServerConfig(engine='loopback'))\n"
            "print(sorted(m for m in sys.modules if m.startswith(('omnicall.engine.remote',"
            " 'omnicall.engine.cascade.engine', 'omnicall.engine.qwen_omni.engine'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout
