"""Vocabulary-parallel hidden -> token with torch.distributed.

The LM head's rows are split over the ranks of `group` in contiguous shards
(as vLLM's VocabParallelEmbedding shards its padded vocabulary): this rank
holds global ids [vocab_start, vocab_start + weight.shape[0]), and ids at or
past vocab_size are padding, never tokens. Every rank calls with its own shard
and the same rows, bitmask (of the whole vocabulary) and parameters; each
summarizes its shard, one all_gather of O(M * K) words a rank (gloo on CPUs,
NCCL on GPUs) brings every summary to every rank, and every rank resolves the
same tokens: the single-rank call's (nexttok.lm_head_sample_dense) on the
whole head. Rows whose keep-set can pass the K gathered candidates a shard
(top-p alone on a flat row, top_k > K) take one more gather, all of them
together, with every token of each shard a candidate.

With logprobs=n the calls return (tokens, logprob_ids, logprobs, ranks) as
nexttok.lm_head_sample_dense(..., logprobs=n) does: the summaries grow by O(n)
words a row, and one all_reduce of M int32 counts completes the ranks."""
import torch
import torch.distributed as dist

from . import _nexttok as _ext
from . import _sharded
from ._arrays import logprobs_request
from .torch import _alloc, _stream


def _host(v):
    return v.cpu() if isinstance(v, torch.Tensor) else v


def _run(x, device_tensor, vocab_size, candidates, params, joint, group, launch, request):
    rows = x.shape[0]
    k = _sharded.candidates(candidates, params["top_k"], vocab_size)
    shards = dist.get_world_size(group)
    lp_words = 0 if request is None else _sharded.logprobs_words(request[0])

    def summarize(which, k):
        n = rows if which is None else len(which)
        summary = torch.empty((n, _sharded.SUMMARY_WORDS + k + lp_words), dtype=torch.int64,
                              device=device_tensor.device)
        scores = None if request is None else torch.empty(
            (n, device_tensor.shape[0]), dtype=torch.float32, device=device_tensor.device)
        if which is None:
            launch(slice(None), 0, summary, params, scores)
        else:
            for i, m in enumerate(which):
                launch(slice(m, m + 1), m, summary[i:i + 1], _sharded.row_params(params, m),
                       None if scores is None else scores[i:i + 1])
        return summary if request is None else (summary, scores)

    def gather(summary):
        parts = [torch.empty_like(summary) for _ in range(shards)]
        dist.all_gather(parts, summary, group=group)
        return torch.cat(parts).cpu(), shards

    def count_ranks(scores, keys):
        counts = torch.empty(rows, dtype=torch.int32, device=scores.device)
        _ext.lm_head_shard_ranks(scores, torch.from_numpy(keys).to(scores.device), counts,
                                 _stream(scores))
        dist.all_reduce(counts, group=group)
        return counts.cpu().numpy()

    host_params = {n: _host(v) for n, v in params.items()}
    out = _sharded.resolve(rows, vocab_size, k, params, host_params, joint, summarize, gather,
                           lambda n: torch.empty(n, dtype=torch.int64), request, count_ranks)
    if request is None:
        return out.to(x.device)
    tokens, ids, values, ranks = out
    return (tokens.to(x.device), torch.from_numpy(ids).to(x.device),
            torch.from_numpy(values).to(x.device), torch.from_numpy(ranks).to(x.device))


def _check_shard(op, vocab_start, vocab_size):
    if vocab_start is None or vocab_size is None:
        raise TypeError(f"{op}: arguments 'vocab_start' and 'vocab_size' are required")


def _lp_args(request, scores):
    """The extension's trailing arguments of a shard call: its logprobs request
    (num_logprobs, processed, no single-call outputs, the scores it writes)."""
    if request is None:
        return ()
    return (request[0], request[1], None, None, None, scores)


def lm_head_sample(hidden, weight, bias=None, bitmask=None, temperature=1.0, top_k=0, top_p=1.0,
                   min_p=0.0, seed=0, offset=0, joint=False, *, vocab_start=None,
                   vocab_size=None, group=None, candidates=1024, logprobs=None,
                   logprobs_mode="raw"):
    """nexttok.lm_head_sample_dense over a vocabulary split across the ranks of
    `group`: `weight` [V_r, H] and `bias` [V_r] are this rank's shard, starting at
    global id `vocab_start`; `vocab_size` is V of the whole (unpadded) vocabulary;
    `bitmask` [M, ceil(V/32)] covers the whole vocabulary. Returns int64 [M], the
    same on every rank; with logprobs=n (0..20) and logprobs_mode "raw" |
    "processed", (tokens, logprob_ids int32 [M, n+1], logprobs float32 [M, n+1],
    ranks int32 [M]) as the single call returns them."""
    op = "distributed.lm_head_sample"
    request = None if logprobs is None else logprobs_request(op, logprobs, logprobs_mode)
    _check_shard(op, vocab_start, vocab_size)
    params = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed,
                  offset=offset)

    def launch(rows, first_row, summary, p, scores):
        _ext.lm_head_sample_dense(hidden[rows], weight, bias,
                                  None if bitmask is None else bitmask[rows], None, summary,
                                  int(vocab_start), int(vocab_size), first_row,
                                  *(p[n] for n in _sharded.PARAMS), bool(joint),
                                  _stream(weight), _alloc(weight), *_lp_args(request, scores))

    return _run(hidden, weight, vocab_size, candidates, params, joint, group, launch, request)


def lm_head_sample_binary(act_q, act_scale, wq, wscale, bias=None, group_size=128, bitmask=None,
                          temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0,
                          joint=False, *, vocab_start=None, vocab_size=None, group=None,
                          candidates=1024, logprobs=None, logprobs_mode="raw"):
    """lm_head_sample for the 1-bit head: wq [V_r, H/32] and wscale [V_r, H/G] are this
    rank's shard."""
    op = "distributed.lm_head_sample_binary"
    request = None if logprobs is None else logprobs_request(op, logprobs, logprobs_mode)
    _check_shard(op, vocab_start, vocab_size)
    params = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed,
                  offset=offset)

    def launch(rows, first_row, summary, p, scores):
        _ext.lm_head_sample_binary(act_q[rows], act_scale[rows], wq, wscale, bias, group_size,
                                   None if bitmask is None else bitmask[rows], None, summary,
                                   int(vocab_start), int(vocab_size), first_row,
                                   *(p[n] for n in _sharded.PARAMS), bool(joint), _stream(wq),
                                   _alloc(wq), *_lp_args(request, scores))

    return _run(act_q, wq, vocab_size, candidates, params, joint, group, launch, request)
