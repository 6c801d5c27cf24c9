"""Settings of the remote engine (kept free of heavy imports)."""

from __future__ import annotations

from dataclasses import dataclass

from omnicall.engine.conversation.settings import TurnSettings


@dataclass(frozen=True)
class RemoteSettings(TurnSettings):
    """The turn settings apply to ``turn_mode="local"`` (in "server" mode the model
    server's VAD ends turns)."""

    urls: tuple[str, ...] = ()
    model: str = ""
    key: str = ""
    turn_mode: str = "server"  # "server": the model server's VAD; "local": ours
    video: bool = True
    max_calls: int = 64
