"""cupy and jax arrays through DLPack: results come back in the caller's
framework and equal the numpy path. Each skips when its framework is absent."""
import numpy as np
import pytest

import nexttok
import reference as ref

RNG = np.random.default_rng(99)
LOGITS = RNG.standard_normal((8, 700)).astype(np.float32)
ALLOWED = RNG.random((8, 700)) < 0.4
HIDDEN = RNG.integers(-3, 4, size=(2, 64)).astype(np.float32)
WEIGHT = RNG.integers(-3, 4, size=(700, 64)).astype(np.float32)


def run_all(xp, to_numpy, kind):
    logits = xp.asarray(LOGITS)
    tokens = nexttok.sample(logits, temperature=0.0)
    assert kind(tokens)
    np.testing.assert_array_equal(to_numpy(tokens), LOGITS.argmax(1))
    np.testing.assert_array_equal(to_numpy(nexttok.sample(logits, 0.8, 40, seed=3)),
                                  nexttok.sample(LOGITS, 0.8, 40, seed=3))
    mask = nexttok.bitmask_from_allowed(xp.asarray(ALLOWED))
    np.testing.assert_array_equal(to_numpy(mask), ref.bitmask_from_allowed(ALLOWED))
    masked = nexttok.apply_token_bitmask(logits, mask)
    np.testing.assert_array_equal(to_numpy(masked), np.where(ALLOWED, LOGITS, -np.inf))
    values, indices = nexttok.lm_head_topk_dense(xp.asarray(HIDDEN), xp.asarray(WEIGHT), k=10)
    exp_v, exp_i = nexttok.lm_head_topk_dense(HIDDEN, WEIGHT, k=10)
    np.testing.assert_array_equal(to_numpy(indices), exp_i)
    np.testing.assert_array_equal(to_numpy(values), exp_v)
    q, s = nexttok.quantize_activations(xp.asarray(HIDDEN))
    rq, rs = ref.quantize_activations(HIDDEN)
    np.testing.assert_array_equal(to_numpy(q), rq)
    np.testing.assert_array_equal(to_numpy(s), rs)


def test_cupy():
    cp = pytest.importorskip("cupy")
    if not nexttok.cuda_compiled or cp.cuda.runtime.getDeviceCount() == 0:
        pytest.skip("no CUDA")
    run_all(cp, cp.asnumpy, lambda a: isinstance(a, cp.ndarray))


@pytest.mark.parametrize("platform", ["cpu", "gpu"])
def test_jax(platform):
    jax = pytest.importorskip("jax")
    try:
        device = jax.devices(platform)[0]
    except RuntimeError:
        pytest.skip(f"no jax {platform} device")
    if platform == "gpu" and not nexttok.cuda_compiled:
        pytest.skip("nexttok built without CUDA")
    x64 = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)  # int64 top-k indices

    class On:
        @staticmethod
        def asarray(x):
            return jax.device_put(x, device)

    try:
        run_all(On, np.asarray, lambda a: isinstance(a, jax.Array))
    finally:  # later tests see jax as they found it
        jax.config.update("jax_enable_x64", x64)
