"""The JavaScript embedding example beside an omnicall server, on one origin.

    .venv/bin/python examples/web_embed/serve.py            # then open http://localhost:8080/embed/
    .venv/bin/python examples/web_embed/serve.py --engine loopback --port 8081

``index.html`` (at ``/embed/``) imports the client library from the server's
``/static/client/omnicall.js`` and posts its offer to ``/offer``: the server sends no CORS
headers, so a page that calls it is served from the server's own origin (here, routes added
to omnicall's aiohttp application; behind a proxy, one host for both).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from anywhere

import omnicall

HERE = Path(__file__).resolve().parent


def add_example(app: web.Application) -> web.Application:
    """omnicall's application with the example page at ``/embed/``."""
    async def page(request: web.Request) -> web.FileResponse:
        return web.FileResponse(HERE / "index.html")

    app.router.add_get("/embed/", page)
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--engine", default="cascade")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    config = omnicall.Config(engine=args.engine, host=args.host, port=args.port).validate()
    print(f"the example: http://localhost:{args.port}/embed/")
    web.run_app(add_example(omnicall.create_app(config)), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
