"""FlashInfer's sampling functions (flashinfer.sampling) with its names, argument
order, defaults, dtypes and return shapes, computed by nexttok.

Follows flashinfer/sampling.py of FlashInfer's main branch at commit 01c897d (the
0.7 development line). An engine that calls `flashinfer.sampling.X` can call
`nexttok.compat.flashinfer.X` instead; this module runs wherever nexttok does (CPU
and CUDA tensors).

What is the same as FlashInfer's:
- the keep-sets: top-k keeps the k largest scores; top-p keeps the shortest prefix
  of the tokens by descending probability whose mass reaches top_p (the crossing
  token kept); min-p keeps p >= min_p * max p; filter_apply_order "top_k_first"
  applies top-p to the distribution renormalized on the top-k set, "joint" keeps
  the tokens in both the top-k and the top-p set of the full distribution;
- the distribution of the token: the softmax of the logits (or the probabilities,
  renormalized) restricted to the keep-set;
- outputs: int32 tokens of shape (batch_size,), or the dtype of `indices` when it
  is given (output i drawn from row indices[i]); `return_valid` adds a bool tensor,
  False for a row with no valid distribution; renorm and mask results of the
  input's shape.

What differs, and how:
- The draw is nexttok's Gumbel-max over the keep-set with Philox noise keyed by
  (seed, offset) (docs/SEMANTICS.md, "Sampling"), not FlashInfer's rejection
  sampling: the same distribution, other tokens for the same seed. The draw is
  always deterministic (`deterministic` is accepted and has no effect).
- seed and offset are any u64 (both ints, or both int64/uint64 tensors of length
  1 or batch_size). A tensor of length batch_size gives every row its own seed and
  offset, and a row's token then depends only on its own seed, offset and scores.
  A length-1 tensor means the same as an int (read on the host when batch_size > 1).
  When seed or offset is None both come from `generator` (torch's default CPU
  generator when None): a fresh seed drawn from it, offset 0.
- A row whose keep-set is empty (all probabilities 0, all logits -inf or NaN)
  gets token -1 and valid False.
- Ties at the top-k boundary go to the lower token index (exactly k are kept);
  probabilities are taken relative to the row's sum (FlashInfer's rows sum to 1,
  where the two agree).

Computed by nexttok's `sample` kernel: every *sampling* function. Inputs given as
probabilities are sampled as log(probs) at temperature 1, whose softmax is
probs / sum(probs): top-k, top-p and min-p on log-probabilities select the same
tokens as on the probabilities, since exp(log p_i - log p_max) = p_i / p_max.
Computed by torch: `softmax`, `top_k_mask_logits`, `top_k_renorm_probs`,
`top_p_renorm_probs` (a stable sort gives the order: value descending, then index
ascending, NaN last), the log of probabilities, the gather of rows for `indices`
and the int32 cast of the tokens.

chain_speculative_sampling is nexttok's `verify_draft` (docs/SEMANTICS.md,
"Speculative verification") on FlashInfer's padded layout; its docstring says what
differs.
"""
import torch

import nexttok

_U63 = (1 << 63) - 1
_U64 = (1 << 64) - 1


def _check_2d(op, arg, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: argument '{arg}' must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 2:
        raise ValueError(f"{op}: argument '{arg}' must be 2-D (batch_size, num_classes), "
                         f"got shape {tuple(t.shape)}")


def _check_nan(op, arg, t, check_nan):
    if check_nan and bool(torch.isnan(t).any()):
        raise ValueError(f"{op}: argument '{arg}' contains NaN")


def _per_row(op, arg, value, dtype, device):
    """A scalar as it is, a tensor as a 1-D tensor of `dtype` on `device`."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 1:
            raise ValueError(f"{op}: argument '{arg}' must be a scalar or a 1-D tensor, "
                             f"got shape {tuple(value.shape)}")
        return value.to(device=device, dtype=dtype)
    return value


def _seed_offset(op, seed, offset, generator, device, batch):
    """(seed, offset) in the form nexttok.sample takes (module docstring)."""
    if seed is None or offset is None:
        if generator is None:
            drawn = torch.randint(0, _U63, (1,), dtype=torch.int64)
        else:
            drawn = torch.randint(0, _U63, (1,), dtype=torch.int64, generator=generator,
                                  device=generator.device)
        return int(drawn[0]), 0
    if isinstance(seed, torch.Tensor) != isinstance(offset, torch.Tensor):
        raise ValueError(f"{op}: arguments 'seed' and 'offset' must both be tensors or both "
                         f"be ints, got {type(seed).__name__} and {type(offset).__name__}")
    if not isinstance(seed, torch.Tensor):
        return seed, offset
    out = []
    for arg, t in (("seed", seed), ("offset", offset)):
        if t.dtype not in (torch.int64, torch.uint64) or t.dim() != 1:
            raise ValueError(f"{op}: argument '{arg}' must be a 1-D int64 or uint64 tensor, "
                             f"got {t.dtype} of shape {tuple(t.shape)}")
        if t.shape[0] not in (1, batch):
            raise ValueError(f"{op}: argument '{arg}' must have length 1 or batch_size = "
                             f"{batch}, got {t.shape[0]}")
        if t.device != device:
            raise ValueError(f"{op}: argument '{arg}' must be on {device}, got {t.device}")
        # length 1 for several rows: the value itself, as an int would give it
        out.append(int(t[0]) & _U64 if t.shape[0] == 1 and batch > 1 else t)
    return out[0], out[1]


def _draw(op, scores, *, indices=None, top_k=0, top_p=1.0, min_p=0.0, joint=False,
          generator=None, seed=None, offset=None, return_valid=False):
    """Tokens of `scores` (logits, or log-probabilities) at temperature 1 with the
    given filters, FlashInfer's output dtype, and `valid` when asked for."""
    if indices is not None:
        if not isinstance(indices, torch.Tensor) or indices.dim() != 1 or \
                indices.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"{op}: argument 'indices' must be a 1-D int32 or int64 tensor")
        scores = scores.index_select(0, indices.to(device=scores.device, dtype=torch.int64))
        out_dtype = indices.dtype
    else:
        out_dtype = torch.int32
    batch, device = scores.shape[0], scores.device
    seed, offset = _seed_offset(op, seed, offset, generator, device, batch)
    tokens = nexttok.sample(scores, temperature=1.0,
                            top_k=_per_row(op, "top_k", top_k, torch.int32, device),
                            top_p=_per_row(op, "top_p", top_p, torch.float32, device),
                            min_p=_per_row(op, "min_p", min_p, torch.float32, device),
                            seed=seed, offset=offset, joint=joint)
    samples = tokens.to(out_dtype)
    if return_valid:
        return samples, tokens >= 0
    return samples


def _log_probs(op, probs, check_nan):
    _check_2d(op, "probs", probs)
    _check_nan(op, "probs", probs, check_nan)
    return torch.log(probs.float())


def _check_order(op, filter_apply_order):
    if filter_apply_order not in ("top_k_first", "joint"):
        raise ValueError(f"{op}: argument 'filter_apply_order' must be 'top_k_first' or "
                         f"'joint', got {filter_apply_order!r}")
    return filter_apply_order == "joint"


def softmax(logits, temperature=None, enable_pdl=None):
    """float32 softmax(logits / temperature) over the last dimension (torch);
    temperature None, a scalar or a (batch_size,) tensor. enable_pdl has no effect."""
    op = "softmax"
    _check_2d(op, "logits", logits)
    x = logits.float()
    if isinstance(temperature, torch.Tensor):
        if temperature.dim() != 1 or temperature.shape[0] != logits.shape[0]:
            raise ValueError(f"{op}: argument 'temperature' must be a scalar or a tensor of "
                             f"shape ({logits.shape[0]},), got shape {tuple(temperature.shape)}")
        x = x / temperature.to(device=x.device, dtype=torch.float32)[:, None]
    elif temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise TypeError(f"{op}: argument 'temperature' must be None, a real scalar or a "
                            f"1-D tensor, got {type(temperature).__name__}")
        x = x / float(temperature)
    return torch.softmax(x, dim=-1)


def sampling_from_logits(logits, indices=None, deterministic=True, generator=None,
                         check_nan=False, seed=None, offset=None):
    """One token per row (or per entry of `indices`) from softmax(logits)."""
    op = "sampling_from_logits"
    _check_2d(op, "logits", logits)
    _check_nan(op, "logits", logits, check_nan)
    return _draw(op, logits, indices=indices, generator=generator, seed=seed, offset=offset)


def sampling_from_probs(probs, indices=None, deterministic=True, generator=None,
                        check_nan=False, seed=None, offset=None, return_valid=False):
    """One token per row (or per entry of `indices`) from the probabilities."""
    op = "sampling_from_probs"
    return _draw(op, _log_probs(op, probs, check_nan), indices=indices, generator=generator,
                 seed=seed, offset=offset, return_valid=return_valid)


def top_p_sampling_from_probs(probs, top_p, indices=None, deterministic=True, generator=None,
                              check_nan=False, seed=None, offset=None, return_valid=False):
    """Nucleus sampling from probabilities; top_p a float or a (batch_size,) tensor."""
    op = "top_p_sampling_from_probs"
    return _draw(op, _log_probs(op, probs, check_nan), indices=indices, top_p=top_p,
                 generator=generator, seed=seed, offset=offset, return_valid=return_valid)


def top_k_sampling_from_probs(probs, top_k, indices=None, deterministic=True, generator=None,
                              check_nan=False, seed=None, offset=None, return_valid=False):
    """Top-k sampling from probabilities; top_k an int or a (batch_size,) tensor."""
    op = "top_k_sampling_from_probs"
    return _draw(op, _log_probs(op, probs, check_nan), indices=indices, top_k=top_k,
                 generator=generator, seed=seed, offset=offset, return_valid=return_valid)


def min_p_sampling_from_probs(probs, min_p, indices=None, deterministic=True, generator=None,
                              check_nan=False, seed=None, offset=None, return_valid=False):
    """Min-p sampling from probabilities; min_p a float or a (batch_size,) tensor."""
    op = "min_p_sampling_from_probs"
    return _draw(op, _log_probs(op, probs, check_nan), indices=indices, min_p=min_p,
                 generator=generator, seed=seed, offset=offset, return_valid=return_valid)


def top_k_top_p_sampling_from_logits(logits, top_k, top_p, indices=None,
                                     filter_apply_order="top_k_first", deterministic=True,
                                     generator=None, check_nan=False, seed=None, offset=None):
    """Top-k and top-p sampling from logits, in FlashInfer's two filter orders."""
    op = "top_k_top_p_sampling_from_logits"
    joint = _check_order(op, filter_apply_order)
    _check_2d(op, "logits", logits)
    _check_nan(op, "logits", logits, check_nan)
    return _draw(op, logits, indices=indices, top_k=top_k, top_p=top_p, joint=joint,
                 generator=generator, seed=seed, offset=offset)


def top_k_top_p_sampling_from_probs(probs, top_k, top_p, indices=None,
                                    filter_apply_order="top_k_first", deterministic=True,
                                    generator=None, check_nan=False, seed=None, offset=None,
                                    return_valid=False):
    """Top-k and top-p sampling from probabilities, in FlashInfer's two filter orders."""
    op = "top_k_top_p_sampling_from_probs"
    joint = _check_order(op, filter_apply_order)
    return _draw(op, _log_probs(op, probs, check_nan), indices=indices, top_k=top_k,
                 top_p=top_p, joint=joint, generator=generator, seed=seed, offset=offset,
                 return_valid=return_valid)


def _ranks(x):
    """rank[r, t]: the position of token t in row r ordered by value descending, then
    index ascending (NaN as -inf)."""
    key = torch.nan_to_num(x.float(), nan=float("-inf"))
    order = torch.sort(key, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(x.shape[1], device=x.device).expand_as(order))
    return ranks, order


def _top_k_keep(op, x, top_k):
    """bool [B, V]: the first top_k tokens of each row; top_k <= 0 or >= V keeps all."""
    vocab = x.shape[1]
    k = _per_row(op, "top_k", top_k, torch.int64, x.device)
    if not isinstance(k, torch.Tensor):
        try:
            k = int(k.__index__())
        except AttributeError:
            raise TypeError(f"{op}: argument 'top_k' must be an int or a 1-D tensor, "
                            f"got {type(top_k).__name__}") from None
        k = torch.full((x.shape[0],), k, dtype=torch.int64, device=x.device)
    elif k.shape[0] != x.shape[0]:
        raise ValueError(f"{op}: argument 'top_k' must have batch_size = {x.shape[0]} "
                         f"entries, got {k.shape[0]}")
    k = torch.where((k <= 0) | (k >= vocab), torch.full_like(k, vocab), k)
    ranks, _ = _ranks(x)
    return ranks < k[:, None]


def top_k_mask_logits(logits, top_k):
    """logits with every token outside the row's top-k set to -inf, same dtype (torch)."""
    op = "top_k_mask_logits"
    _check_2d(op, "logits", logits)
    return logits.masked_fill(~_top_k_keep(op, logits, top_k), float("-inf"))


def top_k_renorm_probs(probs, top_k, is_deterministic=False):
    """probs kept on the row's top-k, 0 elsewhere, divided by their sum; same dtype
    (torch, summed in float32)."""
    op = "top_k_renorm_probs"
    _check_2d(op, "probs", probs)
    kept = probs.float().masked_fill(~_top_k_keep(op, probs, top_k), 0.0)
    return (kept / kept.sum(dim=-1, keepdim=True)).to(probs.dtype)


def top_p_renorm_probs(probs, top_p, is_deterministic=False):
    """float32 probs kept on the row's top-p nucleus (the shortest prefix by descending
    probability whose mass reaches top_p times the row's sum), 0 elsewhere, divided
    by their sum (torch)."""
    op = "top_p_renorm_probs"
    _check_2d(op, "probs", probs)
    p = probs.float()
    threshold = _per_row(op, "top_p", top_p, torch.float32, p.device)
    if not isinstance(threshold, torch.Tensor):
        threshold = torch.full((p.shape[0],), float(threshold), device=p.device)
    elif threshold.shape[0] != p.shape[0]:
        raise ValueError(f"{op}: argument 'top_p' must have batch_size = {p.shape[0]} "
                         f"entries, got {threshold.shape[0]}")
    ranks, order = _ranks(p)
    sorted_p = torch.nan_to_num(p, nan=0.0).gather(1, order).double()
    before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass ahead of each token
    total = sorted_p.sum(dim=-1, keepdim=True)
    keep_sorted = before < threshold.double()[:, None] * total
    keep_sorted[:, 0] = True
    keep = keep_sorted.gather(1, ranks)
    kept = p.masked_fill(~keep, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


top_p_renorm_prob = top_p_renorm_probs
top_k_renorm_prob = top_k_renorm_probs


def _check_nd(op, arg, t, dims, layout):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: argument '{arg}' must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dims:
        raise ValueError(f"{op}: argument '{arg}' must be {dims}-D {layout}, "
                         f"got shape {tuple(t.shape)}")


def _counter(op, arg, t, batch, device):
    """The caller's counter tensor (updated in place), or a fresh int32 zero one."""
    if t is None:
        return torch.zeros(batch, dtype=torch.int32, device=device)
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: argument '{arg}' must be None or a torch.Tensor, "
                        f"got {type(t).__name__}")
    if tuple(t.shape) != (batch,) or t.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{op}: argument '{arg}' must be an int32 or int64 tensor of shape "
                         f"({batch},), got {t.dtype} of shape {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{op}: argument '{arg}' must be on {device}, got {t.device}")
    return t


def _at_drafts(x, drafts):
    """float64 [B, n]: x[b, i, drafts[b, i]], 0 where the id is outside [0, V)."""
    vocab = x.shape[2]
    inside = (drafts >= 0) & (drafts < vocab)
    got = x.gather(2, drafts.clamp(0, max(vocab - 1, 0))[:, :, None])[:, :, 0].double()
    return torch.where(inside, got, torch.zeros_like(got))


def _fresh_tests(p, q, seed, offset):
    """bool [B, n]: an acceptance test of its own at every position, true with
    probability min(1, p/q) (1 where q <= 0 < p, 0 where p <= 0), drawn by
    nexttok.sample from (seed, offset): row b*n + i holds the two outcomes at
    tokens 2i (pass) and 2i+1, so that rows sharing a per-request seed still
    read distinct Philox words."""
    batch, n = p.shape
    a = torch.where(q > 0, (p / q).clamp(max=1.0), torch.ones_like(p))
    a = torch.where(p > 0, a, torch.zeros_like(a)).nan_to_num(nan=0.0)
    rows = torch.arange(batch * n, device=p.device)
    col = 2 * torch.arange(n, device=p.device).repeat(batch)
    scores = torch.full((batch * n, 2 * n), float("-inf"), dtype=torch.float32, device=p.device)
    scores[rows, col] = torch.log(a).flatten().float()
    scores[rows, col + 1] = torch.log1p(-a).flatten().float()
    if isinstance(seed, torch.Tensor):  # per request: each of its n rows gets its seed
        seed = seed.view(torch.int64).repeat_interleave(n)
        offset = offset.view(torch.int64).repeat_interleave(n)
    tokens = nexttok.sample(scores, temperature=1.0, seed=seed, offset=offset)
    return (tokens == col).view(batch, n)


def chain_speculative_sampling(draft_probs, draft_token_ids, target_probs,
                               maybe_output_accepted_token_num=None,
                               maybe_output_emitted_draft_token_num=None, deterministic=True,
                               generator=None, seed=None, offset=None):
    """Speculative sampling of a chain of n drafts per request: draft_probs
    [B, n, V], draft_token_ids [B, n] (int32 or int64), target_probs [B, n+1, V].
    Returns (output_token_ids int32 [B, n+1]: the accepted drafts, then the token
    drawn at the first rejection (or the bonus token after n acceptances), then
    -1; output_accepted_token_num; output_emitted_draft_token_num).

    Computed by nexttok's verify_draft: request b's drafts are the CSR chain
    cu_num_draft = arange(B+1) * n, its target rows b*(n+1) .. b*(n+1)+n, and the
    target probabilities are given as logits log(target_probs) at temperature 1
    with no filters, so that the keep-set is exactly the tokens with p > 0 (a
    zero probability is never accepted nor drawn) and the target distribution is
    p / sum(p) (softmax(log p)); the fixed-point masses of docs/SEMANTICS.md hold
    each p to 2^-24 of the row's largest or finer, after the fp32 log and exp.

    Same as FlashInfer's: draft x at position i is accepted with probability
    min(1, p(x) / q(x)) (u < p/q), the chain stops at the first rejection and
    draws from max(p - q, 0) renormalized (from p after n acceptances), so every
    emitted token is distributed as FlashInfer's; the counters are FlashInfer's:
    output_emitted_draft_token_num is the number of accepted drafts (the tokens
    before the drawn one), output_accepted_token_num that number plus, for each
    later position, an acceptance test of its own (the count of drafts that would
    pass if each were tested independently). Both are added to the given tensors
    in place (int32 or int64, shape (B,)) and returned; None gives int32 zeros
    plus the counts.

    What differs:
    - nexttok's draws: the acceptance uniform of each position and the residual's
      Gumbel-max noise come from verify_draft's Philox stream of (seed, offset)
      (the verification streams), and the independent tests of the accepted
      counter from sample's stream of (seed, offset); the same distributions as
      FlashInfer's curand draws, other tokens for the same seed. seed, offset and
      generator are read as by the sampling functions (module docstring);
      deterministic has no effect (always deterministic).
    - Probabilities are relative to each row's sum (FlashInfer's rows sum to 1,
      where the two agree); q NaN or negative counts as 0; a draft id outside
      [0, V) is rejected (FlashInfer reads out of bounds).
    - Degenerate rows: when max(p - q, 0) is 0 everywhere the token is drawn from
      p (FlashInfer's kernel falls back to an index of its own); a target row with
      no p > 0 emits nothing and ends the request there (-1 from that position on).
    - An int64 counter tensor is updated in place too (FlashInfer's int32 cast
      updates a copy of it).
    - Limits of verify_draft: B < 2^19 and n < 4096.
    """
    op = "chain_speculative_sampling"
    _check_nd(op, "draft_probs", draft_probs, 3,
              "(batch_size, num_speculate_tokens, vocab_size)")
    _check_nd(op, "draft_token_ids", draft_token_ids, 2, "(batch_size, num_speculate_tokens)")
    _check_nd(op, "target_probs", target_probs, 3,
              "(batch_size, num_speculate_tokens + 1, vocab_size)")
    batch, n, vocab = draft_probs.shape
    if tuple(draft_token_ids.shape) != (batch, n):
        raise ValueError(f"{op}: argument 'draft_token_ids' must have shape (batch_size, "
                         f"num_speculate_tokens) = {(batch, n)} (from draft_probs), "
                         f"got {tuple(draft_token_ids.shape)}")
    if tuple(target_probs.shape) != (batch, n + 1, vocab):
        raise ValueError(f"{op}: argument 'target_probs' must have shape (batch_size, "
                         f"num_speculate_tokens + 1, vocab_size) = {(batch, n + 1, vocab)} "
                         f"(from draft_probs), got {tuple(target_probs.shape)}")
    if draft_token_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{op}: argument 'draft_token_ids' must be int32 or int64, "
                         f"got {draft_token_ids.dtype}")
    device = draft_probs.device
    for arg, t in (("draft_probs", draft_probs), ("target_probs", target_probs)):
        if not t.is_floating_point():
            raise ValueError(f"{op}: argument '{arg}' must be a floating-point tensor, "
                             f"got {t.dtype}")
    for arg, t in (("draft_token_ids", draft_token_ids), ("target_probs", target_probs)):
        if t.device != device:
            raise ValueError(f"{op}: argument '{arg}' must be on {device} (draft_probs' "
                             f"device), got {t.device}")
    accepted = _counter(op, "maybe_output_accepted_token_num", maybe_output_accepted_token_num,
                        batch, device)
    emitted = _counter(op, "maybe_output_emitted_draft_token_num",
                       maybe_output_emitted_draft_token_num, batch, device)
    seed, offset = _seed_offset(op, seed, offset, generator, device, batch)
    if batch == 0:
        return torch.empty((0, n + 1), dtype=torch.int32, device=device), accepted, emitted

    target = target_probs.float()
    out_ids, num = nexttok.verify_draft(
        torch.log(target).reshape(batch * (n + 1), vocab),
        draft_token_ids.to(torch.int32).reshape(batch * n).contiguous(),
        torch.arange(batch + 1, dtype=torch.int32, device=device) * n,
        draft_probs.float().reshape(batch * n, vocab).contiguous(), n,
        temperature=1.0, seed=seed, offset=offset)
    if n == 0:
        return out_ids, accepted, emitted

    # Accepted drafts k: the request emitted num tokens, the last one drawn at
    # position num - 1, except where it stopped at an empty target row (position
    # num, every token before it an accepted draft; a drawn token never equals the
    # draft rejected at its position, whose residual max(p - q, 0) is 0).
    drafts = draft_token_ids.long()
    num = num.long()
    last = (num - 1).clamp(0, n - 1)[:, None]
    was_draft = (out_ids.long().gather(1, last) == drafts.gather(1, last))[:, 0]
    empty_next = ~(target > 0).any(-1).gather(1, num.clamp(max=n)[:, None])[:, 0]
    k = (num - 1).clamp(min=0) + ((num >= 1) & (num <= n) & was_draft & empty_next).long()

    kept = target[:, :n].double()
    kept = torch.where(kept > 0, kept, torch.zeros_like(kept))  # the keep-set's probabilities
    p = _at_drafts(kept, drafts) / kept.sum(-1)
    q = _at_drafts(draft_probs, drafts).nan_to_num(nan=0.0).clamp(min=0.0)
    later = torch.arange(n, device=device)[None, :] >= k[:, None]
    tests = _fresh_tests(p, q, seed, offset)
    emitted.add_(k.to(emitted.dtype))
    accepted.add_((k + (tests & later).sum(1)).to(accepted.dtype))
    return out_ids, accepted, emitted

__all__ = [
    "softmax", "sampling_from_logits", "sampling_from_probs", "top_p_sampling_from_probs",
    "top_k_sampling_from_probs", "min_p_sampling_from_probs", "top_k_top_p_sampling_from_logits",
    "top_k_top_p_sampling_from_probs", "top_k_mask_logits", "top_k_renorm_probs",
    "top_p_renorm_probs", "top_p_renorm_prob", "top_k_renorm_prob",
    "chain_speculative_sampling",
]
