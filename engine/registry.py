"""Engine selection by name."""

from __future__ import annotations

import logging

from engine.base import Engine
from engine.echo import EchoEngine

logger = logging.getLogger(__name__)

ENGINE_NAMES = ("cascade", "qwen-omni", "remote", "echo")
PLANNED = {
    "cascade": "the embedded CPU cascade (VAD + ASR + LLM + TTS) is not built yet (issue 3)",
    "qwen-omni": "the native Qwen3-Omni Thinker-Talker engine is not built yet (issue 4)",
    "remote": "the remote scale-out engine client is not built yet",
}


class EngineUnavailable(RuntimeError):
    """The requested engine cannot run here; the message says why and what to do."""


def create_engine(name: str, *, allow_fallback: bool = True) -> Engine:
    """Build the engine called ``name``.

    Engines that are planned but not built yet fall back to the echo engine when
    ``allow_fallback`` (logged as a warning on every start), otherwise raise.
    """
    if name == "echo":
        return EchoEngine()
    if name in PLANNED:
        if not allow_fallback:
            raise EngineUnavailable(PLANNED[name])
        logger.warning("engine %r unavailable: %s. Falling back to the 'echo' engine, which only "
                       "repeats what it hears.", name, PLANNED[name])
        return EchoEngine()
    raise EngineUnavailable(f"unknown engine {name!r}; choose one of {', '.join(ENGINE_NAMES)}")
