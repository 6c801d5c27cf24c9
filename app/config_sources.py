"""Where a :class:`~omnicall.app.config.ServerConfig` comes from: CLI flags and ``OMNICALL_*``
environment variables, one of each per setting (:func:`omnicall.app.flags.flags_of`: the
server's own and each engine's, declared once in their dataclasses).

Precedence: flag > environment > default. A bad value's error names the flag or the variable
it came from.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import Any

from omnicall.app.config import ENV_PREFIX, ConfigError, ServerConfig
from omnicall.app.flags import Flag, flags_of
from omnicall.media.log_limit import clip


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"not a boolean: {text!r}")


_KINDS: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str,
                           "tuple[str, ...]": str}


def _convert(flag: Flag, raw: str, source: str) -> Any:
    """``raw`` as the setting's type (a repeatable one stays text, split at commas later);
    errors name where the value came from (flag or variable)."""
    kind = _KINDS[flag.kind]
    try:
        if kind is bool:
            return _parse_bool(raw)
        return kind(raw)
    except ValueError as exc:
        expected = {int: "an integer", float: "a number", bool: "true or false"}.get(kind, "text")
        raise ConfigError(f"{source}={clip(raw)} is not {expected}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag in flags_of(ServerConfig):
        default = ",".join(flag.default) if flag.repeatable else flag.default
        help_text = f"{flag.help} (env {flag.env(ENV_PREFIX)}, default {default!r})"
        if flag.kind == "bool":
            parser.add_argument(flag.flag, dest=flag.name, default=None,
                                action=argparse.BooleanOptionalAction, help=help_text)
        elif flag.repeatable:
            parser.add_argument(flag.flag, dest=flag.name, default=None, action="append",
                                help=help_text)
        else:
            parser.add_argument(flag.flag, dest=flag.name, default=None, help=help_text)


def config_from(args: argparse.Namespace | None = None,
                environ: Mapping[str, str] | None = None) -> ServerConfig:
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for flag in flags_of(ServerConfig):
        flag_value = getattr(args, flag.name, None) if args is not None else None
        env_value = environ.get(flag.env(ENV_PREFIX))
        if isinstance(flag_value, list):  # a flag that may be given several times
            flag_value = ",".join(flag_value)
        if flag_value is not None:
            values[flag.name] = flag_value if isinstance(flag_value, bool) else _convert(
                flag, str(flag_value), flag.flag)
        elif env_value is not None:
            values[flag.name] = _convert(flag, env_value, flag.env(ENV_PREFIX))
    try:
        try:
            config = ServerConfig(**values)
        except ValueError as exc:  # a section's own checks (the camera's frame policy)
            named = {flag.name for flag in flags_of(ServerConfig)
                     if flag.name in values and flag.path[-1] in str(exc)}
            raise ConfigError(f"{', '.join(sorted(named)) or 'settings'}: {exc}") from exc
        return config.validate()
    except ConfigError as exc:  # name the flag or variable the bad value came from
        given = [("--" + name.replace("_", "-") if getattr(args, name, None) is not None
                  else ENV_PREFIX + name.upper()) for name in values if name in str(exc)]
        if not given:
            raise
        raise ConfigError(f"{exc} (from {', '.join(given)})") from exc


def parse_config(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> ServerConfig:
    parser = argparse.ArgumentParser(prog="omnicall serve")
    add_arguments(parser)
    return config_from(parser.parse_args(list(argv)), environ)
