"""Engine selection by name."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from engine.base import Engine
from engine.echo import EchoEngine

if TYPE_CHECKING:
    from engine.cascade.settings import CascadeSettings
    from engine.qwen_omni.settings import OmniSettings
    from engine.remote.engine import RemoteSettings

logger = logging.getLogger(__name__)

ENGINE_NAMES = ("cascade", "qwen-omni", "remote", "echo")
PLANNED: dict[str, str] = {}


class EngineUnavailable(RuntimeError):
    """The requested engine cannot run here; the message says why and what to do."""


def create_engine(name: str, *, allow_fallback: bool = False,
                  cascade: CascadeSettings | None = None,
                  omni: OmniSettings | None = None,
                  remote: RemoteSettings | None = None) -> Engine:
    """Build the engine called ``name``.

    Engines that are planned but not built yet raise :class:`EngineUnavailable`, or, with
    ``allow_fallback``, fall back to the echo engine with a warning (never by default).
    """
    if name == "echo":
        return EchoEngine()
    if name == "cascade":
        from engine.cascade.engine import CascadeEngine  # heavy imports: only when chosen

        return CascadeEngine(cascade)
    if name == "qwen-omni":
        from engine.qwen_omni.engine import QwenOmniEngine
        from engine.qwen_omni.settings import OmniSettings

        return QwenOmniEngine(omni or OmniSettings())
    if name == "remote":
        from engine.remote.engine import RemoteEngine, RemoteSettings

        return RemoteEngine(remote or RemoteSettings())
    if name in PLANNED:
        if not allow_fallback:
            raise EngineUnavailable(PLANNED[name])
        logger.warning("engine %r unavailable: %s. Falling back to the 'echo' engine, which only "
                       "repeats what it hears.", name, PLANNED[name])
        return EchoEngine()
    raise EngineUnavailable(f"unknown engine {name!r}; choose one of {', '.join(ENGINE_NAMES)}")
