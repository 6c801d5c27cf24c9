"""The client protocol as a contract: ``web/protocol.schema.json`` (JSON Schema 2020-12),
versioned, loaded once from the package.

It describes POST /offer and its answer, GET /config and every data-channel message both
ways (``docs/protocol.md`` says what each means; ``tests/test_protocol_schema.py`` checks the
server against the schema and the page against the doc). The server states
:data:`PROTOCOL_VERSION` in ``/config`` and in each answer, and refuses what the schema
forbids on the way in (:func:`problem`: a control message it forbids is ignored and
counted). The file is served with the page's assets (``/static/protocol.schema.json``), so
a client can fetch the contract of the server it talks to.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

#: the page's assets (installed: omnicall/web; here: web/), where the schema ships
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "web" / "protocol.schema.json"


@functools.cache
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(loaded)
    return loaded


PROTOCOL_VERSION: str = schema()["version"]


def names() -> list[str]:
    """The parts the schema defines (``offer``, ``server_message``, ``turn``, ...)."""
    return list(schema()["$defs"])


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """A validator of the schema's part ``name``."""
    whole = schema()
    if name not in whole["$defs"]:
        raise KeyError(f"the protocol schema has no {name!r}")
    return Draft202012Validator({"$defs": whole["$defs"], "$ref": f"#/$defs/{name}"})


def problem(name: str, instance: Any) -> str | None:
    """Why ``instance`` is not a valid ``name`` (the most relevant error, one line), or None
    when it is."""
    error = best_match(validator(name).iter_errors(instance))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"[:200]
