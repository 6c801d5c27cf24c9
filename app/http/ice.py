"""ICE host-candidate selection.

aioice lists every interface address except 127.0.0.1 when gathering host candidates. For
hermetic tests (and clients on the same host) the server can instead offer exactly the
loopback address. aioice has no setting for this, so :func:`use_loopback_candidates` replaces
its module-level ``get_host_addresses`` - process-wide, reversible, and checked by a test.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import aioice.ice

logger = logging.getLogger(__name__)

_original: Callable[[bool, bool], list[str]] | None = None


def _loopback_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
    return ["127.0.0.1"] if use_ipv4 else ["::1"]


def use_loopback_candidates(enabled: bool) -> None:
    global _original
    if not hasattr(aioice.ice, "get_host_addresses"):
        raise RuntimeError("aioice.ice.get_host_addresses is gone; update app/http/ice.py")
    if enabled and _original is None:
        _original = aioice.ice.get_host_addresses
        aioice.ice.get_host_addresses = _loopback_addresses
        logger.info("ICE: offering loopback candidates only")
    elif not enabled and _original is not None:
        aioice.ice.get_host_addresses = _original  # type: ignore[assignment]
        _original = None
