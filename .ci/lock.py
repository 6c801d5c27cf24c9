"""The lock: every package a fresh install of omnicall (with its ``dev`` extra) takes, pinned.

``make lock`` resolves the dependency tree of ``pyproject.toml`` afresh with pip's own
resolver (``pip install --dry-run --ignore-installed --report``: nothing is installed or
built, sdists only give their metadata) and writes ``constraints.txt``, which ``make run``,
``make test`` and ``.ci/run`` install from (``pip install -c constraints.txt``). The header
carries a digest of the dependency lists it was resolved from; ``tests/test_lock.py`` fails
when ``pyproject.toml`` and the lock disagree.

    python .ci/lock.py write REPORT.json   # constraints.txt from pip's report
    python .ci/lock.py digest              # the digest of pyproject.toml's dependencies
"""

from __future__ import annotations

import hashlib
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "constraints.txt"
PYPROJECT = ROOT / "pyproject.toml"
EXTRAS = ("dev",)
DIGEST_PREFIX = "# pyproject-digest: "
#: the installer's own packages: what the venv was made with, not pinned (as `pip freeze`)
INSTALLER = ("pip", "setuptools", "wheel")


def dependency_lists(pyproject: Path = PYPROJECT) -> dict[str, list[str]]:
    """What the lock is resolved from: the project's dependencies and the locked extras."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    lists = {"dependencies": list(project.get("dependencies", [])),
             "requires-python": [project.get("requires-python", "")]}
    for extra in EXTRAS:
        lists[f"extra:{extra}"] = list(project.get("optional-dependencies", {}).get(extra, []))
    return lists


def digest(pyproject: Path = PYPROJECT) -> str:
    canonical = json.dumps(dependency_lists(pyproject), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def locked_digest(lock: Path = LOCK) -> str | None:
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line.startswith(DIGEST_PREFIX):
            return line[len(DIGEST_PREFIX):].strip()
    return None


def pins(lock: Path = LOCK) -> dict[str, str]:
    """Canonical package name -> pinned version."""
    out: dict[str, str] = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[canonical(name)] = version.strip()
    return out


def canonical(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def write(report_path: Path, lock: Path = LOCK) -> int:
    report = json.loads(report_path.read_text(encoding="utf-8"))
    project = canonical(tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["name"])
    lines = sorted(f"{item['metadata']['name']}=={item['metadata']['version']}"
                   for item in report["install"]
                   if canonical(item["metadata"]["name"]) not in (project, *INSTALLER))
    python = report.get("environment", {})
    header = [
        "# The lock: every package `pip install -e '.[dev]'` takes, pinned (written by",
        "# `make lock` from pip's resolver; do not edit by hand). Installed as pip constraints",
        "# by `make run`, `make test` and .ci/run. torch is the CPU wheel (2.13.0), installed",
        "# first; resolved for CPython "
        f"{python.get('python_full_version', '?')} on {python.get('platform_machine', '?')} "
        f"{python.get('sys_platform', '?')}.",
        f"{DIGEST_PREFIX}{digest()}",
    ]
    lock.write_text("\n".join([*header, *lines]) + "\n", encoding="utf-8")
    print(f"{lock.name}: {len(lines)} packages pinned")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "write":
        return write(Path(argv[1]))
    if argv == ["digest"]:
        print(digest())
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
