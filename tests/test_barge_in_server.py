"""Barge-in over a real call on the CPU cascade: the engine keeps what the client received.

Two calls, each interrupted at a known moment of the answer (after the client has heard 0.9 s
and 1.7 s of it); the engine's interrupted end event says how much of the reply it kept
(``heard_ms``), the client's decoded audio says how much it received. The engine counts at
the very moment it cuts the sound (the reply sound handle's ``stop``), so the two agree to
the codec's few ms whatever the load: :data:`TOLERANCE_MS` is the issue's bound for the
worst case.
"""

from __future__ import annotations

from omnicall.app.config import ServerConfig
from tests.barge_in import barge_in
from tests.utils import running_server

CONFIG = ServerConfig(engine="cascade", ice_loopback=True, turn_model="fixed", resume_window_s=0)
TOLERANCE_MS = 40


async def test_the_cascade_keeps_what_the_client_received_at_each_barge_in() -> None:
    async with running_server(CONFIG) as (url, app):
        cuts = [await barge_in(url, app, after_s) for after_s in (0.9, 1.7)]
    for cut in cuts:
        assert cut.received_ms is not None, cut  # the reply was found in what the client got
        lo = cut.received_ms[0]
        assert 0.7 * 1000 * cut.after_s < lo < cut.reply_ms - 100, cut  # cut mid-way, as asked
        assert cut.error_ms <= TOLERANCE_MS, cut
    assert cuts[1].heard_ms > cuts[0].heard_ms  # a later barge-in kept more
