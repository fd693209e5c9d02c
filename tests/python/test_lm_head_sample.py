"""lm_head_sample_dense / _binary (hidden -> token) and the vocabulary-parallel
path. The head's own scores are written out by lm_head_topk_* with k = V (its
values are the head's scores, bit for bit); the fused token must equal sample()
after apply_token_bitmask on them. The sharded path runs every shard in this
process through nexttok._sharded (numpy, no collective), and with torch
installed through nexttok.distributed on 2 and 4 gloo processes (and, on a
machine with two GPUs or more, NCCL processes with one GPU each)."""
import os

import numpy as np
import pytest

import nexttok
from conftest import require_device, torch_devices
from nexttok import _sharded
from nexttok import _nexttok as ext

REQUIRE = {d.strip() for d in os.environ.get("NEXTTOK_TEST_REQUIRE", "").split(",") if d.strip()}


def head_scores(values, indices, v):
    scores = np.empty((values.shape[0], v), dtype=np.float32)
    np.put_along_axis(scores, indices, values, axis=1)
    return scores


def dense_case(rng, m, v, h, bias):
    hidden = rng.standard_normal((m, h)).astype(np.float32)
    weight = (rng.standard_normal((v, h)) * 1.5 / np.sqrt(h)).astype(np.float32)
    b = (rng.standard_normal(v) * 0.5).astype(np.float32) if bias else None
    return hidden, weight, b


def params_for(rng, m, v, combo, per_row):
    """combo bits: 1 top-k, 2 top-p, 4 min-p."""
    def one(n):
        t = rng.uniform(0.5, 1.5, n).astype(np.float32)
        k = rng.integers(2, min(v, 60) + 1, n).astype(np.int32) if combo & 1 else np.zeros(n, np.int32)
        p = rng.uniform(0.3, 0.95, n).astype(np.float32) if combo & 2 else np.ones(n, np.float32)
        mp = rng.uniform(0.01, 0.3, n).astype(np.float32) if combo & 4 else np.zeros(n, np.float32)
        return t, k, p, mp
    if per_row:
        t, k, p, mp = one(m)
        t[rng.random(m) < 0.15] = 0.0  # greedy rows among sampled ones
        return dict(temperature=t, top_k=k, top_p=p, min_p=mp,
                    seed=rng.integers(0, 2**63, m, dtype=np.uint64),
                    offset=rng.integers(0, 2**40, m, dtype=np.uint64))
    t, k, p, mp = one(1)
    return dict(temperature=float(t[0]), top_k=int(k[0]), top_p=float(p[0]), min_p=float(mp[0]),
                seed=int(rng.integers(0, 2**63)), offset=int(rng.integers(0, 2**40)))


def random_mask(rng, m, v):
    mask = rng.integers(-2**31, 2**31, size=(m, (v + 31) // 32), dtype=np.int64).astype(np.int32)
    mask[rng.random(m) < 0.2] = 0  # fully masked rows: token -1
    return mask


@pytest.mark.parametrize("combo", range(8))
@pytest.mark.parametrize("per_row", [False, True])
def test_dense_equals_two_step(combo, per_row):
    rng = np.random.default_rng(100 + combo * 2 + per_row)
    m, v, h = 5, int(rng.integers(1, 2049)), 24
    hidden, weight, bias = dense_case(rng, m, v, h, combo % 2 == 0)
    mask = random_mask(rng, m, v) if combo % 3 else None
    p = params_for(rng, m, v, combo, per_row)
    tokens = nexttok.lm_head_sample_dense(hidden, weight, bias, mask, **p)
    assert tokens.dtype == np.int64 and tokens.shape == (m,)
    scores = head_scores(*nexttok.lm_head_topk_dense(hidden, weight, k=v, bias=bias), v)
    if mask is not None:
        nexttok.apply_token_bitmask(scores, mask)
    np.testing.assert_array_equal(tokens, nexttok.sample(scores, **p))
    if mask is not None:
        assert all(tokens[mask.any(axis=1) == 0] == -1)


@pytest.mark.parametrize("combo", [0, 3, 6])
def test_binary_equals_two_step(combo):
    rng = np.random.default_rng(200 + combo)
    m, v, h, g = 3, 777, 256, 128
    x = rng.standard_normal((m, h)).astype(np.float32)
    act_q, act_scale = nexttok.quantize_activations(x)
    wq = nexttok.pack_weights(np.where(rng.random((v, h)) < 0.5, 1, -1).astype(np.int8))
    wscale = rng.uniform(0.5, 1.5, (v, h // g)).astype(np.float16)
    mask = random_mask(rng, m, v)
    p = params_for(rng, m, v, combo, combo == 3)
    tokens = nexttok.lm_head_sample_binary(act_q, act_scale, wq, wscale, None, g, mask, **p)
    values, indices = nexttok.lm_head_topk_binary(act_q, act_scale, wq, wscale, None, g, k=v)
    scores = nexttok.apply_token_bitmask(head_scores(values, indices, v), mask)
    np.testing.assert_array_equal(tokens, nexttok.sample(scores, **p))


def test_errors_name_the_argument():
    hidden, weight, _ = dense_case(np.random.default_rng(3), 2, 64, 8, False)
    with pytest.raises(ValueError, match="'temperature'"):
        nexttok.lm_head_sample_dense(hidden, weight, temperature=-1.0)
    with pytest.raises(ValueError, match="'bitmask'"):
        nexttok.lm_head_sample_dense(hidden, weight, bitmask=np.zeros((3, 2), np.int32))
    with pytest.raises(ValueError, match="'hidden'"):
        nexttok.lm_head_sample_dense(hidden[:, :7].copy(), weight)


# ---- logprobs ---------------------------------------------------------------------

def assert_same(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint32) if g.dtype == np.float32 else g,
                                      w.view(np.uint32) if w.dtype == np.float32 else w)


@pytest.mark.parametrize("n,mode,per_row", [(0, "raw", False), (5, "processed", True),
                                            (20, "raw", True), (5, "processed", False)])
def test_logprobs_equal_sample_logprobs(n, mode, per_row):
    """Tokens and logprobs equal sample(..., logprobs=n) on the materialized, masked
    scores, bit for bit, for both heads."""
    rng = np.random.default_rng(700 + n)
    m, v, h, g = 4, 500, 256, 128
    hidden, weight, bias = dense_case(rng, m, v, 24, True)
    mask = random_mask(rng, m, v)
    mask[0] = 0  # a row that allows no token
    p = params_for(rng, m, v, 7 if n else 3, per_row)
    got = nexttok.lm_head_sample_dense(hidden, weight, bias, mask, **p, logprobs=n,
                                       logprobs_mode=mode)
    scores = head_scores(*nexttok.lm_head_topk_dense(hidden, weight, k=v, bias=bias), v)
    want = nexttok.sample(nexttok.apply_token_bitmask(scores, mask), **p, logprobs=n,
                          logprobs_mode=mode)
    assert_same(got, want)
    assert got[0][0] == -1 and got[3][0] == 0
    np.testing.assert_array_equal(got[0], nexttok.lm_head_sample_dense(hidden, weight, bias, mask, **p))

    x = rng.standard_normal((m, h)).astype(np.float32)
    act_q, act_scale = nexttok.quantize_activations(x)
    wq = nexttok.pack_weights(np.where(rng.random((v, h)) < 0.5, 1, -1).astype(np.int8))
    wscale = rng.uniform(0.5, 1.5, (v, h // g)).astype(np.float16)
    got = nexttok.lm_head_sample_binary(act_q, act_scale, wq, wscale, None, g, mask, **p,
                                        logprobs=n, logprobs_mode=mode)
    values, indices = nexttok.lm_head_topk_binary(act_q, act_scale, wq, wscale, None, g, k=v)
    scores = nexttok.apply_token_bitmask(head_scores(values, indices, v), mask)
    assert_same(got, nexttok.sample(scores, **p, logprobs=n, logprobs_mode=mode))


def test_logprobs_errors_name_the_argument():
    hidden, weight, _ = dense_case(np.random.default_rng(4), 2, 64, 8, False)
    with pytest.raises(ValueError, match="'logprobs'"):
        nexttok.lm_head_sample_dense(hidden, weight, logprobs=21)
    with pytest.raises(ValueError, match="'logprobs_mode'"):
        nexttok.lm_head_sample_dense(hidden, weight, logprobs=2, logprobs_mode="log")
    ids, values = np.zeros((2, 3), np.int32), np.zeros((2, 3), np.float32)
    ranks = np.zeros(2, np.int32)
    with pytest.raises(ValueError, match="'num_logprobs'"):  # the C check, through the extension
        ext.lm_head_sample_dense(hidden, weight, None, None, np.zeros(2, np.int64), None, 0, 1, 0,
                                 1.0, 0, 1.0, 0.0, 0, 0, False, 0, None, 21, False, ids, values,
                                 ranks)
    summary = np.zeros((2, _sharded_summary_words() + 4), np.int64)
    with pytest.raises(ValueError, match="'logprob_ids'"):  # a shard's request is in the shard
        ext.lm_head_sample_dense(hidden, weight, None, None, None, summary, 0, 64, 0,
                                 1.0, 0, 1.0, 0.0, 0, 0, False, 0, None, 2, False, ids, values,
                                 ranks)


def _sharded_summary_words():
    return ext.LM_HEAD_SUMMARY_WORDS


# ---- vocabulary-parallel, every shard in this process ------------------------------

def shard_cuts(rng, padded, shards):
    cuts = np.sort(rng.choice(np.arange(1, padded), shards - 1, replace=False))  # non-empty shards
    return [0, *map(int, cuts), padded]


def sharded_numpy(hidden, weight, bias, mask, vocab, cuts, p, k, request=None):
    """Every rank of the cut head in this process: summarize returns each shard's
    summaries, gather stacks them by rank; with a logprobs request (n, processed),
    count_ranks sums every shard's counts (the all-reduce)."""
    shards = len(cuts) - 1
    rows = hidden.shape[0]
    lp_words = 0 if request is None else _sharded.logprobs_words(request[0])

    def launch(r, m, first_row, out, rp, scores):
        lp = () if request is None else (request[0], request[1], None, None, None, scores)
        ext.lm_head_sample_dense(
            hidden[m], weight[cuts[r]:cuts[r + 1]],
            None if bias is None else bias[cuts[r]:cuts[r + 1]],
            None if mask is None else mask[m], None, out, cuts[r], vocab, first_row,
            *(rp[n] for n in _sharded.PARAMS), False, 0, None, *lp)

    def summarize(which, k):
        out, all_scores = [], []
        for r in range(shards):
            n = rows if which is None else len(which)
            summary = np.full((n, _sharded.SUMMARY_WORDS + k + lp_words), 0x7f7f, np.int64)
            scores = np.full((n, cuts[r + 1] - cuts[r]), np.nan, np.float32)
            if which is None:
                launch(r, slice(None), 0, summary, p, scores)
            else:
                for i, m in enumerate(which):
                    launch(r, slice(m, m + 1), m, summary[i:i + 1], _sharded.row_params(p, m),
                           scores[i:i + 1])
            out.append(summary)
            all_scores.append(scores)
        return out if request is None else (out, all_scores)

    def gather(summaries):
        return np.concatenate(summaries), shards

    def count_ranks(all_scores, keys):
        total = np.zeros(rows, np.int32)
        for scores in all_scores:
            counts = np.full(rows, -7, np.int32)
            ext.lm_head_shard_ranks(scores, keys, counts)
            total += counts
        return total

    return _sharded.resolve(rows, vocab, _sharded.candidates(k, p["top_k"], vocab), p, p, False,
                            summarize, gather, lambda n: np.full(n, -7, np.int64), request,
                            count_ranks)


def assert_logprobs_equal(got, want, absolute=1e-30, relative=2.0**-22):
    """Sharded against single-call logprobs: tokens, ids and ranks exactly; values
    within `absolute` + `relative` |ref| (infinities exact): by default 2 ulp, the
    normalizers being fp64 sums on both sides; against another backend's single
    call, the contract's 1e-5 + 2^-24 |ref|."""
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.asarray(g).shape == np.asarray(w).shape
    for g, w in zip((got[0], got[1], got[3]), (want[0], want[1], want[3])):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    g, w = np.asarray(got[2], np.float64), np.asarray(want[2], np.float64)
    inf = np.isinf(w)
    np.testing.assert_array_equal(g[inf], w[inf])
    assert np.all(np.abs(g[~inf] - w[~inf]) <= absolute + np.abs(w[~inf]) * relative), (g, w)


@pytest.mark.parametrize("combo", range(8))
@pytest.mark.parametrize("shards", [2, 4])
def test_sharded_equals_single_call(combo, shards):
    rng = np.random.default_rng(300 + combo * 8 + shards)
    m, vocab, h = 4, int(rng.integers(500, 3000)), 16
    padded = (vocab + 63) // 64 * 64
    hidden, weight, bias = dense_case(rng, m, padded, h, combo % 2 == 1)
    if combo >= 6:
        weight *= np.float32(0.01)  # flat rows: top-p alone passes the candidates
    mask = random_mask(rng, m, vocab) if combo % 3 == 1 else None
    p = params_for(rng, m, vocab, combo, combo == 5)
    single = nexttok.lm_head_sample_dense(hidden, weight[:vocab].copy(),
                                          None if bias is None else bias[:vocab].copy(), mask, **p)
    tokens = sharded_numpy(hidden, weight, bias, mask, vocab, shard_cuts(rng, padded, shards), p,
                           k=8 if combo >= 6 else 64)
    np.testing.assert_array_equal(tokens, single)


@pytest.mark.parametrize("combo", range(8))
@pytest.mark.parametrize("shards", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", ["raw", "processed"])
def test_sharded_logprobs_equal_single_call(combo, shards, mode):
    rng = np.random.default_rng(700 + combo * 16 + shards * 2 + (mode == "processed"))
    m, vocab, h = 5, int(rng.integers(300, 2000)), 16
    padded = (vocab + 63) // 64 * 64
    hidden, weight, bias = dense_case(rng, m, padded, h, combo % 2 == 1)
    if combo >= 6:
        weight *= np.float32(0.01)  # flat rows: the fallback
    mask = random_mask(rng, m, vocab) if combo % 3 != 2 else None
    p = params_for(rng, m, vocab, combo, combo in (3, 5))
    n = (0, 1, 5, 20)[(combo + shards) % 4]
    single = nexttok.lm_head_sample_dense(hidden, weight[:vocab].copy(),
                                          None if bias is None else bias[:vocab].copy(), mask,
                                          logprobs=n, logprobs_mode=mode, **p)
    got = sharded_numpy(hidden, weight, bias, mask, vocab, shard_cuts(rng, padded, shards), p,
                        k=8 if combo >= 6 else 64, request=(n, mode == "processed"))
    assert got[1].shape == (m, n + 1) and got[1].dtype == np.int32
    assert got[2].dtype == np.float32 and got[3].dtype == np.int32
    assert_logprobs_equal(got, single)


def order_key(x):
    """nt_order_key of float32 values (core/ordering.h): NaN as -inf, -0 as +0."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = np.where((u & 0x7FFFFFFF) > 0x7F800000, 0xFF800000, u)
    u = np.where(u == 0x80000000, 0, u)
    return np.where(u & 0x80000000, ~u & 0xFFFFFFFF, u | 0x80000000)


def expected_rank_counts(scores, keys):
    """lm_head_shard_ranks by its definition: per row, the scores whose key lies in
    [key & 0xFFFFFFFF, key >> 32]; a key of -1 counts nothing."""
    k = keys.astype(np.int64).view(np.uint64)
    lo, hi = (k & 0xFFFFFFFF)[:, None], (k >> np.uint64(32))[:, None]
    inside = (order_key(scores) >= lo) & (order_key(scores) <= hi)
    return np.where(keys == -1, 0, inside.sum(axis=1)).astype(np.int32)


def test_sharded_logprobs_errors_name_the_argument():
    rng = np.random.default_rng(800)
    hidden, weight, _ = dense_case(rng, 2, 64, 8, False)
    words = _sharded.SUMMARY_WORDS + 4 + _sharded.logprobs_words(3)
    summary = np.full((2, words), 0x7f7f, np.int64)
    scores = np.zeros((2, 64), np.float32)

    def shard(n=3, processed=False, sc=scores, sm=summary):
        ext.lm_head_sample_dense(hidden, weight, None, None, None, sm, 0, 64, 0, 1.0, 0, 1.0, 0.0,
                                 0, 0, False, 0, None, n, processed, None, None, None, sc)

    with pytest.raises(ValueError, match="'shard.num_logprobs'"):
        shard(n=21)
    with pytest.raises(TypeError, match="'shard.scores'"):  # dtype errors are TypeErrors
        shard(sc=np.zeros((2, 64), np.float16))
    with pytest.raises(ValueError, match="'shard.scores'"):
        shard(sc=np.zeros((2, 63), np.float32))
    with pytest.raises(ValueError, match="'summary'"):
        shard(sm=np.zeros((2, _sharded.SUMMARY_WORDS + _sharded.logprobs_words(3)), np.int64))
    with pytest.raises(ValueError, match="'scores'"):  # a shard's output, given to the single call
        shard(sm=None)
    assert np.all(summary == 0x7f7f)
    shard()
    ids, values = np.zeros((2, 4), np.int32), np.zeros((2, 4), np.float32)
    ranks, keys, tokens = np.zeros(2, np.int32), np.zeros(2, np.int64), np.zeros(2, np.int64)

    def combine(n=3, processed=False, i=ids, k=keys):
        ext.lm_head_sample_combine(summary, 1, 64, 0, tokens, 1.0, 0, 1.0, 0.0, 0, 0, False, n,
                                   processed, i, values, ranks, k)

    with pytest.raises(ValueError, match="'summaries'"):  # written with another request
        combine(processed=True)
    with pytest.raises(ValueError, match="'logprob_ids'"):
        combine(i=np.zeros((2, 3), np.int32))
    with pytest.raises(TypeError, match="'rank_keys'"):
        combine(k=np.zeros(2, np.int32))
    combine()
    with pytest.raises(TypeError, match="'counts'"):
        ext.lm_head_shard_ranks(scores, keys, np.zeros(2, np.int64))
    counts = np.full(2, -7, np.int32)
    ext.lm_head_shard_ranks(scores, keys, counts)
    np.testing.assert_array_equal(counts, expected_rank_counts(scores, keys))


def test_fallback_is_taken():
    rng = np.random.default_rng(400)
    vocab = 2000
    hidden, weight, _ = dense_case(rng, 3, vocab, 16, False)
    weight *= np.float32(0.01)
    p = dict(temperature=1.0, top_k=0, top_p=0.9, min_p=0.0, seed=5, offset=7)
    cuts = [0, 700, 1300, vocab]
    summaries = []
    for r in range(3):
        s = np.empty((3, _sharded.SUMMARY_WORDS + 4), np.int64)
        ext.lm_head_sample_dense(hidden, weight[cuts[r]:cuts[r + 1]], None, None, None, s, cuts[r],
                                 vocab, 0, *(p[n] for n in _sharded.PARAMS), False, 0, None)
        summaries.append(s)
    first = np.empty(3, np.int64)
    ext.lm_head_sample_combine(np.concatenate(summaries), 3, vocab, 0, first,
                               *(p[n] for n in _sharded.PARAMS), False)
    assert all(first == _sharded.NEEDS_ALL)
    single = nexttok.lm_head_sample_dense(hidden, weight, **p)
    np.testing.assert_array_equal(sharded_numpy(hidden, weight, None, None, vocab, cuts, p, 4),
                                  single)


# ---- torch.distributed (gloo) --------------------------------------------------------

def _torch_or_skip():
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
    except ImportError:
        if "torch" in REQUIRE:
            pytest.fail("NEXTTOK_TEST_REQUIRE=torch but torch is not installed")
        pytest.skip("torch is not installed (the gloo tests run where it is)")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed without gloo")


def _gloo_worker(rank, world, port, seed, result_dir):
    import torch
    import torch.distributed as dist

    import nexttok.distributed as ntd

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        rng = np.random.default_rng(seed)
        m, vocab, h = 6, int(rng.integers(1000, 3000)), 16
        padded = (vocab + 63) // 64 * 64
        hidden, weight, bias = dense_case(rng, m, padded, h, True)
        weight[:, :] *= np.float32(0.05)  # flat enough for some fallback rows
        mask = random_mask(rng, m, vocab)
        per = padded // world  # vLLM-style even shards of the padded vocabulary, last one ragged
        cuts = [min(padded, r * (per + 1)) for r in range(world)] + [padded]
        p = params_for(rng, m, vocab, 7, True)
        p["top_k"][:3] = 0  # top-p / min-p alone on some rows
        # torch takes the u64 seeds and offsets as int64 of the same bits
        tp = {n: (torch.from_numpy(v.view(np.int64) if v.dtype == np.uint64 else v)
                  if isinstance(v, np.ndarray) else v) for n, v in p.items()}
        lo, hi = cuts[rank], cuts[rank + 1]
        tokens = ntd.lm_head_sample(
            torch.from_numpy(hidden), torch.from_numpy(weight[lo:hi].copy()),
            torch.from_numpy(bias[lo:hi].copy()), torch.from_numpy(mask), **tp,
            vocab_start=lo, vocab_size=vocab, candidates=8)
        single = nexttok.lm_head_sample_dense(hidden, weight[:vocab].copy(), bias[:vocab].copy(),
                                              mask, **p)
        # The binary head, sharded the same way.
        act_q, act_scale = nexttok.quantize_activations(rng.standard_normal((m, 256)).astype(np.float32))
        wq = nexttok.pack_weights(np.where(rng.random((padded, 256)) < 0.5, 1, -1).astype(np.int8))
        wscale = rng.uniform(0.5, 1.5, (padded, 2)).astype(np.float16)
        btokens = ntd.lm_head_sample_binary(
            torch.from_numpy(act_q), torch.from_numpy(act_scale), torch.from_numpy(wq[lo:hi].copy()),
            torch.from_numpy(wscale[lo:hi].copy()), None, 128, torch.from_numpy(mask), **tp,
            vocab_start=lo, vocab_size=vocab, candidates=8)
        bsingle = nexttok.lm_head_sample_binary(act_q, act_scale, wq[:vocab].copy(),
                                                wscale[:vocab].copy(), None, 128, mask, **p)
        np.save(os.path.join(result_dir, f"rank{rank}.npy"),
                np.stack([tokens.numpy(), single, btokens.numpy(), bsingle]))
        # Logprobs: both modes and heads, the single call's.
        lp = {}
        for name, n, mode in (("raw", 5, "raw"), ("processed", 20, "processed")):
            got = ntd.lm_head_sample(
                torch.from_numpy(hidden), torch.from_numpy(weight[lo:hi].copy()),
                torch.from_numpy(bias[lo:hi].copy()), torch.from_numpy(mask), **tp,
                vocab_start=lo, vocab_size=vocab, candidates=8, logprobs=n, logprobs_mode=mode)
            want = nexttok.lm_head_sample_dense(hidden, weight[:vocab].copy(), bias[:vocab].copy(),
                                                mask, logprobs=n, logprobs_mode=mode, **p)
            lp.update({f"{name}_got{i}": got[i].numpy() for i in range(4)})
            lp.update({f"{name}_want{i}": np.asarray(want[i]) for i in range(4)})
        got = ntd.lm_head_sample_binary(
            torch.from_numpy(act_q), torch.from_numpy(act_scale), torch.from_numpy(wq[lo:hi].copy()),
            torch.from_numpy(wscale[lo:hi].copy()), None, 128, torch.from_numpy(mask), **tp,
            vocab_start=lo, vocab_size=vocab, candidates=8, logprobs=1, logprobs_mode="processed")
        want = nexttok.lm_head_sample_binary(act_q, act_scale, wq[:vocab].copy(),
                                             wscale[:vocab].copy(), None, 128, mask, logprobs=1,
                                             logprobs_mode="processed", **p)
        lp.update({f"binary_got{i}": got[i].numpy() for i in range(4)})
        lp.update({f"binary_want{i}": np.asarray(want[i]) for i in range(4)})
        np.savez(os.path.join(result_dir, f"lp{rank}.npz"), **lp)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
def test_gloo_every_rank_gets_the_single_call_token(world, tmp_path):
    _torch_or_skip()
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_gloo_worker, args=(world, port, 500 + world, str(tmp_path)), nprocs=world, join=True)
    results = [np.load(tmp_path / f"rank{r}.npy") for r in range(world)]
    for r in results:  # every rank: the single call's tokens
        np.testing.assert_array_equal(r[0], results[0][1])
        np.testing.assert_array_equal(r[2], results[0][3])
    for r in range(world):  # and its logprobs
        lp = np.load(tmp_path / f"lp{r}.npz")
        for name in ("raw", "processed", "binary"):
            assert_logprobs_equal([lp[f"{name}_got{i}"] for i in range(4)],
                                  [lp[f"{name}_want{i}"] for i in range(4)])


# ---- torch.distributed (NCCL, one GPU a rank) ----------------------------------------

def _nccl_worker(rank, world, port, seed, result_dir):
    import torch
    import torch.distributed as dist

    import nexttok.distributed as ntd

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        dev = torch.device("cuda", rank)
        rng = np.random.default_rng(seed)
        out, lp = [], {}
        for case in range(6):
            m, vocab, h = (1, 16, 64)[case % 3], int(rng.integers(30000, 130000)), 512
            padded = (vocab + 63) // 64 * 64
            per = padded // world
            cuts = [min(padded, r * (per + 1)) for r in range(world)] + [padded]
            lo, hi = cuts[rank], cuts[rank + 1]
            g = torch.Generator(device=dev).manual_seed(seed + case)  # the same head on every rank
            hidden = torch.randn(m, h, generator=g, device=dev).to(torch.bfloat16)
            weight = (torch.randn(padded, h, generator=g, device=dev) / h ** 0.5).to(torch.bfloat16)
            bits = torch.rand(m, vocab, generator=g, device=dev) < 0.5
            bits[:, 0] = True
            mask = nexttok.bitmask_from_allowed(bits)
            kw = [dict(top_k=50, top_p=0.9), dict(), dict(temperature=0.0), dict(top_p=0.9),
                  dict(top_k=20, min_p=0.05), dict(top_p=0.8, temperature=0.7)][case]
            if case == 5:  # per-row parameters on the GPU
                kw = dict(top_p=torch.full((m,), 0.8, device=dev), seed=torch.arange(m, device=dev) * 7 + 1,
                          temperature=torch.full((m,), 0.7, device=dev))
            sharded = ntd.lm_head_sample(hidden, weight[lo:hi].contiguous(), None, mask, **kw,
                                         vocab_start=lo, vocab_size=vocab, candidates=64)
            single = nexttok.lm_head_sample_dense(hidden, weight[:vocab].contiguous(), None, mask, **kw)
            out.append(np.stack([sharded.cpu().numpy(), single.cpu().numpy()]))
            if case < 2:  # logprobs of the same rows, both modes
                n_lp, mode = (5, "raw") if case == 0 else (20, "processed")
                got = ntd.lm_head_sample(hidden, weight[lo:hi].contiguous(), None, mask, **kw,
                                         vocab_start=lo, vocab_size=vocab, candidates=64,
                                         logprobs=n_lp, logprobs_mode=mode)
                want = nexttok.lm_head_sample_dense(hidden, weight[:vocab].contiguous(), None, mask,
                                                    **kw, logprobs=n_lp, logprobs_mode=mode)
                lp[f"got{case}"] = [t.cpu().numpy() for t in got]
                lp[f"want{case}"] = [t.cpu().numpy() for t in want]
        np.savez(os.path.join(result_dir, f"nccl{rank}.npz"), *out)
        np.savez(os.path.join(result_dir, f"nccl_lp{rank}.npz"),
                 **{f"{k}_{i}": v for k, vs in lp.items() for i, v in enumerate(vs)})
    finally:
        dist.destroy_process_group()


def test_nccl_every_rank_gets_the_single_call_token(tmp_path):
    """Two GPUs or more: each rank's shard on its own GPU, the summaries gathered by
    NCCL; every rank's tokens (and logprobs, raw and processed) are its single call's
    on the whole head (bf16 heads,
    V 30,000 to 130,000, M = 1, 16, 64, greedy, plain and filtered rows; on inputs
    this random no top-p cut falls within the rounding that separates the shards'
    mass from the single call's)."""
    _torch_or_skip()
    import socket

    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if not nexttok.cuda_compiled or torch.cuda.device_count() < 2 or not dist.is_nccl_available():
        pytest.skip("needs nexttok with CUDA, NCCL and two GPUs")
    world = min(torch.cuda.device_count(), 4)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_nccl_worker, args=(world, port, 900, str(tmp_path)), nprocs=world, join=True)
    first = np.load(tmp_path / "nccl0.npz")
    for r in range(world):
        got = np.load(tmp_path / f"nccl{r}.npz")
        for case in got.files:
            np.testing.assert_array_equal(got[case][0], got[case][1], err_msg=f"rank {r} {case}")
            np.testing.assert_array_equal(got[case][0], first[case][0], err_msg=f"rank {r} {case}")
        lp = np.load(tmp_path / f"nccl_lp{r}.npz")
        for case in range(2):
            assert_logprobs_equal([lp[f"got{case}_{i}"] for i in range(4)],
                                  [lp[f"want{case}_{i}"] for i in range(4)], 1e-5, 2.0**-24)


def test_distributed_logprobs_errors_name_the_argument():
    _torch_or_skip()
    import torch

    import nexttok.distributed as ntd

    h, w = torch.zeros((2, 8)), torch.zeros((64, 8))
    with pytest.raises(ValueError, match="'logprobs'"):
        ntd.lm_head_sample(h, w, vocab_start=0, vocab_size=64, logprobs=21)
    with pytest.raises(ValueError, match="'logprobs_mode'"):
        ntd.lm_head_sample(h, w, vocab_start=0, vocab_size=64, logprobs=2, logprobs_mode="log")


# ---- torch ops ------------------------------------------------------------------------

@pytest.mark.parametrize("device", torch_devices())
@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("case", range(3))
def test_torch_on_device_equals_two_step_on_its_scores(torch, device, binary, case):
    """On each torch device: the fused op's tokens (and logprobs) equal sample() on the
    head's own scores after the bitmask, those scores written out by lm_head_topk with
    k = V on the same device (the same kernels: on CUDA the scores differ from the CPU's
    in rounding, so the device is compared with itself). Per-row parameters on the device."""
    require_device(device)
    rng = np.random.default_rng(800 + 10 * case + binary)
    m, v = (1, 5, 70)[case], int(rng.integers(100, 2049))
    mask = torch.from_numpy(random_mask(rng, m, v)).to(device)
    p = params_for(rng, m, v, 7 if case else 2, case == 2)
    tp = {n: (torch.from_numpy(x.view(np.int64) if x.dtype == np.uint64 else x).to(device)
              if isinstance(x, np.ndarray) else x) for n, x in p.items()}
    if binary:
        x = torch.from_numpy(rng.standard_normal((m, 1024)).astype(np.float32)).to(device)
        act_q, act_scale = nexttok.quantize_activations(x)
        signs = torch.from_numpy(np.where(rng.random((v, 1024)) < 0.5, 1, -1).astype(np.int8)).to(device)
        wq = nexttok.pack_weights(signs)
        wscale = torch.from_numpy(rng.uniform(0.5, 1.5, (v, 8)).astype(np.float16)).to(device)
        head = topk_head = (act_q, act_scale, wq, wscale, None, 128)
        fused, topk = nexttok.lm_head_sample_binary, nexttok.lm_head_topk_binary
    else:
        dtype = (torch.bfloat16, torch.float32, torch.float16)[case]
        hidden = torch.from_numpy(rng.standard_normal((m, 256)).astype(np.float32)).to(device, dtype)
        weight = (torch.from_numpy(rng.standard_normal((v, 256)).astype(np.float32)) / 16).to(device, dtype)
        head, topk_head = (hidden, weight, None), (hidden, weight)
        fused, topk = nexttok.lm_head_sample_dense, nexttok.lm_head_topk_dense
    values, indices = topk(*topk_head, k=v)
    assert torch.equal(indices.sort(dim=1).values, torch.arange(v, device=device).expand(m, v))
    scores = torch.full((m, v), float("nan"), dtype=torch.float32, device=device).scatter_(1, indices, values)
    nexttok.apply_token_bitmask(scores, mask)
    tokens = fused(*head, mask, **tp)
    assert tokens.device.type == device and tokens.dtype == torch.int64
    assert torch.equal(tokens, nexttok.sample(scores, **tp))
    got = fused(*head, mask, **tp, logprobs=5, logprobs_mode="processed" if case % 2 else "raw")
    want = nexttok.sample(scores, **tp, logprobs=5, logprobs_mode="processed" if case % 2 else "raw")
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(g.view(torch.int32) if g.dtype == torch.float32 else g,
                           w.view(torch.int32) if w.dtype == torch.float32 else w)


def test_torch_op_eager_and_compiled(torch):
    rng = np.random.default_rng(600)
    m, v, h = 4, 300, 24
    hidden, weight, bias = dense_case(rng, m, v, h, True)
    mask = random_mask(rng, m, v)
    p = params_for(rng, m, v, 7, False)
    expected = nexttok.lm_head_sample_dense(hidden, weight, bias, mask, **p)
    th, tw, tb, tm = map(torch.from_numpy, (hidden, weight, bias, mask))
    tokens = nexttok.lm_head_sample_dense(th, tw, tb, tm, **p)
    assert tokens.dtype == torch.int64
    np.testing.assert_array_equal(tokens.numpy(), expected)

    def step(h_, w_, b_, m_, t_):  # per-row temperatures in a tensor: the op's schema path
        return nexttok.lm_head_sample_dense(h_, w_, b_, m_, temperature=t_, top_k=p["top_k"],
                                            top_p=p["top_p"], min_p=p["min_p"], seed=p["seed"],
                                            offset=p["offset"])

    temps = torch.full((m,), p["temperature"], dtype=torch.float32)
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    np.testing.assert_array_equal(compiled(th, tw, tb, tm, temps).numpy(), expected)


def test_torch_op_logprobs_eager_compiled_and_fake(torch):
    rng = np.random.default_rng(601)
    m, v, h = 4, 300, 24
    hidden, weight, bias = dense_case(rng, m, v, h, True)
    mask = random_mask(rng, m, v)
    p = params_for(rng, m, v, 7, False)
    expected = nexttok.lm_head_sample_dense(hidden, weight, bias, mask, **p, logprobs=5,
                                            logprobs_mode="processed")
    th, tw, tb, tm = map(torch.from_numpy, (hidden, weight, bias, mask))
    got = nexttok.lm_head_sample_dense(th, tw, tb, tm, **p, logprobs=5, logprobs_mode="processed")
    assert [t.dtype for t in got] == [torch.int64, torch.int32, torch.float32, torch.int32]
    assert_same([t.numpy() for t in got], expected)

    def step(h_, w_, b_, m_, t_):  # per-row temperatures in a tensor: the op's schema path
        return nexttok.lm_head_sample_dense(h_, w_, b_, m_, temperature=t_, top_k=p["top_k"],
                                            top_p=p["top_p"], min_p=p["min_p"], seed=p["seed"],
                                            offset=p["offset"], logprobs=5,
                                            logprobs_mode="processed")

    temps = torch.full((m,), p["temperature"], dtype=torch.float32)
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    assert_same([t.numpy() for t in compiled(th, tw, tb, tm, temps)], expected)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = step(*(mode.from_tensor(t) for t in (th, tw, tb, tm, temps)))
    assert [tuple(t.shape) for t in fake] == [(m,), (m, 6), (m, 6), (m,)]
    torch.library.opcheck(nexttok.torch._op["lm_head_sample_dense_logprobs"],
                          (th, tw, tb, tm, None, 0.0, None, 0, None, 1.0, None, 0.0, None, 0,
                           None, 0, False, 4, True),
                          test_utils=("test_schema", "test_faketensor"))

    # The binary head's op, against its numpy path.
    g = 128
    x = rng.standard_normal((m, 256)).astype(np.float32)
    act_q, act_scale = nexttok.quantize_activations(x)
    wq = nexttok.pack_weights(np.where(rng.random((v, 256)) < 0.5, 1, -1).astype(np.int8))
    wscale = rng.uniform(0.5, 1.5, (v, 256 // g)).astype(np.float16)
    expected = nexttok.lm_head_sample_binary(act_q, act_scale, wq, wscale, None, g, mask, **p,
                                             logprobs=3)
    targs = [torch.from_numpy(a) for a in (act_q, act_scale, wq, wscale)]
    got = torch.compile(lambda q, s_, w_, ws_, m_, t_: nexttok.lm_head_sample_binary(
        q, s_, w_, ws_, None, g, m_, temperature=t_, top_k=p["top_k"], top_p=p["top_p"],
        min_p=p["min_p"], seed=p["seed"], offset=p["offset"], logprobs=3),
        fullgraph=True, backend="aot_eager")(*targs, tm, temps)
    assert_same([t.numpy() for t in got], expected)
