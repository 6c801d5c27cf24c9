"""What every call of the remote engine shares, handed to each session.

The engine (:mod:`omnicall.engine.remote.engine`) owns all of it and builds one
:class:`RemoteRuntime` when it starts (the HTTP client exists from then on); a session
(:mod:`omnicall.engine.remote.session`) gets that and nothing of the engine itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from omnicall.engine.conversation.listener import ListenRuntime
from omnicall.engine.remote.pool import EnginePool
from omnicall.engine.remote.settings import RemoteSettings
from omnicall.media.clock import Clock


@dataclass(frozen=True)
class RemoteRuntime:
    settings: RemoteSettings
    clock: Clock
    pool: EnginePool  # which model server a call goes to (sessions report opens and losses)
    #: ``turn_mode="local"``: the VAD, its worker and the end-of-turn model
    listening: ListenRuntime
    http: aiohttp.ClientSession  # the WebSockets to the model servers
