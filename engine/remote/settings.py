"""Settings of the remote engine (kept free of heavy imports)."""

from __future__ import annotations

from dataclasses import dataclass

from omnicall.engine.conversation.settings import TurnSettings


@dataclass(frozen=True)
class RemoteSettings(TurnSettings):
    """The turn settings apply to ``turn_mode="local"`` (in "server" mode the model
    server's VAD ends turns); ``camera`` (the frame policy) to both."""

    urls: tuple[str, ...] = ()
    model: str = ""
    key: str = ""
    turn_mode: str = "server"  # "server": the model server's VAD; "local": ours
    video: bool = True  # camera frames go as input_image items (the camera settings' policy)
    #: the caller's language ('en', 'de', ...): which words ask the camera to look closely
    #: (the frame policy's sharp end-of-turn frame); any other value: never sharp
    language: str = "en"
    max_calls: int = 64
