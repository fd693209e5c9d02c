"""Vocabulary-parallel sampling, independent of the framework and of the
collective: each rank summarizes its shard of the head (nt_lm_head_shard_*:
candidates, maxima, mass, Gumbel maximum, O(K) words a row), the summaries of
every rank are gathered, and the combine (the same host code on every rank)
resolves the tokens. A row whose keep-set may reach past the gathered
candidates comes back as TOKEN_NEEDS_ALL_CANDIDATES; it is summarized again
alone, with every token of each shard a candidate, and combined again (docs/
SEMANTICS.md, "Fused hidden -> token")."""
from . import _nexttok as _ext

SUMMARY_WORDS = _ext.LM_HEAD_SUMMARY_WORDS
NEEDS_ALL = _ext.TOKEN_NEEDS_ALL_CANDIDATES
PARAMS = ("temperature", "top_k", "top_p", "min_p", "seed", "offset")


def candidates(k, top_k, vocab_size):
    """Candidates a row keeps: k, raised to a scalar top_k (below V) so that a top-k
    row never needs the fallback."""
    if isinstance(top_k, int) and 0 < top_k < vocab_size:
        k = max(k, top_k)
    return max(1, int(k))


def row_params(params, m):
    """The parameters of row m alone: per-row arrays sliced to [m, m+1)."""
    return {n: (v if isinstance(v, (int, float)) else v[m:m + 1]) for n, v in params.items()}


def resolve(rows, vocab_size, k, params, host_params, joint, summarize, gather, new_tokens):
    """The tokens of `rows` rows.

    summarize(which, k): this rank's summaries, int64 [n, SUMMARY_WORDS + k], with k
      candidates a row: of every row (which None, n = rows), or of the listed rows,
      each summarized alone (its own first_row and per-row parameters).
    gather(summary) -> (the summaries of every rank stacked by rank, host int64
      [R * n, S], R): one collective, the same result on every rank.
    new_tokens(n): a host int64 array of n elements.
    host_params: the parameters (a scalar, or a length-rows array) in host memory.
    """
    summaries, shards = gather(summarize(None, k))
    tokens = new_tokens(rows)
    _ext.lm_head_sample_combine(summaries, shards, vocab_size, 0, tokens,
                                *(host_params[n] for n in PARAMS), bool(joint))
    again = [m for m in range(rows) if int(tokens[m]) == NEEDS_ALL]
    if not again:
        return tokens
    # One more gather for all of them, every token of a shard a candidate (at
    # most vocab_size of them); rank r's row i is row r * n + i.
    summaries, shards = gather(summarize(again, vocab_size))
    n = len(again)
    for i, m in enumerate(again):
        one = new_tokens(1)
        host_row = row_params(host_params, m)
        _ext.lm_head_sample_combine(summaries[i::n], shards, vocab_size, m, one,
                                    *(host_row[p] for p in PARAMS), bool(joint))
        tokens[m] = one[0]
    return tokens
