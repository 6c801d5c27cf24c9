"""Each engine's settings carry the server's flags; the conversation's are the same for all."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from omnicall.app.config import ServerConfig
from omnicall.app.engine_settings import (
    cascade_settings,
    engine_settings,
    omni_settings,
    remote_settings,
)
from omnicall.app.flags import DuplicateFlag, flags_of
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
                      language="de", llm_context=4096, speaker="chelsie",
                      engine_model="m")


def test_the_turn_settings_are_one_object_from_their_flags() -> None:
    assert CONFIG.conversation.turns == TurnSettings(hangover_ms=550, turn_model="smart",
                                                     echo_warmup_ms=300)


def test_every_engine_gets_the_conversation_settings() -> None:
    for settings in (cascade_settings(CONFIG), omni_settings(CONFIG), remote_settings(CONFIG)):
        assert isinstance(settings, ConversationSettings)
        assert settings.turns == CONFIG.conversation.turns
        assert settings.camera == CONFIG.conversation.camera
        assert (settings.camera.size, settings.camera.max_images) == (320, 2)
        assert (settings.instructions, settings.language) == ("Be a pirate.", "de")


def test_the_servers_defaults_are_the_engines() -> None:
    """Each default is written once, on the engine's side: a config of defaults builds
    settings equal to the engines' own defaults (but for what the server sets itself)."""
    config = ServerConfig()
    assert cascade_settings(config) == CascadeSettings()
    assert omni_settings(config) == OmniSettings(max_calls=config.max_sessions)
    assert remote_settings(config) == RemoteSettings(max_calls=config.max_sessions)
    assert config.conversation.camera == FramePolicySettings()
    assert config.conversation.turns == TurnSettings()


def test_each_engine_setting_is_declared_once_in_its_engines_settings() -> None:
    """An engine's flag is a field of that engine's settings and of nothing else: the
    server's config holds the settings as a section, and what the engine gets is that
    section (no copy by name to forget)."""
    flags = {flag.name: flag for flag in flags_of(ServerConfig)}
    own = {"cascade": CascadeSettings, "omni": OmniSettings, "remote": RemoteSettings}
    shared = {f.name for f in dataclasses.fields(ConversationSettings)}
    server = {f.name for f in dataclasses.fields(ServerConfig)}
    for section, settings in own.items():
        declared = [f for f in dataclasses.fields(settings)
                    if f.name not in shared and "help" in f.metadata]
        assert declared, section
        for f in declared:
            flag = flags[f.metadata.get("flag", f.name)]
            assert flag.path == (section, f.name) and flag.field is f
            assert f.name not in server, f"{f.name} is declared twice"
    assert (cascade_settings(CONFIG).llm_context, omni_settings(CONFIG).speaker,
            remote_settings(CONFIG).engine_model) == (4096, "chelsie", "m")
    assert flags["camera_size"].path == ("conversation", "camera", "size")
    assert flags["hangover_ms"].path == ("conversation", "turns", "hangover_ms")
    assert flags["llm_url"].help.startswith("cascade: ")
    assert flags["engine_url"].repeatable


def test_a_flag_declared_twice_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Twice:
        cascade: CascadeSettings = dataclasses.field(default_factory=CascadeSettings,
                                                     metadata={"section": {}})
        llm_url: str = dataclasses.field(default="", metadata={"help": "again"})

    with pytest.raises(DuplicateFlag, match="--llm-url"):
        flags_of(Twice)


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


def test_a_config_takes_every_setting_by_its_flag_name() -> None:
    """The Python API (``omnicall.Config(instructions=..., greeting=...)``) names settings
    as the flags do, whichever section holds them; a section can be given whole."""
    import pickle

    config = ServerConfig(port=0, instructions="Be brief.", greeting="Hi!", hangover_ms=300,
                          camera_size=320, speaker="chelsie", engine_url="ws://a,ws://b")
    assert (config.port, config.conversation.instructions, config.cascade.greeting) == \
        (0, "Be brief.", "Hi!")
    assert config.conversation.turns.hangover_ms == 300
    assert config.conversation.camera.size == 320 and config.omni.speaker == "chelsie"
    assert config.remote.engine_urls == ("ws://a", "ws://b")
    assert ServerConfig(cascade=CascadeSettings(llm_context=4096)).cascade.llm_context == 4096
    assert dataclasses.replace(config, engine="loopback").cascade.greeting == "Hi!"
    assert pickle.loads(pickle.dumps(config)) == config  # --workers hand it to each worker
    with pytest.raises(TypeError, match="nope"):
        ServerConfig(nope=1)
