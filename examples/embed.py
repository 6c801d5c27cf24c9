"""omnicall from Python: a museum kiosk guide with its own persona and tools, in a few lines.

    .venv/bin/python examples/embed.py      # then open the printed URL

The same as ``omnicall serve --instructions-file ... --greeting ... --tools examples.tools``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

import omnicall
from examples.tools import local_time, museum_faq

PERSONA = ("You are Ada, the guide of the City Museum, on a kiosk in the entrance hall. "
           "Answer visitors in one or two short, friendly spoken sentences.")


def build(port: int = 8080) -> tuple[omnicall.Config, omnicall.Toolbox]:
    config = omnicall.Config(port=port, instructions=PERSONA,
                             greeting="Hello! I am Ada, the museum guide. Ask me anything.")
    return config, omnicall.toolbox(local_time, museum_faq, timeout_s=3.0)


if __name__ == "__main__":
    config, tools = build()
    omnicall.run(config, tools=tools)
