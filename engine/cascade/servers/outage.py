"""A speech server's health as the calls use it (``--asr-url``, ``--tts-url``): answering, or
down since a failure. While it is down the calls use the local model at once, and the server is
asked again after ``retry_after_s`` (one turn, or one clause, tries it; the others keep the
local model meanwhile). Each outage is logged once as a warning (later failures of the same
outage at debug), its end once; :attr:`Outage.number` counts the outages, so each call tells
its page once per outage (:class:`Notice`). Pure: the time comes in as an argument.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 15.0  # a server that failed is asked again this long after its last failure


class Outage:
    """Up or down, for one server (``service``: what the log calls it, e.g. 'ASR server')."""

    def __init__(self, service: str, retry_after_s: float = RETRY_AFTER_S) -> None:
        self.service = service
        self.retry_after_s = retry_after_s
        self.number = 0  # outages so far (0: it never failed)
        self.failures = 0  # failed requests so far, all outages together
        self.down = False
        self._last_failure_s = float("-inf")

    def usable(self, now_s: float) -> bool:
        """Whether to ask the server now: it is up, or it failed ``retry_after_s`` ago."""
        return not self.down or now_s - self._last_failure_s >= self.retry_after_s

    def failed(self, now_s: float, reason: str) -> bool:
        """A request failed (``reason``: for the log); True when this starts an outage."""
        self.failures += 1
        self._last_failure_s = now_s
        if self.down:
            logger.debug("%s still failing: %s", self.service, reason)
            return False
        self.down = True
        self.number += 1
        logger.warning("%s failed (%s); the local model stands in, and the server is asked "
                       "again after %.0f s", self.service, reason, self.retry_after_s)
        return True

    def answered(self) -> bool:
        """A request succeeded; True when this ends an outage."""
        if not self.down:
            return False
        self.down = False
        logger.info("%s answers again", self.service)
        return True


class Notice:
    """One call's memory of the outages its page was told about: :meth:`due` is True once for
    each new outage of ``outage`` (and never while it has not failed)."""

    def __init__(self, outage: Outage) -> None:
        self.outage = outage
        self._told = 0
        self._before = 0

    def due(self) -> bool:
        if self.outage.number == self._told:
            return False
        self._before, self._told = self._told, self.outage.number
        return True

    def retract(self) -> None:
        """The page was not told after all (what carried it was dropped): due again."""
        self._told = self._before
