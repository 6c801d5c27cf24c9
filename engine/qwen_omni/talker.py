"""The Talker, one codec frame at a time, one text token behind the Thinker.

``Qwen3OmniMoeForConditionalGeneration.generate`` runs the Talker only after the Thinker
has finished. The Talker does not need the whole reply, though: its prefill needs the user
side of the conversation (Thinker hidden states of layer ``accept_hidden_layer`` at media
positions, projected Thinker embeddings elsewhere) plus the assistant prefix and the *first*
reply token, and its step ``j`` consumes the Thinker embedding of reply token ``j + 1`` (or
``tts_eos`` when that token is the last, ``tts_pad`` after). So step ``j`` can run as soon as
the Thinker has sampled token ``j + 1``. Each step samples codebook 0, then the code predictor
fills codebooks 1..15: one 80 ms frame.

The arithmetic mirrors the library's ``generate`` (same tensors, same order) so that greedy
streaming output is bit-identical to it; the tests check that.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import (
    DynamicCache,
    LogitsProcessorList,
    RepetitionPenaltyLogitsProcessor,
    SuppressTokensLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from omnicall.engine.qwen_omni.model import OmniModel
from omnicall.engine.qwen_omni.thinker import ThinkerState, subset_positions


@dataclass(frozen=True)
class TalkerSampling:
    do_sample: bool = True
    top_k: int = 50
    top_p: float = 1.0
    temperature: float = 0.9
    repetition_penalty: float = 1.05
    predictor_top_k: int = 50
    predictor_top_p: float = 0.8


GREEDY = TalkerSampling(do_sample=False)


@dataclass
class TalkerState:
    cache: DynamicCache | None = None
    position: int = 0  # next position id (text-like positions for generated frames)
    logits: torch.Tensor | None = None  # (1, vocab) for the next codebook-0 token
    last_hidden: torch.Tensor | None = None  # (1, 1, D) last layer, last position
    generated: list[int] = field(default_factory=list)  # codebook-0 tokens
    frames: int = 0
    done: bool = False
    tts_pad: torch.Tensor | None = None  # (1, 1, D)
    tts_eos: torch.Tensor | None = None
    generator: torch.Generator | None = None


def user_mask(model: OmniModel, ids: torch.Tensor) -> torch.Tensor:
    """Positions inside user messages (from a user ``<|im_start|>`` to the next one)."""
    positions = torch.arange(ids.shape[0], device=ids.device)
    starts = torch.where(ids == model.im_start_id, positions, positions.new_full((), -1))
    previous = torch.cummax(starts, dim=0).values.clamp_min(0)
    roles = ids[(previous + 1).clamp_max(ids.shape[0] - 1)]
    return roles == model.user_id


def warpers(temperature: float, top_k: int, top_p: float) -> LogitsProcessorList:
    """transformers' sampling warpers, in generate()'s order."""
    return LogitsProcessorList([TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k),
                                TopPLogitsWarper(top_p)])


def _processors(model: OmniModel, sampling: TalkerSampling) -> LogitsProcessorList:
    assert model.talker is not None
    vocab = int(model.talker.config.text_config.vocab_size)
    suppressed = [i for i in range(vocab - 1024, vocab) if i != model.codec_eos_id]
    procs = LogitsProcessorList([
        RepetitionPenaltyLogitsProcessor(sampling.repetition_penalty),
        SuppressTokensLogitsProcessor(suppressed, device=str(model.device)),
    ])
    if sampling.do_sample:
        procs.extend(warpers(sampling.temperature, sampling.top_k, sampling.top_p))
    return procs


class Talker:
    """Stateless driver over the shared model; all per-reply state is in :class:`TalkerState`."""

    def __init__(self, model: OmniModel, sampling: TalkerSampling = TalkerSampling()) -> None:
        if model.talker is None:
            raise ValueError("this model was loaded text-only (no Talker)")
        self.m = model
        self.talker = model.talker
        self.sampling = sampling
        self.processors = _processors(model, sampling)
        predictor = self.talker.code_predictor
        self.predictor = predictor
        self.predictor_processors = LogitsProcessorList()
        if sampling.do_sample:
            self.predictor_processors.extend([TopKLogitsWarper(sampling.predictor_top_k),
                                              TopPLogitsWarper(sampling.predictor_top_p)])

    def _special_embeds(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ids = torch.tensor([[self.m.tts_bos_id, self.m.tts_eos_id, self.m.tts_pad_id]],
                           device=self.m.device, dtype=torch.long)
        embeds = self.talker.text_projection(self.m.thinker.get_input_embeddings()(ids))
        bos, eos, pad = embeds.chunk(3, dim=1)
        return bos, eos, pad

    def start(self, thinker: ThinkerState, assistant_start: int, first_token_embed: torch.Tensor,
              speaker: str = "ethan", generator: torch.Generator | None = None) -> TalkerState:
        """Prefill: user parts of the retained conversation + assistant prefix + first token.

        ``assistant_start`` is the index (in ``thinker.ids``) of the reply's ``<|im_start|>``;
        ``first_token_embed`` is the Thinker input embedding (1, D) of reply token 0."""
        m = self.m
        speaker_id = m.speakers.get(speaker.lower())
        if speaker_id is None:
            raise ValueError(f"unknown speaker {speaker!r}; choose one of {sorted(m.speakers)}")
        ids = torch.tensor(thinker.ids, dtype=torch.long, device=m.device)
        embeds = torch.cat(thinker.embeds)
        accept = torch.cat(thinker.accept)
        prompt_ids = ids[:assistant_start]
        users = user_mask(m, prompt_ids)
        mm = ((prompt_ids == m.audio_id) | (prompt_ids == m.image_id)
              | (prompt_ids == m.video_id))
        hidden_size = self.talker.config.text_config.hidden_size
        user_part = torch.empty((1, int(users.sum()), hidden_size), device=m.device,
                                dtype=self.talker.dtype)
        sel_mm = mm[users]
        if sel_mm.any():
            user_part[0][sel_mm] = self.talker.hidden_projection(
                accept[:assistant_start][users][sel_mm])
        user_part[0][~sel_mm] = self.talker.text_projection(
            embeds[:assistant_start][users][~sel_mm])

        bos, eos, pad = self._special_embeds()
        prefix = torch.cat([embeds[assistant_start:assistant_start + 3], first_token_embed])
        assistant_hidden = self.talker.text_projection(prefix.unsqueeze(0))
        text_part = torch.cat((assistant_hidden[:, :3], pad.expand(1, 4, -1), bos,
                               assistant_hidden[:, 3:4]), dim=1)
        cfg = self.talker.config
        special = torch.tensor([[cfg.codec_nothink_id, cfg.codec_think_bos_id,
                                 cfg.codec_think_eos_id, speaker_id, cfg.codec_pad_id,
                                 cfg.codec_bos_id]], device=m.device, dtype=torch.long)
        codec_part = torch.cat((torch.zeros((1, 3, hidden_size), device=m.device,
                                            dtype=self.talker.dtype),
                                self.talker.get_input_embeddings()(special)), dim=1)
        inputs = torch.cat((user_part, text_part + codec_part), dim=1)
        user_pos = subset_positions(thinker, users)
        start = int(user_pos.max()) + 1 if user_pos.numel() else 0
        assistant_pos = (torch.arange(text_part.shape[1], device=m.device) + start).view(1, -1)
        position_ids = torch.cat([user_pos, assistant_pos.expand(3, -1)], dim=1).unsqueeze(1)
        state = TalkerState(tts_pad=pad, tts_eos=eos, generator=generator)
        self._forward(state, inputs, position_ids)
        state.position = int(position_ids.max()) + 1
        return state

    def _forward(self, state: TalkerState, inputs: torch.Tensor,
                 position_ids: torch.Tensor) -> None:
        out = self.talker.model(input_ids=None, inputs_embeds=inputs, position_ids=position_ids,
                                cache=state.cache, use_cache=True, output_hidden_states=True)
        state.cache = out.cache
        state.logits = self.talker.codec_head(out.last_hidden_state)[:, -1, :]
        state.last_hidden = out.hidden_states[-1][:, -1:]

    def _pick(self, procs: LogitsProcessorList, history: torch.Tensor, logits: torch.Tensor,
              generator: torch.Generator | None) -> torch.Tensor:
        scores = procs(history, logits.float())  # type: ignore[arg-type]
        if self.sampling.do_sample:
            probs = torch.softmax(scores, dim=-1)
            return torch.multinomial(probs, 1, generator=generator)[:, 0]
        return scores.argmax(dim=-1)

    def next_code(self, state: TalkerState) -> int:
        """Sample codebook 0 for the next frame from the pending logits."""
        assert state.logits is not None
        history = torch.tensor([state.generated], dtype=torch.long, device=self.m.device)
        token = int(self._pick(self.processors, history, state.logits, state.generator)[0])
        state.generated.append(token)
        if token == self.m.codec_eos_id:
            state.done = True
        return token

    def frames(self, states: list[TalkerState], code0s: list[int],
               text_embeds: list[torch.Tensor | None]) -> list[torch.Tensor]:
        """One frame for each reply (one per call): codebooks 1..15 for its ``code0``, then
        the frame (plus the next text embedding, or ``tts_pad`` when None) is fed to its
        Talker cache. The code predictor - 15 small sequential forwards per frame, with no
        history - runs as one batch for all of them. Returns each frame's 16 codes."""
        m = self.m
        c0 = torch.tensor([[c] for c in code0s], dtype=torch.long, device=m.device)
        c0_embed = self.talker.get_input_embeddings()(c0)  # (B, 1, D)
        hidden = []
        for state in states:
            assert state.last_hidden is not None and state.tts_pad is not None
            hidden.append(state.last_hidden)
        codes, residual_embeds = self._predict_residuals(
            torch.cat(hidden), c0_embed, [s.generator for s in states])
        out = []
        for row, (state, text_embed) in enumerate(zip(states, text_embeds, strict=True)):
            codec_hiddens = torch.cat(
                [c0_embed[row:row + 1]] + [e[row:row + 1] for e in residual_embeds], dim=1)
            inputs = codec_hiddens.sum(1, keepdim=True)
            assert state.tts_pad is not None
            inputs = inputs + (text_embed if text_embed is not None else state.tts_pad)
            position_ids = torch.full((3, 1, 1), state.position, dtype=torch.long,
                                      device=m.device)
            self._forward(state, inputs, position_ids)
            state.position += 1
            state.frames += 1
            out.append(torch.cat([c0[row], codes[row]]))
        return out

    def _predict_residuals(self, last_hidden: torch.Tensor, c0_embed: torch.Tensor,
                           generators: list[torch.Generator | None]
                           ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Codebooks 1..15 for a batch of frames: (B, 15) codes and their embeddings."""
        predictor = self.predictor
        embeddings = predictor.get_input_embeddings()
        batch = last_hidden.shape[0]
        inputs = torch.cat((last_hidden, c0_embed), dim=1)
        cache = DynamicCache(config=predictor.config)
        codes: list[torch.Tensor] = []
        residual_embeds: list[torch.Tensor] = []
        history = torch.zeros((batch, 0), dtype=torch.long, device=self.m.device)
        groups = self.m.num_code_groups - 1
        past = 0
        for step in range(groups):
            position_ids = (torch.arange(inputs.shape[1], device=self.m.device) + past
                            ).unsqueeze(0).expand(batch, -1)
            out = predictor.model(input_ids=None, inputs_embeds=inputs, position_ids=position_ids,
                                  cache=cache, use_cache=True)
            past += inputs.shape[1]
            cache = out.cache
            logits = predictor.lm_head[step](out.last_hidden_state[:, -1, :])
            if self.sampling.do_sample:
                code = torch.cat([self._pick(self.predictor_processors, history[i:i + 1],
                                             logits[i:i + 1], generators[i])
                                  for i in range(batch)])
            else:
                code = self._pick(self.predictor_processors, history, logits, None)
            history = torch.cat([history, code[:, None]], dim=1)
            codes.append(code)
            inputs = embeddings[step](code[:, None])
            residual_embeds.append(inputs)
        return torch.stack(codes, dim=1), residual_embeds
