"""Hypothesis property tests over shapes and parameters, against the numpy
references (CI part)."""
import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import nexttok
import reference as ref

SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def arrays(draw, shape, dtype=np.float32, scale=3.0):
    seed = draw(st.integers(0, 2**32 - 1))
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


@SETTINGS
@given(st.data(), st.integers(0, 6), st.integers(1, 300), st.integers(1, 12))
def test_mask_roundtrip(data, b, v, words):
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    allowed = rng.random((b, v)) < data.draw(st.floats(0, 1))
    mask = nexttok.bitmask_from_allowed(allowed)
    np.testing.assert_array_equal(mask, ref.bitmask_from_allowed(allowed))
    logits = arrays(data.draw, (b, v), data.draw(st.sampled_from([np.float32, np.float16])))
    bits = rng.integers(-2**31, 2**31, size=(b, words), dtype=np.int64).astype(np.int32)
    expected = ref.apply_token_bitmask(logits, bits)
    nexttok.apply_token_bitmask(logits, bits)
    np.testing.assert_array_equal(logits, expected)


@SETTINGS
@given(st.data(), st.integers(0, 5), st.integers(1, 8).map(lambda n: 32 * n))
def test_pack_and_quantize(data, m, h):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    w = np.where(rng.random((m + 1, h)) < 0.5, 1, -1).astype(np.int8)
    np.testing.assert_array_equal(nexttok.pack_weights(w), ref.pack_weights(w))
    x = arrays(data.draw, (m, h), scale=data.draw(st.sampled_from([1e-30, 1.0, 1e30])))
    q, s = nexttok.quantize_activations(x)
    rq, rs = ref.quantize_activations(x)
    np.testing.assert_array_equal(q, rq)
    np.testing.assert_array_equal(s, rs)


@SETTINGS
@given(st.data(), st.integers(1, 4), st.integers(1, 400), st.integers(1, 3))
def test_dense_topk_on_integer_grid(data, m, v, hb):
    h = 32 * hb
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    hidden = rng.integers(-3, 4, size=(m, h)).astype(np.float32)
    weight = rng.integers(-3, 4, size=(v, h)).astype(np.float32)
    k = data.draw(st.integers(1, min(v, 64)))
    values, indices = nexttok.lm_head_topk_dense(hidden, weight, k=k)
    logits = ref.dense_logits(hidden, weight)
    for r in range(m):
        rv, ri = ref.topk(logits[r], k)
        np.testing.assert_array_equal(indices[r], ri)
        np.testing.assert_array_equal(values[r], rv)


@SETTINGS
@given(st.data(), st.integers(1, 6), st.integers(2, 500))
def test_sampled_token_is_in_keep_set(data, b, v):
    logits = arrays(data.draw, (b, v))
    t = data.draw(st.sampled_from([0.0, 0.3, 1.0, 2.5]))
    k = data.draw(st.integers(-1, v + 2))
    p = data.draw(st.floats(0.05, 1.0))
    mp = data.draw(st.sampled_from([0.0, 0.01, 0.2]))
    joint = data.draw(st.booleans())
    seed = data.draw(st.integers(0, 2**64 - 1))
    tokens = nexttok.sample(logits, t, k, p, mp, seed, data.draw(st.integers(0, 2**64 - 1)),
                            joint=joint)
    for r in range(b):
        kept, degenerate = ref.keep_set(logits[r], t, k, p, mp, joint)
        assume(not degenerate)
        assert tokens[r] in kept
