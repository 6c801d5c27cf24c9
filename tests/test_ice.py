import aioice.ice

from omnicall.app.http.ice import use_loopback_candidates


def test_loopback_switch_is_reversible() -> None:
    original = aioice.ice.get_host_addresses
    use_loopback_candidates(True)
    try:
        assert aioice.ice.get_host_addresses(True, False) == ["127.0.0.1"]
    finally:
        use_loopback_candidates(False)
    assert aioice.ice.get_host_addresses is original
    assert "127.0.0.1" not in original(True, False)  # why the switch exists
