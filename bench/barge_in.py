"""Barge-in truncation: what each engine keeps of an interrupted reply against what the
client received of it, over real aiortc calls on loopback.

For each engine, ``--barge-ins`` calls: the client asks for a long story, waits until it has
heard ``after_s`` of the answer (0.7 s to 2.9 s, spread over the calls; the first 0.6 s is
the echo warm-up, where speech is taken for the assistant's own voice) and speaks over it.
The engine's interrupted end event says how much of the reply it kept (``heard_ms``: the
cascade's memory; the remote engine's ``conversation.item.truncate`` to its model server);
the client's decoded audio says how much it received (tests/reply_span.py: the reply found
in it block by block, against the reply as the engine made it). Engines:

- ``cascade``: the embedded CPU engine in this process;
- ``remote``: a front-end in this process (``--engine remote``) and a model server in
  another (``omnicall serve-engine --engine cascade``): the barge-in is the model server's
  ``speech_started``, the truncation the front-end's.

Last line: ``RESULT engines=N barge_ins=N truncate_error_ms_median=X truncate_error_ms_max=X``
(goal: median <= 20, max <= 40). Per engine a line with its own figures.

    .venv/bin/python bench/barge_in.py [--barge-ins 6] [--engines cascade,remote]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnicall.app.config import ServerConfig  # noqa: E402
from tests.barge_in import BargeIn, barge_in  # noqa: E402
from tests.utils import running_server, start_process  # noqa: E402

FIRST_S, LAST_S = 0.7, 2.9


def moments(n: int) -> list[float]:
    return [round(FIRST_S + (LAST_S - FIRST_S) * i / max(1, n - 1), 2) for i in range(n)]


async def run_engine(name: str, n: int) -> list[BargeIn]:
    model_server = None
    if name == "cascade":
        config = ServerConfig(engine="cascade", ice_loopback=True, resume_window_s=0)
    else:
        model_server = await start_process("serve-engine", "--engine", "cascade")
        config = ServerConfig(engine="remote", ice_loopback=True, resume_window_s=0,
                              engine_url=model_server.ws_url)
    cuts: list[BargeIn] = []
    try:
        async with running_server(config) as (url, app):
            for after_s in moments(n):
                try:
                    cut = await barge_in(url, app, after_s)
                except AssertionError as exc:  # no answer, no cut: counted, not measured
                    print(f"{name:>8}: after {after_s:.2f} s: no measurement ({exc})", flush=True)
                    continue
                cuts.append(cut)
                got = "not found" if cut.received_ms is None else \
                    f"{cut.received_ms[0]:.0f}-{cut.received_ms[1]:.0f}"
                print(f"{name:>8}: after {after_s:.2f} s: kept {cut.heard_ms} ms, client "
                      f"received {got} ms of {cut.reply_ms:.0f}: error {cut.error_ms:.1f} ms",
                      flush=True)
    finally:
        if model_server is not None:
            await model_server.stop()
    return cuts


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--barge-ins", type=int, default=6, help="calls per engine")
    parser.add_argument("--engines", default="cascade,remote")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    names = [n for n in args.engines.split(",") if n]
    errors: list[float] = []
    for name in names:
        cuts = await run_engine(name, args.barge_ins)
        mine = [c.error_ms for c in cuts]
        if mine:
            print(f"RESULT engine={name} barge_ins={len(mine)} "
                  f"truncate_error_ms_median={statistics.median(mine):.1f} "
                  f"truncate_error_ms_max={max(mine):.1f}", flush=True)
        errors += mine
    if not errors:
        raise SystemExit("no barge-in was measured")
    print(f"RESULT engines={len(names)} barge_ins={len(errors)} "
          f"truncate_error_ms_median={statistics.median(errors):.1f} "
          f"truncate_error_ms_max={max(errors):.1f}")


if __name__ == "__main__":
    asyncio.run(main())
