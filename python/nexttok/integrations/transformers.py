"""nexttok in a Hugging Face transformers decode loop.

Follows transformers 5.25 (GenerationConfig, LogitsProcessor, the cache-based
forward of its causal LMs) and xgrammar 0.2.9's GrammarMatcher interface.

- `GrammarBitmaskProcessor`: a LogitsProcessor that masks each row's logits with its
  grammar matcher's bitmask through nexttok.apply_token_bitmask (tokens past the
  bitmask, such as a model's padded vocabulary, are masked too). Works in
  transformers' own `generate` and in `generate` below.
- `generate`: greedy or sampled decoding whose token choice is nexttok's: the
  logits of the last position go through the repetition penalty
  (nexttok.apply_penalties: every token of the prompt and the output so far), then
  `logits_processor` (transformers' order), then nexttok.sample with the GenerationConfig's temperature, top_k, top_p
  and min_p (do_sample False: greedy, as transformers does). Step i of a call
  draws with (seed, offset + i), so a generation is reproduced exactly from its
  seed and offset. Greedy decoding returns what transformers' greedy `generate`
  returns, token for token.
"""
import inspect

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

import nexttok


class GrammarBitmaskProcessor(LogitsProcessor):
    """Masks row r of the scores with matchers[r]'s next-token bitmask.

    matchers: one grammar matcher per batch row, with XGrammar's GrammarMatcher
    interface (accept_token, fill_next_token_bitmask(bitmask, index), is_terminated);
    vocab_size: the vocabulary size the matchers were built for (the bitmask has
    ceil(vocab_size / 32) words a row). The first call sees the prompt; each later
    call first feeds every unfinished matcher the row's last token."""

    def __init__(self, matchers, vocab_size):
        if not matchers:
            raise ValueError("GrammarBitmaskProcessor: argument 'matchers' must list one "
                             "matcher per batch row, got none")
        self.matchers = list(matchers)
        self.words = (int(vocab_size) + 31) // 32
        self.prompt_length = None

    def __call__(self, input_ids, scores):
        rows = scores.shape[0]
        if rows != len(self.matchers):
            raise ValueError(f"GrammarBitmaskProcessor: the scores have {rows} rows but "
                             f"{len(self.matchers)} matchers were given")
        if self.prompt_length is None:
            self.prompt_length = input_ids.shape[1]
        elif input_ids.shape[1] > self.prompt_length:
            for r, m in enumerate(self.matchers):
                if not m.is_terminated() and not m.accept_token(int(input_ids[r, -1])):
                    raise RuntimeError(f"GrammarBitmaskProcessor: row {r}'s matcher rejected "
                                       f"token {int(input_ids[r, -1])}")
        bitmask = torch.full((rows, self.words), -1, dtype=torch.int32)
        for r, m in enumerate(self.matchers):
            if not m.is_terminated():
                m.fill_next_token_bitmask(bitmask, r)
        self.bitmask = bitmask  # the last call's, for inspection
        nexttok.apply_token_bitmask(scores, bitmask.to(scores.device))
        return scores


def _eos_ids(config):
    eos = config.eos_token_id
    if eos is None:
        return []
    return [int(eos)] if isinstance(eos, int) else [int(e) for e in eos]


def _sampling_params(config):
    """nexttok.sample's keyword arguments for a GenerationConfig."""
    if not config.do_sample:
        return {"temperature": 0.0}
    return {"temperature": float(config.temperature if config.temperature is not None else 1.0),
            "top_k": int(config.top_k or 0),
            "top_p": float(config.top_p if config.top_p is not None else 1.0),
            "min_p": float(config.min_p or 0.0)}


@torch.no_grad()
def generate(model, input_ids, generation_config=None, logits_processor=None, *, seed=0,
             offset=0, attention_mask=None, **config_overrides):
    """Sequences [B, prompt + new] as transformers' generate returns them, the token
    of each step chosen by nexttok (module docstring).

    model: a transformers causal LM; input_ids: int64 [B, prompt] (left-padded when
    attention_mask has zeros); generation_config: a GenerationConfig (default: the
    model's), updated by `config_overrides` (max_new_tokens=..., do_sample=...);
    logits_processor: LogitsProcessors applied after the penalty, before the draw;
    seed, offset: the draw of step i uses (seed, offset + i). Rows that produced an
    end-of-sequence token are padded with pad_token_id (the eos id when unset) and
    generation stops when every row has or after max_new_tokens."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise ValueError("generate: argument 'input_ids' must be a 2-D tensor [batch, prompt]")
    config = GenerationConfig.from_dict(
        (generation_config or model.generation_config).to_dict())
    unknown = config.update(**config_overrides)
    if unknown:
        raise TypeError(f"generate: unknown GenerationConfig fields {sorted(unknown)}")
    if config.max_new_tokens is None:
        raise ValueError("generate: argument 'generation_config' must set max_new_tokens")
    params = _sampling_params(config)
    processors = LogitsProcessorList(logits_processor or [])
    eos = _eos_ids(config)
    pad = config.pad_token_id if config.pad_token_id is not None else (eos[0] if eos else 0)
    penalty = float(config.repetition_penalty or 1.0)

    device = input_ids.device
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    sequences = input_ids
    unfinished = torch.ones(input_ids.shape[0], dtype=torch.bool, device=device)
    # the key/value cache is `cache` from transformers 5.2x on, `past_key_values` before
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters \
        else "past_key_values"
    past = None
    step_ids = input_ids
    for step in range(config.max_new_tokens):
        positions = (attention_mask.long().cumsum(-1) - 1).clamp_min(0)
        out = model(input_ids=step_ids, attention_mask=attention_mask,
                    position_ids=positions[:, -step_ids.shape[1]:], use_cache=True,
                    **{cache_arg: past})
        past = getattr(out, cache_arg)
        scores = out.logits[:, -1, :].float()
        if penalty != 1.0:
            rows, length = sequences.shape
            offsets = torch.arange(0, rows * length + 1, length, dtype=torch.int32, device=device)
            ids = sequences.to(torch.int32).flatten()
            nexttok.apply_penalties(scores, prompt=(offsets, ids), repetition=penalty)
        scores = processors(sequences, scores)
        tokens = nexttok.sample(scores, seed=seed, offset=offset + step, **params)
        tokens = torch.where(unfinished, tokens, torch.full_like(tokens, pad))
        sequences = torch.cat([sequences, tokens[:, None]], dim=1)
        attention_mask = torch.cat([attention_mask, torch.ones_like(tokens)[:, None]], dim=1)
        for e in eos:
            unfinished &= tokens != e
        if not bool(unfinished.any()):
            break
        step_ids = tokens[:, None]
    return sequences


__all__ = ["GrammarBitmaskProcessor", "generate"]
