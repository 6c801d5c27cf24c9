"""Running a script of another checkout with this venv, on that checkout's code (an A/B
against an earlier commit: ``bench/voice_to_voice.py --against``).

The venv installs omnicall in editable mode, and its finder maps ``omnicall.app``,
``.engine``, ``.media`` and ``.web`` to *this* checkout's folders whatever ``sys.path``
says: a script of another checkout run with this venv would import this checkout's code
under the other's name. :func:`command` runs the script through a small bootstrap that
drops that finder, imports ``omnicall`` from the other checkout's package layout (a folder
of links laid out as the wheel installs it, :func:`layout`) and then runs the script, so
every ``omnicall.*`` import is the other checkout's.
"""

from __future__ import annotations

import sys
from pathlib import Path

SUBPACKAGES = ("app", "engine", "media", "web")

BOOTSTRAP = (
    "import runpy, sys\n"
    "layout, script = sys.argv[1], sys.argv[2]\n"
    "sys.meta_path[:] = [f for f in sys.meta_path\n"
    "                    if 'EditableFinder' not in getattr(f, '__name__', type(f).__name__)]\n"
    "sys.path.insert(0, layout)\n"
    "import omnicall\n"
    "assert omnicall.__file__.startswith(layout), omnicall.__file__\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(script, run_name='__main__')\n")


def layout(tree: Path) -> Path:
    """``tree``'s package as installed: ``<tree>/build/other-tree/omnicall`` with links to its
    ``omnicall/*.py`` and its app, engine, media and web folders (made anew)."""
    root = tree / "build" / "other-tree"
    package = root / "omnicall"
    package.mkdir(parents=True, exist_ok=True)
    for link in package.iterdir():
        link.unlink()
    for source in (tree / "omnicall").glob("*.py"):
        (package / source.name).symlink_to(source)
    for name in SUBPACKAGES:
        if (tree / name).is_dir():
            (package / name).symlink_to(tree / name, target_is_directory=True)
    return root


def command(tree: Path, script: str, *args: str) -> list[str]:
    """The command line that runs ``tree/script`` with ``args`` on ``tree``'s code."""
    return [sys.executable, "-c", BOOTSTRAP, str(layout(tree)), str(tree / script), *args]
