"""Where a :class:`~omnicall.app.config.ServerConfig` comes from: CLI flags and ``OMNICALL_*``
environment variables, one of each per field.

Precedence: flag > environment > default. A bad value's error names the flag or the variable
it came from.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from omnicall.app.config import ENV_PREFIX, ConfigError, ServerConfig
from omnicall.media.log_limit import clip


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"not a boolean: {text!r}")


_FIELD_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str}


def _convert(f: dataclasses.Field[Any], raw: str, source: str) -> Any:
    """``raw`` as the field's type; errors name where the value came from (flag or variable)."""
    kind = _FIELD_TYPES[str(f.type)]
    try:
        if kind is bool:
            return _parse_bool(raw)
        return kind(raw)
    except ValueError as exc:
        expected = {int: "an integer", float: "a number", bool: "true or false"}.get(kind, "text")
        raise ConfigError(f"{source}={clip(raw)} is not {expected}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for f in dataclasses.fields(ServerConfig):
        flag = "--" + f.name.replace("_", "-")
        help_text = f"{f.metadata.get('help', '')} (env {ENV_PREFIX}{f.name.upper()}, " \
                    f"default {f.default!r})"
        if str(f.type) == "bool":
            parser.add_argument(flag, dest=f.name, default=None,
                                action=argparse.BooleanOptionalAction, help=help_text)
        elif f.metadata.get("append"):
            parser.add_argument(flag, dest=f.name, default=None, action="append",
                                help=help_text)
        else:
            parser.add_argument(flag, dest=f.name, default=None, help=help_text)


def config_from(args: argparse.Namespace | None = None,
                environ: Mapping[str, str] | None = None) -> ServerConfig:
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in dataclasses.fields(ServerConfig):
        flag_value = getattr(args, f.name, None) if args is not None else None
        env_value = environ.get(ENV_PREFIX + f.name.upper())
        if isinstance(flag_value, list):  # a flag that may be given several times
            flag_value = ",".join(flag_value)
        if flag_value is not None:
            values[f.name] = flag_value if isinstance(flag_value, bool) else _convert(
                f, str(flag_value), "--" + f.name.replace("_", "-"))
        elif env_value is not None:
            values[f.name] = _convert(f, env_value, ENV_PREFIX + f.name.upper())
    try:
        return ServerConfig(**values).validate()
    except ConfigError as exc:  # name the flag or variable the bad value came from
        given = [(f"--{name.replace('_', '-')}" if getattr(args, name, None) is not None
                  else ENV_PREFIX + name.upper()) for name in values if name in str(exc)]
        if not given:
            raise
        raise ConfigError(f"{exc} (from {', '.join(given)})") from exc


def parse_config(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> ServerConfig:
    parser = argparse.ArgumentParser(prog="omnicall serve")
    add_arguments(parser)
    return config_from(parser.parse_args(list(argv)), environ)
