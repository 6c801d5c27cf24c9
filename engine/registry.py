"""Engine selection by name: the built-in engines, and any engine a package registers in
the ``omnicall.engines`` entry point group, e.g. in its ``pyproject.toml``::

    [project.entry-points."omnicall.engines"]
    pirate = "omnicall_pirate:PirateEngine"

The entry point names an :class:`~omnicall.engine.base.Engine` class or factory; it is called
with the server's config when it takes an argument, else with none. ``--engine pirate`` finds it.
"""

from __future__ import annotations

import inspect
import logging
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from omnicall.engine.base import Engine
from omnicall.engine.loopback import LoopbackEngine

if TYPE_CHECKING:
    from omnicall.engine.cascade.settings import CascadeSettings
    from omnicall.engine.qwen_omni.settings import OmniSettings
    from omnicall.engine.remote.engine import RemoteSettings

logger = logging.getLogger(__name__)

ENGINE_NAMES = ("cascade", "qwen-omni", "remote", "loopback")
ENTRY_POINT_GROUP = "omnicall.engines"


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
                                f"{type(engine).__name__}, not an omnicall.engine.base.Engine")
    return engine


class EngineUnavailable(RuntimeError):
    """The requested engine cannot run here; the message says why and what to do."""


def create_engine(name: str, *,
                  cascade: CascadeSettings | None = None,
                  omni: OmniSettings | None = None,
                  remote: RemoteSettings | None = None, config: Any = None) -> Engine:
    """Build the engine called ``name``.

    ``config``: the server's config, handed to engines that packages register. An unknown
    name raises :class:`EngineUnavailable`.
    """
    if name == "loopback":
        return LoopbackEngine()
    if name == "cascade":
        from omnicall.engine.cascade.engine import CascadeEngine  # heavy imports: only when chosen

        return CascadeEngine(cascade)
    if name == "qwen-omni":
        from omnicall.engine.qwen_omni.engine import QwenOmniEngine
        from omnicall.engine.qwen_omni.settings import OmniSettings

        return QwenOmniEngine(omni or OmniSettings())
    if name == "remote":
        from omnicall.engine.remote.engine import RemoteEngine, RemoteSettings

        return RemoteEngine(remote or RemoteSettings())
    plugins = plugin_engines()
    if name in plugins:
        return _plugin(plugins[name], config)
    raise EngineUnavailable(f"unknown engine {name!r}; choose one of {', '.join(engine_names())}")
