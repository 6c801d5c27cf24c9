"""Processes: the sockets a server listens on, the serve loop, and ``--workers`` (the
supervisor and the worker group)."""
