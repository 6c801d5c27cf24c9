"""Engine selection by name: the built-in engines, and any engine a package registers in
the ``omnicall.engines`` entry point group, e.g. in its ``pyproject.toml``::

    [project.entry-points."omnicall.engines"]
    pirate = "omnicall_pirate:PirateEngine"

The entry point names an :class:`~engine.base.Engine` class or factory; it is called with the
server's config when it takes an argument, else with none. ``--engine pirate`` finds it.
"""

from __future__ import annotations

import inspect
import logging
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from engine.base import Engine
from engine.echo import EchoEngine

if TYPE_CHECKING:
    from engine.cascade.settings import CascadeSettings
    from engine.qwen_omni.settings import OmniSettings
    from engine.remote.engine import RemoteSettings

logger = logging.getLogger(__name__)

ENGINE_NAMES = ("cascade", "qwen-omni", "remote", "echo")
ENTRY_POINT_GROUP = "omnicall.engines"
PLANNED: dict[str, str] = {}


def plugin_engines() -> dict[str, EntryPoint]:
    """Engines that installed packages register (``omnicall.engines`` entry points)."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)
            if ep.name not in ENGINE_NAMES}


def engine_names() -> tuple[str, ...]:
    return (*ENGINE_NAMES, *sorted(plugin_engines()))


def _plugin(entry: EntryPoint, config: Any) -> Engine:
    try:
        factory = entry.load()
    except (ImportError, AttributeError) as exc:
        raise EngineUnavailable(f"engine {entry.name!r} ({entry.value}) cannot be loaded: "
                                f"{exc}") from exc
    try:
        takes_config = bool(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        takes_config = False
    engine = factory(config) if takes_config else factory()
    if not isinstance(engine, Engine):
        raise EngineUnavailable(f"engine {entry.name!r} ({entry.value}) made a "
                                f"{type(engine).__name__}, not an engine.base.Engine")
    return engine


class EngineUnavailable(RuntimeError):
    """The requested engine cannot run here; the message says why and what to do."""


def create_engine(name: str, *, allow_fallback: bool = False,
                  cascade: CascadeSettings | None = None,
                  omni: OmniSettings | None = None,
                  remote: RemoteSettings | None = None, config: Any = None) -> Engine:
    """Build the engine called ``name``.

    ``config``: the server's config, handed to engines that packages register.
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
    plugins = plugin_engines()
    if name in plugins:
        return _plugin(plugins[name], config)
    if name in PLANNED:
        if not allow_fallback:
            raise EngineUnavailable(PLANNED[name])
        logger.warning("engine %r unavailable: %s. Falling back to the 'echo' engine, which only "
                       "repeats what it hears.", name, PLANNED[name])
        return EchoEngine()
    raise EngineUnavailable(f"unknown engine {name!r}; choose one of {', '.join(engine_names())}")
