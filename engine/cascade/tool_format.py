"""The tool prompt format for a local model whose chat template has no tool syntax: a
documented format any chat model can follow. The system prompt lists the tools
(:func:`tool_prompt`), and every reply starts with ``[tool_name]`` or ``[none]``; the tools'
examples become few-shot turns (:func:`tool_shots`); a tool's result follows the prompt as a
system message of facts (:func:`tool_result_messages`). The model's choice and arguments are
constrained by :class:`~omnicall.engine.cascade.llm.LlamaLlm`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omnicall.engine.cascade.language_model import ToolRequest

if TYPE_CHECKING:
    from omnicall.engine.tools import ToolSpec

NO_TOOL = "none"


def tool_prompt(specs: list[ToolSpec]) -> str:
    """The system prompt's tool section, in the bracket format the grammar enforces."""
    lines = "\n".join(f"- {spec.name}: {spec.description}" for spec in specs)
    return (f"Tools you can use:\n{lines}\nStart every reply with the tool it needs, as "
            f"[tool_name], or with [{NO_TOOL}] when no tool is needed.")


NO_TOOL_SHOT = ("Hello, who are you?", f"[{NO_TOOL}] Hello! I am your assistant.")


def tool_shots(specs: list[ToolSpec]) -> list[tuple[str, str]]:
    """Few-shot turns from the tools' examples (interleaved, then one without a tool)."""
    shots: list[tuple[str, str]] = []
    longest = max((len(spec.examples) for spec in specs), default=0)
    for index in range(longest):
        for spec in specs:
            if index < len(spec.examples):
                shots += [("user", spec.examples[index]), ("assistant", f"[{spec.name}]")]
    if shots:
        shots += [("user", NO_TOOL_SHOT[0]), ("assistant", NO_TOOL_SHOT[1])]
    return shots


def tool_result_messages(request: ToolRequest, output: str) -> list[dict[str, Any]]:
    """What follows the prompt once a tool returned. Measured on SmolLM2-135M: a system
    message of facts, answered greedily, keeps the result best (a ``tool`` role message or
    the call echoed as an assistant turn made it ignore or garble the result)."""
    return [{"role": "system", "content": f"Facts for your answer: {output}"}]
