"""The settings every engine's conversation has (kept free of heavy imports): how turns end,
the echo warm-up, the persona. Each engine's settings dataclass extends this one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TurnSettings:
    hangover_ms: int = 400  # the fixed end-of-turn silence (the fallback with 'smart')
    #: 'fixed' (always ``hangover_ms``) or 'smart': Smart Turn v3.2 judges each pause
    turn_model: str = "fixed"
    #: speech that starts this soon after a reply's first sound is taken for its echo
    echo_warmup_ms: int = 600
    instructions: str = ""  # the persona: the system prompt ('' = the engine's own)
