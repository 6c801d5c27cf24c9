"""Flags from settings dataclasses: each setting is declared once, as a field of the dataclass
that uses it, and this module finds them.

A field with help text in its metadata (``field(default=..., metadata={"help": ...})``) is a
setting: one flag ``--field-name`` and one environment variable (``OMNICALL_FIELD_NAME``).
A field whose metadata has ``section`` holds another settings dataclass (its
``default_factory``) whose settings are walked in turn, with the section's ``prefix`` before
their names (``camera`` -> ``--camera-size``), its ``engine`` named in their help
(``cascade: ...``) and the fields of its ``shared`` base class left out (an engine's settings
extend the conversation's, which the server declares once in a section of their own). A
field without help is the dataclass's own knob (a bench's ``--ab``), not a flag. Two settings
with one name are an error at import time (:class:`DuplicateFlag`).

Pure and generic: :func:`flags_of` lists a dataclass's settings; :func:`with_settings`
returns a copy with settings changed by flag name, each section rebuilt once with all its
changes (a section that checks its fields together sees them together).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class DuplicateFlag(TypeError):
    """Two settings would have the same flag."""


@dataclasses.dataclass(frozen=True)
class Flag:
    """One setting: its flag name, where its value lives and the field declaring it."""

    name: str  # "camera_size": the flag --camera-size, the variable PREFIX + CAMERA_SIZE
    path: tuple[str, ...]  # ("conversation", "camera", "size")
    field: dataclasses.Field[Any]
    engine: str = ""  # the engine whose section declares it ('' = every engine or the server)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def env(self, prefix: str) -> str:
        return prefix + self.name.upper()

    @property
    def kind(self) -> str:
        """The field's annotation as written: 'int', 'float', 'bool', 'str',
        'tuple[str, ...]' (a repeatable flag, or text split at commas)."""
        return str(self.field.type)

    @property
    def repeatable(self) -> bool:
        return self.kind.startswith("tuple")

    @property
    def default(self) -> Any:
        return self.field.default

    @property
    def help(self) -> str:
        text = str(self.field.metadata["help"])
        if not self.engine:
            return text
        return f"{self.engine} {text}" if text.startswith(("with ", "without ")) \
            else f"{self.engine}: {text}"


def _walk(cls: type, path: tuple[str, ...], prefix: str, engine: str,
          skip: frozenset[str]) -> list[Flag]:
    found: list[Flag] = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        section = f.metadata.get("section")
        if section is not None:
            inner = f.default_factory
            if not (isinstance(inner, type) and dataclasses.is_dataclass(inner)):
                raise TypeError(f"{cls.__name__}.{f.name}: a section's default_factory must "
                                "be its settings dataclass")
            shared = section.get("shared")
            found += _walk(inner, (*path, f.name), prefix + section.get("prefix", ""),
                           section.get("engine", engine),
                           frozenset(g.name for g in dataclasses.fields(shared))
                           if shared is not None else frozenset())
        elif "help" in f.metadata:
            found.append(Flag(prefix + str(f.metadata.get("flag", f.name)), (*path, f.name),
                              f, engine))
    return found


@functools.cache
def flags_of(cls: type) -> tuple[Flag, ...]:
    """Every setting of ``cls`` and its sections, in declaration order."""
    flags = _walk(cls, (), "", "", frozenset())
    seen: dict[str, Flag] = {}
    for flag in flags:
        if flag.name in seen:
            raise DuplicateFlag(f"{flag.flag} is declared twice: {'.'.join(seen[flag.name].path)} "
                                f"and {'.'.join(flag.path)}")
        seen[flag.name] = flag
    return tuple(flags)


def flag_named(cls: type, name: str) -> Flag:
    for flag in flags_of(cls):
        if flag.name == name:
            return flag
    raise KeyError(f"no setting {name!r}")


def _replace(obj: Any, changes: Mapping[tuple[str, ...], Any]) -> Any:
    direct = {path[0]: value for path, value in changes.items() if len(path) == 1}
    nested: dict[str, dict[tuple[str, ...], Any]] = {}
    for path, value in changes.items():
        if len(path) > 1:
            nested.setdefault(path[0], {})[path[1:]] = value
    for name, inner in nested.items():
        direct[name] = _replace(getattr(obj, name), inner)
    return dataclasses.replace(obj, **direct) if direct else obj


def with_settings(obj: T, settings: Mapping[str, Any]) -> T:
    """``obj`` (a settings dataclass) with the settings named by flag name set, as typed
    values (text for a repeatable one is split at commas). ``KeyError`` for a name that is
    no setting; a section's own checks raise as it is rebuilt."""
    changes: dict[tuple[str, ...], Any] = {}
    for name, value in settings.items():
        flag = flag_named(type(obj), name)
        if flag.repeatable and isinstance(value, str):
            value = tuple(part.strip() for part in value.split(",") if part.strip())
        changes[flag.path] = value
    return _replace(obj, changes)
