"""``python -m omnicall``: the ``omnicall`` command (serve, serve-engine, memory)."""

from omnicall.app.cli import main

raise SystemExit(main())
