"""A speech server's outages: the local model stands in at once, the server is asked again
after a while, each outage is told once (log and page)."""

import logging

import pytest

from omnicall.engine.cascade.servers.outage import Notice, Outage


def test_an_outage_starts_once_and_the_server_is_asked_again_after_the_wait(
        caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage("ASR server x", retry_after_s=10.0)
    assert outage.usable(0.0) and not outage.answered()  # up, and no outage to end
    with caplog.at_level(logging.INFO, logger="omnicall.engine.cascade.servers.outage"):
        assert outage.failed(1.0, "connection refused")
        assert not outage.failed(2.0, "connection refused")  # the same outage
    assert [r.levelname for r in caplog.records] == ["WARNING"]  # said once
    assert outage.number == 1 and outage.failures == 2 and outage.down
    assert not outage.usable(11.9)  # 10 s after the last failure, not the first
    assert outage.usable(12.0)
    assert outage.answered() and not outage.down and outage.usable(12.0)
    assert outage.failed(20.0, "timed out") and outage.number == 2  # a new outage


def test_each_call_tells_its_page_once_per_outage() -> None:
    outage = Outage("speech server x")
    first, second = Notice(outage), Notice(outage)
    assert not first.due()  # never failed: nothing to say
    outage.failed(0.0, "boom")
    assert first.due() and not first.due()
    outage.failed(1.0, "boom")  # still the same outage
    assert not first.due()
    assert second.due()  # another call is told too
    outage.answered()
    outage.failed(30.0, "boom")
    assert first.due() and second.due()
