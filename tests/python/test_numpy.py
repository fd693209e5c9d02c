"""Every operation on numpy arrays against the numpy references (CI part)."""
import numpy as np
import pytest

import nexttok
import reference as ref

RNG = np.random.default_rng(1234)


def test_published_names():
    for name in ("lm_head_topk_binary", "lm_head_topk_dense", "pack_weights",
                 "quantize_activations", "apply_token_bitmask", "apply_allowed_mask",
                 "bitmask_from_allowed", "sample"):
        assert callable(getattr(nexttok, name))
    assert nexttok.apply_allowed_mask is nexttok.apply_token_bitmask
    assert nexttok.backend_available("cpu")


@pytest.mark.parametrize("v", [1, 31, 32, 33, 1000])
def test_bitmask_from_allowed(v):
    allowed = RNG.random((5, v)) < 0.5
    out = nexttok.bitmask_from_allowed(allowed)
    assert isinstance(out, np.ndarray) and out.dtype == np.int32
    np.testing.assert_array_equal(out, ref.bitmask_from_allowed(allowed))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("words", [None, 2])  # None: ceil(V/32); 2: padded vocabulary cut
def test_apply_token_bitmask(dtype, words):
    logits = RNG.standard_normal((6, 100)).astype(dtype)
    mask = RNG.integers(-2**31, 2**31, size=(6, words or 4), dtype=np.int64).astype(np.int32)
    expected = ref.apply_token_bitmask(logits, mask)
    out = nexttok.apply_token_bitmask(logits, mask)
    assert out is logits
    np.testing.assert_array_equal(logits, expected)


def test_apply_token_bitmask_rows_and_strides():
    wide = RNG.standard_normal((6, 80)).astype(np.float32)
    logits = wide[:, :70]  # row stride 80
    mask = RNG.integers(-2**31, 2**31, size=(6, 3), dtype=np.int64).astype(np.int32)
    indices = np.array([4, 1, 99, -3], dtype=np.int64)  # out of range rows are skipped
    expected = ref.apply_token_bitmask(logits, mask, indices)
    gap = wide[:, 70:].copy()
    nexttok.apply_allowed_mask(logits, mask, indices)
    np.testing.assert_array_equal(logits, expected)
    np.testing.assert_array_equal(wide[:, 70:], gap)


def test_pack_weights_and_quantize():
    w = np.where(RNG.random((40, 256)) < 0.5, 1, -1).astype(np.int8)
    np.testing.assert_array_equal(nexttok.pack_weights(w), ref.pack_weights(w))
    x = RNG.standard_normal((7, 256)).astype(np.float32)
    x[3] = 0
    q, s = nexttok.quantize_activations(x)
    rq, rs = ref.quantize_activations(x)
    np.testing.assert_array_equal(q, rq)
    np.testing.assert_array_equal(s, rs)
    q16, s16 = nexttok.quantize_activations(x.astype(np.float16))
    rq16, rs16 = ref.quantize_activations(x.astype(np.float16))
    np.testing.assert_array_equal(q16, rq16)
    np.testing.assert_array_equal(s16, rs16)


def _check_topk(values, indices, logits, k, tol):
    scale = np.abs(logits).max(axis=1, keepdims=True)
    for m in range(logits.shape[0]):
        rv, ri = ref.topk(logits[m], k)
        np.testing.assert_array_equal(indices[m], ri)
        np.testing.assert_allclose(values[m], rv, rtol=0, atol=tol * scale[m, 0])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("bias", [False, True])
def test_lm_head_topk_dense(dtype, bias):
    # Integer grids keep every sum exact in any order, so ties are compared exactly too.
    h = RNG.integers(-4, 5, size=(3, 64)).astype(dtype)
    w = RNG.integers(-4, 5, size=(500, 64)).astype(dtype)
    b = RNG.integers(-8, 9, size=500).astype(np.float32) if bias else None
    values, indices = nexttok.lm_head_topk_dense(h, w, k=50, bias=b)
    assert values.dtype == np.float32 and indices.dtype == np.int64 and values.shape == (3, 50)
    _check_topk(values, indices, ref.dense_logits(h, w, b), 50, 1e-5)


@pytest.mark.parametrize("group_size", [32, 64, 128, 256])
def test_lm_head_topk_binary(group_size):
    signs = np.where(RNG.random((300, 256)) < 0.5, 1, -1).astype(np.int8)
    wq = nexttok.pack_weights(signs)
    wscale = (2.0 ** RNG.integers(-3, 3, size=(300, 256 // group_size))).astype(np.float16)
    x = RNG.standard_normal((4, 256)).astype(np.float32)
    act_q, act_scale = nexttok.quantize_activations(x)
    bias = RNG.integers(-4, 5, size=300).astype(np.float16)
    values, indices = nexttok.lm_head_topk_binary(act_q, act_scale, wq, wscale, bias,
                                                  group_size=group_size, k=20)
    logits = ref.binary_logits(act_q, act_scale, wq, wscale, group_size, bias)
    # Non-degenerate rows only: float32 products may round distinct fp64 scores together.
    for m in range(4):
        rv, ri = ref.topk(logits[m], 21)
        if np.min(np.abs(np.diff(rv))) > 1e-4 * np.abs(logits[m]).max():
            np.testing.assert_array_equal(indices[m], ri[:20])
        np.testing.assert_allclose(values[m], rv[:20], atol=1e-4 * np.abs(logits[m]).max())


def test_greedy_is_first_argmax():
    logits = RNG.integers(0, 4, size=(16, 300)).astype(np.float32)  # many ties
    for kw in ({"temperature": 0.0}, {"top_k": 1}):
        np.testing.assert_array_equal(nexttok.sample(logits, **kw), np.argmax(logits, axis=1))


def test_masked_rows_give_minus_one():
    logits = np.full((3, 50), -np.inf, dtype=np.float32)
    logits[1, 7] = 0
    np.testing.assert_array_equal(nexttok.sample(logits, seed=3), [-1, 7, -1])
    np.testing.assert_array_equal(nexttok.sample(logits, temperature=0), [-1, 7, -1])


@pytest.mark.parametrize("params", [
    dict(temperature=0.7, top_k=50, top_p=0.9),
    dict(temperature=1.3, min_p=0.05),
    dict(temperature=1.0, top_p=0.5, joint=True, top_k=20),
    dict(temperature=0.5),
])
def test_sample_in_keep_set(params):
    logits = (RNG.standard_normal((64, 2000)) * 3).astype(np.float32)
    tokens = nexttok.sample(logits, seed=11, offset=2, **params)
    assert tokens.dtype == np.int64 and tokens.shape == (64,)
    joint = params.get("joint", False)
    checked = 0
    for r in range(64):
        kept, degenerate = ref.keep_set(logits[r], params.get("temperature", 1.0),
                                        params.get("top_k", 0), params.get("top_p", 1.0),
                                        params.get("min_p", 0.0), joint)
        if not degenerate:
            assert tokens[r] in kept
            checked += 1
    assert checked > 50


def test_sample_deterministic_and_per_row_seeds():
    logits = RNG.standard_normal((8, 500)).astype(np.float32)
    seeds = np.arange(100, 108, dtype=np.uint64)
    a = nexttok.sample(logits, seed=seeds, offset=5)
    np.testing.assert_array_equal(a, nexttok.sample(logits, seed=seeds, offset=5))
    assert not np.array_equal(a, nexttok.sample(logits, seed=seeds, offset=6))
    perm = RNG.permutation(8)  # per-row seeds: a row's draw ignores its batch position
    np.testing.assert_array_equal(nexttok.sample(logits[perm], seed=seeds[perm], offset=5), a[perm])
    b = nexttok.sample(logits, seed=seeds.view(np.int64), offset=np.full(8, 5, np.int64))
    np.testing.assert_array_equal(a, b)


def test_sample_per_row_parameters_match_scalar_calls():
    logits = RNG.standard_normal((4, 300)).astype(np.float32)
    temps = np.array([0.0, 0.5, 1.0, 2.0], np.float32)
    ks = np.array([1, 10, 0, 40], np.int32)
    tops = np.array([1.0, 0.9, 0.5, 0.95], np.float32)
    mins = np.array([0.0, 0.0, 0.1, 0.02], np.float32)
    seeds = np.arange(4, dtype=np.uint64) + 9
    got = nexttok.sample(logits, temps, ks, tops, mins, seeds, 3)
    for r in range(4):
        one = nexttok.sample(logits[r:r + 1], float(temps[r]), int(ks[r]), float(tops[r]),
                             float(mins[r]), seeds[r:r + 1], 3)
        assert got[r] == one[0]


def test_sample_distribution():
    v, n = 8, 40000
    row = np.array([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0], np.float32)
    logits = np.tile(row, (n, 1))
    tokens = nexttok.sample(logits, temperature=0.8, top_k=6, top_p=0.95, seed=7)
    kept, degenerate = ref.keep_set(row, 0.8, 6, 0.95, 0.0)
    assert not degenerate
    assert set(np.unique(tokens)) <= set(kept.tolist())
    freq = np.bincount(tokens, minlength=v)[kept] / n
    tv = 0.5 * np.abs(freq - ref.softmax_on(row, 0.8, kept)).sum()
    assert tv < 0.01, tv


def test_sample_explicit_uniform():
    logits = RNG.standard_normal((32, 100)).astype(np.float32)
    u = RNG.random(32).astype(np.float32)
    tokens = nexttok.sample(logits, temperature=0.9, top_k=30, uniform=u)
    for r in range(32):
        kept, _ = ref.keep_set(logits[r], 0.9, 30, 1.0, 0.0)
        vocab_order = np.sort(kept)
        p = ref.softmax_on(logits[r], 0.9, vocab_order)
        cum = np.cumsum(p)
        expected = vocab_order[min(np.searchsorted(cum, u[r], side="right"), len(cum) - 1)]
        if np.min(np.abs(cum - u[r])) > 1e-5:
            assert tokens[r] == expected


def test_empty_batch():
    assert nexttok.sample(np.zeros((0, 10), np.float32)).shape == (0,)
    assert nexttok.bitmask_from_allowed(np.zeros((0, 40), bool)).shape == (0, 2)
    v, i = nexttok.lm_head_topk_dense(np.zeros((0, 32), np.float32),
                                      np.ones((64, 32), np.float32), k=4)
    assert v.shape == (0, 4) and i.shape == (0, 4)
