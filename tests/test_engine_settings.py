"""Each engine's settings carry the server's flags; the conversation's are the same for all."""

from __future__ import annotations

import dataclasses

from omnicall.app.config import ServerConfig
from omnicall.app.engine_settings import (
    cascade_settings,
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
