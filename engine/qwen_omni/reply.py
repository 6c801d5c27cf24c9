"""One streamed reply: Thinker tokens, the Talker one token behind, code2wav in small chunks.

:class:`ReplyStream` is a synchronous stepper (no threads, no I/O): each :meth:`step` decodes
at most one Thinker token and one Talker frame and returns what became available - text
tokens for captions and waveform chunks for egress. The engine calls it from a model worker;
tests and ``bench/native_stream.py`` call it directly and compare with ``generate()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from omnicall.engine.qwen_omni import thinker as th
from omnicall.engine.qwen_omni.codec import CodecState, StreamingCode2Wav
from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.talker import GREEDY, Talker, TalkerSampling, TalkerState, warpers


@dataclass(frozen=True)
class ThinkerSampling:
    do_sample: bool = False
    temperature: float = 0.7
    top_p: float = 0.8
    top_k: int = 20


@dataclass
class ReplyOptions:
    max_new_tokens: int = 256
    max_frames: int = 1024  # Talker steps (80 ms each)
    speaker: str = "ethan"
    with_audio: bool = True
    thinker_sampling: ThinkerSampling = field(default_factory=ThinkerSampling)
    talker_sampling: TalkerSampling = GREEDY
    seed: int | None = None


@dataclass
class StepOutput:
    tokens: list[int] = field(default_factory=list)
    audio: torch.Tensor | None = None  # float32 24 kHz mono
    frames: int = 0  # codec frames made this step


class ReplyStream:
    """Streams one assistant reply from a prefilled :class:`ThinkerState`.

    The prompt must end with ``<|im_start|>assistant\\n`` (``assistant_start`` is the index
    of that ``<|im_start|>``)."""

    def __init__(self, model: OmniModel, state: th.ThinkerState, options: ReplyOptions,
                 talker: Talker | None = None, codec: StreamingCode2Wav | None = None) -> None:
        self.m = model
        self.state = state
        self.options = options
        self.assistant_start = state.length - 3
        self.prompt_length = state.length
        if state.ids[self.assistant_start] != model.im_start_id:
            raise ValueError("the prompt must end with <|im_start|>assistant\\n")
        self.tokens: list[int] = []  # generated so far
        self.final_index: int | None = None  # index of the reply's last token once known
        self.thinker_done = False
        self.generator = None
        if options.seed is not None:
            self.generator = torch.Generator(device=model.device).manual_seed(options.seed)
        self.audio = options.with_audio and model.has_talker
        self.talker = talker if talker is not None else (
            Talker(model, options.talker_sampling) if self.audio else None)
        self.codec = codec if codec is not None else (
            StreamingCode2Wav(model.code2wav) if self.audio and model.code2wav is not None
            else None)
        self.talker_state: TalkerState | None = None
        self.codec_state = CodecState()
        self.talker_done = not self.audio
        self.frames = 0
        self.embed = model.thinker.get_input_embeddings()
        s = options.thinker_sampling
        self.thinker_warpers = warpers(s.temperature, s.top_k, s.top_p)

    @property
    def done(self) -> bool:
        return self.thinker_done and self.talker_done

    def _sample_thinker(self) -> int:
        assert self.state.last_logits is not None
        logits = self.state.last_logits.float()
        s = self.options.thinker_sampling
        if not s.do_sample:
            return int(logits.argmax())
        history = torch.tensor([self.tokens], dtype=torch.long, device=logits.device)
        scores = self.thinker_warpers(history, logits[None])  # type: ignore[arg-type]
        probs = torch.softmax(scores, dim=-1)
        return int(torch.multinomial(probs, 1, generator=self.generator)[0, 0])

    def _thinker_step(self, out: StepOutput) -> None:
        token = self._sample_thinker()
        self.tokens.append(token)
        out.tokens.append(token)
        index = len(self.tokens) - 1
        if token == self.m.im_end_id or len(self.tokens) >= self.options.max_new_tokens:
            self.final_index = index
            self.thinker_done = True
            return  # like generate(): the last token is never forwarded
        th.step(self.m, self.state, token)

    def _text_embed(self, index: int) -> torch.Tensor | None:
        """What Talker step ``index - 1`` adds: reply token ``index``'s embedding, tts_eos for
        the final token, then tts_pad (None)."""
        assert self.talker_state is not None
        if self.final_index is not None and index > self.final_index:
            return None
        if self.final_index is not None and index == self.final_index:
            return self.talker_state.tts_eos
        assert self.talker is not None
        token = torch.tensor([[self.tokens[index]]], device=self.m.device)
        return self.talker.talker.text_projection(self.embed(token))

    def _talker_can_step(self) -> bool:
        if self.talker_done:
            return False
        if self.talker_state is None:
            return len(self.tokens) >= 1
        needed = self.talker_state.frames + 1  # reply token index this step consumes
        return self.thinker_done or len(self.tokens) > needed

    def _talker_begin(self) -> tuple[int, torch.Tensor | None] | None:
        """Prefill the Talker, or sample the next codebook-0 token: returns what the frame
        step needs (code0, text embedding), or None when there is no frame this step."""
        assert self.talker is not None
        if self.talker_state is None:
            first = self.embed(torch.tensor([[self.tokens[0]]], device=self.m.device))[0]
            self.talker_state = self.talker.start(self.state, self.assistant_start, first,
                                                  self.options.speaker, self.generator)
            return None
        ts = self.talker_state
        code0 = self.talker.next_code(ts)
        # generate() stops after max_new_tokens Talker tokens; the last one is never voiced
        if ts.done or len(ts.generated) >= self.options.max_frames:
            self.talker_done = True
            return None
        return code0, self._text_embed(ts.frames + 1)

    def _talker_end(self, codes: torch.Tensor, out: StepOutput) -> None:
        assert self.codec is not None
        self.codec.push(self.codec_state, codes)
        out.frames += 1
        self.frames += 1

    def step(self) -> StepOutput:
        return step_many([self])[0]


def step_many(streams: list[ReplyStream]) -> list[StepOutput]:
    """One step of several replies (several calls) together: each Thinker step and Talker
    step runs on its reply's own cache; the code predictor of all frames made in this step
    runs as one batch per shared Talker (greedy output equals stepping each alone)."""
    outs = [StepOutput() for _ in streams]
    with torch.inference_mode():
        frames: dict[int, list[tuple[ReplyStream, StepOutput, int, torch.Tensor | None]]] = {}
        for stream, out in zip(streams, outs, strict=True):
            if not stream.thinker_done:
                stream._thinker_step(out)
            if stream._talker_can_step():
                begun = stream._talker_begin()
                if begun is not None:
                    frames.setdefault(id(stream.talker), []).append((stream, out, *begun))
        for group in frames.values():
            talker = group[0][0].talker
            assert talker is not None
            codes = talker.frames([s.talker_state for s, _, _, _ in group],  # type: ignore[misc]
                                  [c for _, _, c, _ in group], [t for _, _, _, t in group])
            for (stream, out, _, _), frame in zip(group, codes, strict=True):
                stream._talker_end(frame, out)
        for stream, out in zip(streams, outs, strict=True):
            codec = stream.codec
            if codec is not None and codec.ready(stream.codec_state, stream.talker_done):
                out.audio = codec.decode(stream.codec_state, final=stream.talker_done)
    return outs
