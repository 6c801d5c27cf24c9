"""A WebRTC call: its session (parts, event routing, teardown), peer connection, watchdog,
data channel (control channel and its messages), network quality, and resume of dropped calls."""
