"""Engines: the model side of a call, behind one interface (see :mod:`omnicall.engine.base`)."""
