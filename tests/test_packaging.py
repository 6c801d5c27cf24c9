"""What installs: the wheel holds one top-level name, ``omnicall``, and its subpackages are
the project's folders (``app/``, ``engine/``, ``media/``, ``web/`` at the root) mapped by
setuptools' ``package-dir``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPED = {"app": "omnicall.app", "engine": "omnicall.engine", "media": "omnicall.media"}
SOURCES = ("app", "engine", "media", "omnicall", "tests", "bench", "examples")


def _setuptools() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def test_every_source_package_is_listed_under_its_installed_name() -> None:
    tree = {"omnicall", "omnicall.web"}
    for folder, name in MAPPED.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            tree.add(".".join((name, *init.parent.relative_to(ROOT / folder).parts)))
    assert set(_setuptools()["packages"]) == tree


def test_no_source_imports_a_folder_by_its_bare_name() -> None:
    # also in code that a test writes out as text, in quotes
    bare = re.compile(r"(^\s*|[\"'])(from|import) (app|engine|media)\b", re.MULTILINE)
    offenders = [str(path.relative_to(ROOT)) for folder in SOURCES
                 for path in (ROOT / folder).rglob("*.py") if bare.search(path.read_text())]
    assert offenders == []


def test_the_wheel_installs_only_omnicall(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(tmp_path), str(ROOT)],
                   check=True, timeout=240)
    for leftover in ("lib", *(p.name for p in (ROOT / "build").glob("bdist.*"))):
        shutil.rmtree(ROOT / "build" / leftover, ignore_errors=True)  # setuptools builds in-tree
    (wheel,) = tmp_path.glob("omnicall-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        entry_points = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    top = {name.split("/", 1)[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"omnicall"}
    for path in ("omnicall/__init__.py", "omnicall/app/cli.py", "omnicall/engine/base.py",
                 "omnicall/engine/conversation/listener.py", "omnicall/media/timebase.py",
                 "omnicall/web/index.html", "omnicall/web/app.js",
                 "omnicall/web/client/omnicall.js", "omnicall/web/client/omnicall.d.ts",
                 "omnicall/web/client/package.json"):
        assert path in names, path
    assert "omnicall = omnicall.app.cli:main" in entry_points
