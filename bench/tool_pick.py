"""How often the bundled model picks the right tool (or none) for spoken and typed requests.

The example tools (``examples/tools.py``: local_time, museum_faq) and 24 requests: 8 for
each tool and 8 that need none, worded differently from the tools' own examples. Spoken:
synthesized by the bundled Piper voice, heard by the bundled Whisper tiny.en, then the
cascade's grammar-constrained choice (the same prompt a call uses); typed: the text itself.
Last line: ``RESULT spoken=<right>/<n> typed=<right>/<n> none_wrong=<n> decide_ms=<median>``.

    .venv/bin/python bench/tool_pick.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from omnicall.engine.cascade.asr import WhisperAsr  # noqa: E402
from omnicall.engine.cascade.history import Conversation  # noqa: E402
from omnicall.engine.cascade.llm import LlamaLlm  # noqa: E402
from omnicall.engine.cascade.tool_format import tool_prompt, tool_shots  # noqa: E402
from omnicall.engine.tools import load_tools  # noqa: E402
from tests.utils import piper_speech  # noqa: E402

REQUESTS = [
    ("What time is it now?", "local_time"),
    ("Can you tell me the time please?", "local_time"),
    ("What day is it today?", "local_time"),
    ("Which date is it?", "local_time"),
    ("Is it morning or evening now?", "local_time"),
    ("What's the time right now?", "local_time"),
    ("Do you know what time it is?", "local_time"),
    ("What is today's date?", "local_time"),
    ("What are the opening hours?", "museum_faq"),
    ("How much does entry cost?", "museum_faq"),
    ("Is there a cafe in the museum?", "museum_faq"),
    ("What exhibitions are on?", "museum_faq"),
    ("Where are the toilets?", "museum_faq"),
    ("When does the museum close?", "museum_faq"),
    ("Do children pay for tickets?", "museum_faq"),
    ("Is the museum open on Monday?", "museum_faq"),
    ("What is the capital of France?", None),
    ("Tell me a joke.", None),
    ("How are you doing?", None),
    ("What is two plus two?", None),
    ("Who painted the Mona Lisa?", None),
    ("What color is the sky?", None),
    ("Can you recommend a good book?", None),
    ("How many legs does a spider have?", None),
]


def main() -> None:
    box = load_tools("examples.tools")
    specs = box.specs()
    llm = LlamaLlm()
    asr = WhisperAsr()
    conversation = Conversation(tools=tool_prompt(specs), shots=tool_shots(specs))
    right = {"spoken": 0, "typed": 0}
    none_wrong = 0
    decide_ms: list[float] = []
    for text, expected in REQUESTS:
        heard = asr.transcribe(piper_speech(text, rate=16_000, lead_s=0.2, tail_s=0.3))
        for mode, request in (("typed", text), ("spoken", heard)):
            started = time.monotonic()
            picked = llm.choose_tool(llm.prompt(conversation.messages("", request)), specs)
            decide_ms.append((time.monotonic() - started) * 1000)
            name = picked.name if picked is not None else None
            right[mode] += name == expected
            none_wrong += mode == "typed" and expected is None and name is not None
            print(f"{mode:>6}: {request!r:45} -> {name or 'none':11} "
                  f"{'ok' if name == expected else 'WRONG (' + str(expected) + ')'}", flush=True)
    n = len(REQUESTS)
    print(f"RESULT spoken={right['spoken']}/{n} typed={right['typed']}/{n} "
          f"none_wrong={none_wrong} decide_ms={statistics.median(decide_ms):.0f}")


if __name__ == "__main__":
    main()
