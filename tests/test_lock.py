"""The lock (constraints.txt, written by `make lock`): it was resolved from today's
pyproject.toml, pins every package of the tree, every pin fits every requirement that reaches
it, and the environment the tests run in is the one it pins."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
from pathlib import Path
from types import ModuleType

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def lock_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_lock", ROOT / ".ci" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lock = lock_module()


def applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    env: dict[str, str] = dict(default_environment())
    return any(req.marker.evaluate({**env, "extra": extra}) for extra in extras or {""})


def project_requirements() -> list[Requirement]:
    lists = lock.dependency_lists()
    reqs = [Requirement(r) for r in lists["dependencies"]]
    for extra in lock.EXTRAS:
        reqs += [Requirement(r) for r in lists[f"extra:{extra}"]]
    return [r for r in reqs if applies(r, set())]


def test_the_lock_was_resolved_from_todays_pyproject() -> None:
    assert lock.locked_digest() == lock.digest(), \
        "pyproject.toml's dependencies changed since the lock was written: run `make lock`"


def test_every_project_requirement_is_pinned_within_its_range() -> None:
    pins = lock.pins()
    for req in project_requirements():
        name = lock.canonical(req.name)
        assert name in pins, f"{req.name} is not in the lock: run `make lock`"
        assert req.specifier.contains(Version(pins[name]), prereleases=True), \
            f"{req} does not admit the locked {name}=={pins[name]}: run `make lock`"
    assert Version(pins["torch"]).public == "2.13.0"  # the CPU wheel; others pull CUDA


def test_the_lock_is_the_whole_tree_and_the_environment_is_the_lock() -> None:
    """From the project's requirements down, through each installed package's own metadata:
    every package reached is pinned, installed at its pin, and fits the requirement."""
    pins = lock.pins()
    todo = [(req, set(req.extras)) for req in project_requirements()]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, extras = todo.pop()
        name = lock.canonical(req.name)
        key = (name, frozenset(extras))
        if key in seen or name in lock.INSTALLER:
            continue
        seen.add(key)
        assert name in pins, f"{req.name} (required as {req}) is not in the lock"
        installed = md.version(req.name)
        assert SpecifierSet(f"=={pins[name]}").contains(installed, prereleases=True), \
            f"{req.name} {installed} is installed, the lock pins {pins[name]}"
        assert req.specifier.contains(Version(installed), prereleases=True), str(req)
        for line in md.requires(req.name) or []:
            sub = Requirement(line)
            if applies(sub, extras):
                todo.append((sub, set(sub.extras)))
    assert set(pins) == {name for name, _ in seen}  # nothing pinned that nothing needs
