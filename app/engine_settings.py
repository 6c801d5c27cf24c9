"""Each built-in engine's settings from the server's config: the engine's own section
(``config.cascade``, ``config.omni``, ``config.remote``: its flags, declared in its settings
dataclass) with the conversation's settings every engine shares (``config.conversation``:
the turn settings as one object, the camera, the persona, the language) put in, and the few
the server decides for it (its call limit, the camera switched off)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from omnicall.app.config import ServerConfig
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.conversation.settings import ConversationSettings
from omnicall.engine.qwen_omni.settings import OmniSettings
from omnicall.engine.remote.settings import RemoteSettings

S = TypeVar("S", bound=ConversationSettings)

#: the longest greeting a call starts with (a kiosk's welcome, not a speech)
MAX_GREETING_CHARS = 500


def with_conversation(settings: S, config: ServerConfig, **server: Any) -> S:
    """``settings`` with the server's conversation settings (``--instructions-file`` read)
    and what the server decides (``server``) put in."""
    shared = {f.name: getattr(config.conversation, f.name)
              for f in dataclasses.fields(ConversationSettings)}
    shared["instructions"] = config.system_instructions
    return dataclasses.replace(settings, **shared, **server)


def cascade_settings(config: ServerConfig) -> CascadeSettings:
    return with_conversation(config.cascade, config,
                             greeting=config.cascade.greeting[:MAX_GREETING_CHARS])


def omni_settings(config: ServerConfig) -> OmniSettings:
    return with_conversation(config.omni, config, max_calls=config.max_sessions)


def remote_settings(config: ServerConfig) -> RemoteSettings:
    return with_conversation(config.remote, config, max_calls=config.max_sessions,
                             remote_video=config.remote.remote_video and config.video)


# engine name -> (create_engine's keyword, the settings' builder)
_SETTINGS: dict[str, tuple[str, Callable[[ServerConfig], Any]]] = {
    "cascade": ("cascade", cascade_settings),
    "qwen-omni": ("omni", omni_settings),
    "remote": ("remote", remote_settings),
}


def engine_settings(config: ServerConfig) -> dict[str, Any]:
    """The settings :func:`omnicall.engine.registry.create_engine` takes for ``config.engine``,
    as its keyword arguments: that engine's only (``create_engine`` imports only the engine
    it builds; the settings modules are light)."""
    entry = _SETTINGS.get(config.engine)
    return {} if entry is None else {entry[0]: entry[1](config)}
