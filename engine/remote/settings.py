"""Settings of the remote engine (kept free of heavy imports)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omnicall.engine.conversation.settings import ConversationSettings


@dataclass(frozen=True)
class RemoteSettings(ConversationSettings):
    """``turns`` apply to ``turn_mode="local"`` (in "server" mode the model server's VAD ends
    turns); ``camera`` (the frame policy) and ``instructions`` to both. A field with help
    text is the server's flag of the same name, declared here only."""

    engine_urls: tuple[str, ...] = field(default=(), metadata={
        "flag": "engine_url",
        "help": "Realtime endpoint(s) ws://HOST:PORT/v1/realtime of model servers "
                "(vllm-omni or omnicall serve-engine); repeat the flag or separate with commas "
                "for a pool"})
    engine_model: str = field(default="", metadata={
        "help": "the model name to ask the servers for (?model=); '' = theirs"})
    engine_key: str = field(default="", metadata={
        "help": "bearer key for the model servers"})
    #: "server": the model server's VAD; "local": ours
    turn_mode: str = field(default="server", metadata={
        "help": "who ends user turns - 'server' (the model server's VAD, with barge-in) or "
                "'local' (omnicall's turn detector; commit + response.create)"})
    #: camera frames go as input_image items (the camera settings' policy)
    remote_video: bool = field(default=True, metadata={
        "help": "send camera frames as input_image items through each turn, by the frame "
                "policy (--camera-*), deleting old ones past --camera-max-images (switched "
                "off by itself for a server that refuses images; never with --no-video)"})
    max_calls: int = 64  # the server's --max-sessions
