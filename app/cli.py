"""``omnicall`` command line: ``omnicall serve``, ``omnicall serve-engine`` (the same flags),
``omnicall memory``, ``omnicall call`` (the Python client: :mod:`omnicall.client`). The
sockets are checked in :mod:`omnicall.app.process.sockets`, and served by
:mod:`omnicall.app.serve`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from omnicall.app.config import ConfigError
from omnicall.app.config_sources import add_arguments, config_from
from omnicall.app.process.sockets import StartupError, preflight
from omnicall.app.serve import (
    FRONT_END,
    configure_logging,
    engine_service,
    run_server,
    run_workers,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="omnicall",
                                     description="real-time voice and video assistant")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_parser = sub.add_parser("serve", help="start the server")
    add_arguments(serve_parser)
    engine_parser = sub.add_parser(
        "serve-engine", help="serve an engine over the OpenAI Realtime protocol "
        "(ws://HOST:PORT/v1/realtime) for front-ends started with --engine remote")
    add_arguments(engine_parser)
    sub.add_parser("memory", help="expected GPU memory of a Qwen3-Omni call", add_help=False)
    sub.add_parser("call", help="call a server with a WAV file: print the captions, save the "
                   "reply (omnicall.client)", add_help=False)
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["call"]:
        from omnicall.client import main as call_main

        return call_main(raw[1:])
    if raw[:1] == ["memory"]:
        from omnicall.engine.qwen_omni.gpu_memory import (
            main as memory_main,  # heavy: only when asked
        )

        return memory_main(raw[1:])
    args = parser.parse_args(raw)
    command_parser = engine_parser if args.command == "serve-engine" else serve_parser
    service = engine_service() if args.command == "serve-engine" else FRONT_END
    try:
        config = config_from(args)
        if args.command == "serve-engine" and config.engine == "remote":
            raise ConfigError("serve-engine hosts a local engine: cascade, qwen-omni or loopback")
    except ConfigError as exc:
        command_parser.error(str(exc))
    configure_logging(config.log_level)
    try:
        bound = preflight(config)
    except StartupError as exc:
        print(f"omnicall: {exc}", file=sys.stderr, flush=True)
        return 2
    if config.workers > 1:
        return run_workers(config, bound, service)
    run_server(config, bound, service)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
