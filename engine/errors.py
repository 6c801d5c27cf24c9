"""Errors shared by engines."""


class EngineLoadError(RuntimeError):
    """An engine's models could not be loaded; the message names the package and the fix."""
