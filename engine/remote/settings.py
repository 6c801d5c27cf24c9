"""Settings of the remote engine (kept free of heavy imports)."""

from __future__ import annotations

from dataclasses import dataclass

from omnicall.engine.conversation.settings import ConversationSettings


@dataclass(frozen=True)
class RemoteSettings(ConversationSettings):
    """``turns`` apply to ``turn_mode="local"`` (in "server" mode the model server's VAD ends
    turns); ``camera`` (the frame policy) and ``instructions`` to both."""

    engine_urls: tuple[str, ...] = ()  # --engine-url, split at commas
    engine_model: str = ""
    engine_key: str = ""
    turn_mode: str = "server"  # "server": the model server's VAD; "local": ours
    #: camera frames go as input_image items (the camera settings' policy)
    remote_video: bool = True
    max_calls: int = 64
