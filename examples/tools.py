"""Two example tools for ``--tools examples.tools``: the local time, and a small FAQ.

Run the assistant with them::

    omnicall serve --tools examples.tools --instructions-file examples/kiosk.txt

A tool is a typed function with a docstring; ``@tool`` registers it and its JSON schema
comes from the signature. ``examples=`` teaches small models when to call it.
``OMNICALL_FAQ`` names another FAQ file (a JSON object: topic -> answer).
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from functools import cache
from pathlib import Path

from omnicall.engine.tools import tool

FAQ_PATH = Path(os.environ.get("OMNICALL_FAQ", Path(__file__).with_name("faq.json")))
_WORD = re.compile(r"[a-z]+")


@tool(examples=["What time is it?", "What's the date today?"], speculative=True)
def local_time() -> str:
    """The current local time, weekday and date."""
    now = datetime.now().astimezone()
    return now.strftime("It is %H:%M on %A, %d %B %Y")


@cache
def _faq() -> dict[str, str]:
    data = json.loads(FAQ_PATH.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{FAQ_PATH}: expected a JSON object of topic -> answer")
    return {str(k): str(v) for k, v in data.items()}


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in _WORD.findall(text.lower()) if len(w) > 3}


@tool(filler="Let me look that up.", speculative=True,  # both only read: they may run early
      examples=["When does the museum open?", "How much is a ticket?"])
def museum_faq(question: str) -> str:
    """Answers questions about the museum: opening hours, tickets and prices, the cafe,
    exhibitions, toilets."""
    asked = _words(question)
    best = max(_faq().items(), key=lambda kv: len(asked & _words(kv[0] + " " + kv[1])))
    if not asked & _words(best[0] + " " + best[1]):
        return "The FAQ has no answer to that; topics: " + ", ".join(_faq())
    return best[1]
