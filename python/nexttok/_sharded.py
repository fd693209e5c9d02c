"""Vocabulary-parallel sampling, independent of the framework and of the
collective: each rank summarizes its shard of the head (nt_lm_head_shard_*:
candidates, maxima, mass, Gumbel maximum, O(K) words a row), the summaries of
every rank are gathered, and the combine (the same host code on every rank)
resolves the tokens. A row whose keep-set may reach past the gathered
candidates comes back as TOKEN_NEEDS_ALL_CANDIDATES; it is summarized again
alone, with every token of each shard a candidate, and combined again (docs/
SEMANTICS.md, "Fused hidden -> token").

With a logprobs request each rank also writes its masked scores, the summaries
carry O(n) more words a row, the combine writes the logprobs, and each rank
counts its part of every row's rank against the combine's rank keys: one more
collective, a sum of M counts (docs/SEMANTICS.md, "Vocabulary-parallel")."""
import numpy as np

from . import _nexttok as _ext

SUMMARY_WORDS = _ext.LM_HEAD_SUMMARY_WORDS
NEEDS_ALL = _ext.TOKEN_NEEDS_ALL_CANDIDATES
PARAMS = ("temperature", "top_k", "top_p", "min_p", "seed", "offset")


def logprobs_words(n):
    """The summary words a logprobs request of n logprobs adds to each row
    (NT_LM_HEAD_LOGPROBS_WORDS(n))."""
    return _ext.LM_HEAD_LOGPROBS_WORDS + n


def candidates(k, top_k, vocab_size):
    """Candidates a row keeps: k, raised to a scalar top_k (below V) so that a top-k
    row never needs the fallback."""
    if isinstance(top_k, int) and 0 < top_k < vocab_size:
        k = max(k, top_k)
    return max(1, int(k))


def row_params(params, m):
    """The parameters of row m alone: per-row arrays sliced to [m, m+1)."""
    return {n: (v if isinstance(v, (int, float)) else v[m:m + 1]) for n, v in params.items()}


def resolve(rows, vocab_size, k, params, host_params, joint, summarize, gather, new_tokens,
            request=None, count_ranks=None):
    """The tokens of `rows` rows; with a logprobs request (tokens, logprob_ids int32
    [rows, n+1], logprobs float32 [rows, n+1], ranks int32 [rows]), the last three numpy.

    summarize(which, k): this rank's summaries, int64 [n, SUMMARY_WORDS + k (+
      LM_HEAD_LOGPROBS_WORDS + n_lp with a request)], with k candidates a row: of
      every row (which None, n = rows), or of the listed rows, each summarized
      alone (its own first_row and per-row parameters). With a request it returns
      (summaries, scores): the shard calls' masked scores, float32 [n, V_r].
    gather(summary) -> (the summaries of every rank stacked by rank, host int64
      [R * n, S], R): one collective, the same result on every rank.
    new_tokens(n): a host int64 array of n elements.
    host_params: the parameters (a scalar, or a length-rows array) in host memory.
    request: None, or (n_lp, processed) of a logprobs request.
    count_ranks(scores, rank_keys): this rank's lm_head_shard_ranks counts of the
      scores of every row (summarize(None, k)'s) against the host int64 rank keys,
      summed over the ranks (one collective): a host int32 [rows] array.
    """
    def combine(summaries, shards, first_row, p, tokens, outs):
        extra = () if outs is None else (request[0], bool(request[1]), *outs)
        _ext.lm_head_sample_combine(summaries, shards, vocab_size, first_row, tokens,
                                    *(p[n] for n in PARAMS), bool(joint), *extra)

    first = summarize(None, k)
    summary, scores = first if request is not None else (first, None)
    summaries, shards = gather(summary)
    tokens = new_tokens(rows)
    outs = None
    if request is not None:
        cols = request[0] + 1
        outs = (np.empty((rows, cols), np.int32), np.empty((rows, cols), np.float32),
                np.empty(rows, np.int32), np.empty(rows, np.int64))
    combine(summaries, shards, 0, host_params, tokens, outs)
    again = [m for m in range(rows) if int(tokens[m]) == NEEDS_ALL]
    if again:
        # One more gather for all of them, every token of a shard a candidate (at
        # most vocab_size of them); rank r's row i is row r * n + i.
        second = summarize(again, vocab_size)
        summaries, shards = gather(second[0] if request is not None else second)
        n = len(again)
        for i, m in enumerate(again):
            one = new_tokens(1)
            row_outs = None if outs is None else tuple(o[m:m + 1] for o in outs)
            combine(summaries[i::n], shards, m, row_params(host_params, m), one, row_outs)
            tokens[m] = one[0]
    if request is None:
        return tokens
    ids, values, ranks, keys = outs
    # The rank keys are the same on every rank: every rank takes this branch or none.
    # A fallback row's scores are those of the first call (a row's scores do not
    # depend on the rows beside it), so one count covers every row.
    if (keys != -1).any():
        ranks += np.asarray(count_ranks(scores, keys), dtype=np.int32)
    return tokens, ids, values, ranks
