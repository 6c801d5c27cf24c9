"""Which model server a new call goes to (pure bookkeeping; the clock is passed in).

New calls go to the healthy server with the fewest open sessions (ties: the order given).
A server that refuses a call (full, wrong model, connection refused) or drops one is skipped
for ``cooldown_s``; a later success clears that.
"""

from __future__ import annotations

from dataclasses import dataclass, field

COOLDOWN_S = 5.0


@dataclass
class ServerState:
    url: str
    open_sessions: int = 0
    down_until_s: float = float("-inf")
    failures: int = 0


@dataclass
class EnginePool:
    urls: list[str]
    cooldown_s: float = COOLDOWN_S
    servers: dict[str, ServerState] = field(init=False)

    def __post_init__(self) -> None:
        if not self.urls:
            raise ValueError("a pool needs at least one server URL")
        self.servers = {url: ServerState(url) for url in self.urls}

    def candidates(self, now_s: float, avoid: str | None = None) -> list[str]:
        """Servers to try for a new session, best first: healthy ones by load, then the rest
        (a pool whose servers all failed recently still tries them, least recently failed
        first). ``avoid``: the server a call just lost, tried last."""
        states = list(self.servers.values())
        healthy = sorted((s for s in states if s.down_until_s <= now_s and s.url != avoid),
                         key=lambda s: s.open_sessions)
        resting = sorted((s for s in states if s.down_until_s > now_s and s.url != avoid),
                         key=lambda s: s.down_until_s)
        tail = [self.servers[avoid]] if avoid in self.servers else []
        return [s.url for s in [*healthy, *resting, *tail]]

    def opened(self, url: str) -> None:
        state = self.servers[url]
        state.open_sessions += 1
        state.failures = 0
        state.down_until_s = float("-inf")

    def closed(self, url: str) -> None:
        state = self.servers[url]
        state.open_sessions = max(0, state.open_sessions - 1)

    def failed(self, url: str, now_s: float) -> None:
        state = self.servers[url]
        state.failures += 1
        state.down_until_s = now_s + self.cooldown_s
