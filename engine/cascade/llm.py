"""The Thinker's language model: SmolLM2-135M-Instruct (bundled GGUF) on llama.cpp.

Tools (function calling) use a documented, grammar-constrained format that any chat model
can follow, since the bundled model's chat template has no tool syntax
(:mod:`omnicall.engine.cascade.tool_format`): the system prompt lists the tools, and every
reply starts with ``[tool_name]`` or ``[none]`` - a choice restricted to exactly those names
(greedy, so the same request picks the same tool). A tool's arguments are then generated: a
single string argument up to its closing quote, anything else under a llama.cpp grammar built
from its JSON schema. The plain answer
continues the same prompt after ``[none] ``, so the prompt is prefilled once.

llama-cpp-python was chosen over transformers by measurement on two CPU cores:
~100 tok/s and ~150 ms time to first token vs 18 tok/s, 190 ms and a 28 s first load for
transformers (which dequantizes the GGUF to fp32). The model is small and its answers are
weak, so prompts stay short and replies are guarded (length cap, two sentences, no markup:
:mod:`omnicall.engine.cascade.reply_filters`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_cpp import Llama, LlamaGrammar
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from omnicall.engine.bundled_models import smollm2_gguf
from omnicall.engine.cascade.language_model import ToolRequest
from omnicall.engine.cascade.reply_filters import SpokenReply
from omnicall.engine.cascade.tool_format import NO_TOOL, tool_result_messages

if TYPE_CHECKING:
    from omnicall.engine.tools import ToolSpec

logger = logging.getLogger(__name__)

PREFILL_MARK = "\x00omnicall-prefill\x00"  # where the last message's text goes
ARGUMENT_TOKENS = 64
#: SmolLM2's own template (plain ChatML): used when a GGUF carries no chat template
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


class LlamaLlm:
    """A GGUF chat model on llama.cpp, in this process (a
    :class:`~omnicall.engine.cascade.language_model.LanguageModel`)."""

    prompt_tools = True  # tools are listed in the system prompt (the bracket format)
    can_prefill = True  # llama.cpp keeps the evaluated prompt: prefill() fills it ahead
    can_warm = False  # in this process: prefill() on the think worker does it
    sees = False  # a text model: the face sentence describes the camera
    hears = False  # it reads the transcript
    speaks = False  # the local voice speaks its text

    def __init__(self, model_path: Path | None = None, threads: int = 2,
                 max_reply_tokens: int = 64, context_tokens: int = 2048,
                 sprint_threads: int | None = None) -> None:
        path = model_path or smollm2_gguf()
        # prefill the prompt on both cores; decode on ``sprint_threads`` until the first
        # clause is out (nothing plays yet: the user waits), then on ``threads`` (the reply is
        # playing and only has to stay ahead of it; the other core serves the other calls)
        self.threads = threads
        self.sprint_threads = max(threads, sprint_threads or threads)
        self.batch_threads = max(2, self.sprint_threads)
        self.llm = Llama(model_path=str(path), n_ctx=context_tokens, n_threads=threads,
                         n_threads_batch=self.batch_threads, verbose=False)
        self.decode_threads = threads
        self.max_reply_tokens = max_reply_tokens
        self.name = Path(path).name
        template = self.llm.metadata.get("tokenizer.chat_template") or CHATML
        eos = self.llm.detokenize([self.llm.token_eos()]).decode(errors="ignore")
        self.formatter = Jinja2ChatFormatter(template, eos_token=eos, bos_token="")
        self._grammars: dict[str, LlamaGrammar] = {}

    @staticmethod
    def tool_result_messages(request: ToolRequest, output: str) -> list[dict[str, Any]]:
        return tool_result_messages(request, output)

    def prompt(self, messages: list[dict[str, Any]]) -> str:
        return self.formatter(messages=messages).prompt  # type: ignore[arg-type]

    def _grammar(self, key: str, build: Callable[[], LlamaGrammar]) -> LlamaGrammar:
        if key not in self._grammars:
            if len(self._grammars) > 64:
                self._grammars.clear()
            self._grammars[key] = build()
        return self._grammars[key]

    def choose_tool(self, prompt: str, specs: list[ToolSpec]) -> ToolRequest | None:
        """The constrained choice of ``[tool_name]`` or ``[none]`` (greedy), then the
        arguments. None: answer without a tool."""
        name = self._choose(prompt, tuple(spec.name for spec in specs))
        spec = next((s for s in specs if s.name == name), None)
        if spec is None:
            return None
        return ToolRequest(name, self._arguments(prompt, spec))

    def _choose(self, prompt: str, names: tuple[str, ...]) -> str:
        """Walk the options' token trie: where they share tokens nothing is sampled; where
        they branch, one greedy step restricted (by logit bias) to the branches. The same
        choice a grammar makes, at one decode step per branch point (a grammar-constrained
        sample cost ~25 ms a token here: ~130 ms for a choice, against ~30)."""
        options = {n: self.llm.tokenize(f"[{n}]".encode(), add_bos=False, special=False)
                   for n in (*names, NO_TOOL)}
        tokens = self.llm.tokenize(prompt.encode(), add_bos=False, special=True)
        alive = dict(options)
        depth = 0
        while len(alive) > 1:
            branches = {seq[depth] for seq in alive.values() if depth < len(seq)}
            if len(branches) > 1:
                texts = {t: self.llm.detokenize([t]).decode(errors="replace") for t in branches}
                out: Any = self.llm.create_completion(
                    tokens, max_tokens=1, temperature=0.0,
                    logit_bias={t: 100.0 for t in branches})
                picked = out["choices"][0]["text"]
                chosen = next((t for t, text in texts.items() if text == picked),
                              min(branches))
            else:
                chosen = next(iter(branches))
            alive = {n: seq for n, seq in alive.items()
                     if depth < len(seq) and seq[depth] == chosen}
            tokens.append(chosen)
            depth += 1
        return next(iter(alive), NO_TOOL)

    def _arguments(self, prompt: str, spec: ToolSpec) -> dict[str, Any]:
        """One string parameter: its value is generated up to the closing quote (no grammar
        needed); other schemas: sampled under a grammar built from the JSON schema."""
        properties = spec.parameters.get("properties") or {}
        if not properties:
            return {}
        head = f"{prompt}[{spec.name}] "
        if len(properties) == 1:
            (param, schema), = properties.items()
            if isinstance(schema, dict) and schema.get("type") == "string":
                out: Any = self.llm.create_completion(
                    f'{head}{{"{param}": "', max_tokens=ARGUMENT_TOKENS, temperature=0.0,
                    stop=['"', "\n", "}"])
                return {param: out["choices"][0]["text"].strip()}
        schema_text = json.dumps(spec.parameters)
        grammar = self._grammar(schema_text, lambda: LlamaGrammar.from_json_schema(
            schema_text, verbose=False))
        out = self.llm.create_completion(f"{head}arguments: ", max_tokens=ARGUMENT_TOKENS,
                                         temperature=0.0, grammar=grammar)
        try:
            arguments = json.loads(out["choices"][0]["text"])
        except json.JSONDecodeError:  # cut at the token limit
            return {}
        return arguments if isinstance(arguments, dict) else {}

    def set_decode_threads(self, threads: int) -> None:
        """Threads for the next decode steps (call it on the thread that decodes)."""
        if threads != self.decode_threads:
            self.llm._ctx.set_n_threads(threads, self.batch_threads)
            self.decode_threads = threads

    async def warm(self, messages: list[dict[str, Any]]) -> bool:
        raise NotImplementedError("the local model is prefilled on its worker (prefill)")

    async def aclose(self) -> None:
        """Nothing held open: the model lives in this process until it is dropped."""

    def cruise(self) -> None:
        """The reply's first clause is out: decode on ``threads`` from now on."""
        self.set_decode_threads(self.threads)

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode(), add_bos=False))

    def prefill(self, messages: list[dict[str, Any]]) -> int:
        """Evaluate the prompt of ``messages`` up to the end of the last message's text
        (the user's words so far, heard by a partial transcript), so the answer's prompt
        finds it in llama.cpp's cache and only the rest of the turn is prefilled at the
        end of turn. Where the final transcript differs, the cache is reused up to the
        first differing token. Returns the tokens evaluated now."""
        *head, last = messages
        rendered = self.prompt([*head, {**last, "content": PREFILL_MARK}])
        prefix = rendered[:rendered.rindex(PREFILL_MARK)] + last["content"]
        tokens = self.llm.tokenize(prefix.encode(), add_bos=False, special=True)
        cached = 0
        for have, want in zip(self.llm.eval_tokens, tokens, strict=False):
            if have != want:
                break
            cached += 1
        if cached >= len(tokens):
            return 0
        # generate() reuses the cached prefix and evaluates the rest; the token it samples
        # is not evaluated (the generator is dropped), so the cache ends at the prompt
        next(iter(self.llm.generate(tokens, temp=0.0)))
        return len(tokens) - cached

    def stream(self, messages: list[dict[str, Any]], cancel: threading.Event,
               max_tokens: int | None = None, tools: list[ToolSpec] | None = None,
               greedy: bool = False) -> Iterator[str | ToolRequest]:
        """Reply text deltas, or one :class:`ToolRequest` (when ``tools`` are offered and
        the model picks one); stops early when ``cancel`` is set or after two sentences.
        ``greedy``: no sampling (answers from a tool's result keep its facts better).
        Decodes on ``sprint_threads`` until :meth:`cruise` is called."""
        prompt = self.prompt(messages)
        self.set_decode_threads(self.sprint_threads)
        if tools:
            request = self.choose_tool(prompt, tools)
            if request is not None:
                yield request
                return
            prompt += f"[{NO_TOOL}] "
        chunks: Iterator[Any] = self.llm.create_completion(  # type: ignore[assignment]
            prompt, stream=True, max_tokens=max_tokens or self.max_reply_tokens,
            temperature=0.0 if greedy else 0.3, top_p=0.9, repeat_penalty=1.15)
        reply = SpokenReply()
        for chunk in chunks:
            if cancel.is_set():
                return
            content = chunk["choices"][0]["text"]
            if not isinstance(content, str) or not content:
                continue
            delta = reply.feed(content)
            if not delta:
                continue
            yield delta
            if reply.done:
                return
