"""A sampler backend for SGLang that draws with nexttok.

Follows SGLang's python/sglang/srt/layers/sampler.py as of its 0.5 line (the
Sampler module with forward(logits_output, sampling_info, return_logprob,
top_logprobs_nums, token_ids_logprobs, positions), register_sampler_backend and
create_sampler) and SamplingBatchInfo's fields (temperatures [B, 1], top_ks,
top_ps, min_ps, vocab_mask, sampling_seed, is_all_greedy).

Use: call `register()` in the server process before the model runner starts (for
instance from a launcher script, see the README), then launch with
`--sampling-backend nexttok`.

What the sampler does with a batch (`sample_batch`, which needs no SGLang):
- the grammar mask `vocab_mask`, when present, is applied again through nexttok:
  an int32 bitmask (XGrammar's, 1 = allowed) with nexttok.apply_token_bitmask, a
  bool mask (True = disallowed) with torch; the model runner has normally applied
  it already and applying it twice changes nothing;
- nexttok.sample with the per-row temperatures, top_ks, top_ps and min_ps (top-k,
  then top-p on the top-k distribution, then min-p: SGLang's own chain);
  temperature 0 or top_k 1 is greedy (the first index of the largest logit);
- requests with a `sampling_seed` draw with (their seed, their position): a token
  then depends on the request's seed and position only, not on the batch; without
  seeds every call draws a fresh seed from torch's default CPU generator;
- a row with no allowed token gets the argmax of its logits (SGLang's own
  fallback), never -1;
- logprobs, when asked for, are log_softmax(logits / temperature) (torch),
  what SGLang's default path returns, attached with SGLang's own helper.
"""
import torch

import nexttok

BACKEND = "nexttok"
_U63 = (1 << 63) - 1


def _mask(logits, vocab_mask):
    if vocab_mask is None:
        return logits
    if vocab_mask.dtype == torch.int32:
        nexttok.apply_token_bitmask(logits, vocab_mask.to(logits.device))
    elif vocab_mask.dtype == torch.bool:
        logits.masked_fill_(vocab_mask.to(logits.device), float("-inf"))
    else:
        raise ValueError("sglang sampler: sampling_info.vocab_mask must be an int32 bitmask "
                         f"or a bool mask, got {vocab_mask.dtype}")
    return logits


def sample_batch(logits, sampling_info, positions=None):
    """int32 [B] token ids for logits [B, V] under SGLang's SamplingBatchInfo (module
    docstring). `logits` is masked in place when vocab_mask is set."""
    if logits.dim() != 2:
        raise ValueError(f"sglang sampler: logits must be 2-D, got shape {tuple(logits.shape)}")
    rows, device = logits.shape[0], logits.device
    logits = _mask(logits, getattr(sampling_info, "vocab_mask", None))
    if getattr(sampling_info, "is_all_greedy", False):
        tokens = nexttok.sample(logits, temperature=0.0)
    else:
        seeds = getattr(sampling_info, "sampling_seed", None)
        if seeds is not None:
            seed = seeds.to(device=device, dtype=torch.int64).reshape(rows)
            if positions is None:
                raise ValueError("sglang sampler: argument 'positions' is required with "
                                 "sampling_info.sampling_seed")
            offset = positions.to(device=device, dtype=torch.int64).reshape(rows)
        else:
            seed, offset = int(torch.randint(0, _U63, (1,))), 0
        tokens = nexttok.sample(
            logits,
            temperature=sampling_info.temperatures.to(device, torch.float32).reshape(rows),
            top_k=sampling_info.top_ks.to(device, torch.int32).reshape(rows),
            top_p=sampling_info.top_ps.to(device, torch.float32).reshape(rows),
            min_p=sampling_info.min_ps.to(device, torch.float32).reshape(rows),
            seed=seed, offset=offset)
        empty = tokens < 0
        tokens = torch.where(empty, torch.argmax(logits, dim=-1), tokens)
    return tokens.to(torch.int32)


def logprobs_of(logits, sampling_info):
    """log_softmax(logits / temperature) in float32 (torch)."""
    t = sampling_info.temperatures.to(logits.device, torch.float32).reshape(-1, 1)
    if getattr(sampling_info, "is_all_greedy", False):
        t = torch.ones_like(t)
    return torch.log_softmax(logits.float() / t, dim=-1)


def forward(self, logits_output, sampling_info, return_logprob, top_logprobs_nums,
            token_ids_logprobs, positions):
    """NexttokSampler.forward, with SGLang's Sampler.forward arguments: the token ids
    of sample_batch on the logits after SGLang's own preprocessing (custom logit
    processors, NaN detection), logprobs attached by SGLang's helper when asked for,
    and the ids synchronised across tensor-parallel ranks as SGLang does."""
    logits = logits_output.next_token_logits
    if hasattr(self, "_preprocess_logits"):
        logits = self._preprocess_logits(logits, sampling_info)
    tokens = sample_batch(logits, sampling_info, positions)
    if return_logprob:
        self._attach_logprobs_to_output(logits_output, logprobs_of(logits, sampling_info),
                                        top_logprobs_nums, token_ids_logprobs, sampling_info,
                                        tokens)
    if hasattr(self, "_sync_token_ids_across_tp"):
        self._sync_token_ids_across_tp(tokens, sampling_info)
    return tokens


def make_sampler_class():
    """The SGLang Sampler subclass (SGLang's create_sampler accepts only those)."""
    from sglang.srt.layers.sampler import Sampler

    return type("NexttokSampler", (Sampler,), {
        "forward": forward,
        "__doc__": "SGLang's Sampler with the token drawn by nexttok (nexttok.integrations.sglang).",
    })


def register(backend=BACKEND):
    """Registers the sampler with SGLang under `backend` (--sampling-backend NAME)."""
    from sglang.srt.layers.sampler import register_sampler_backend

    sampler_class = make_sampler_class()
    register_sampler_backend(backend, sampler_class)
    return sampler_class


__all__ = ["BACKEND", "register", "sample_batch", "logprobs_of", "forward", "make_sampler_class"]
