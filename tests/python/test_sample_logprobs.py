"""sample(..., logprobs=n, logprobs_mode=...) on numpy arrays (and torch tensors
when torch is installed) against the numpy reference: tokens equal to the call
without logprobs, ids and ranks exact, values within the documented tolerance."""
import numpy as np
import pytest

import nexttok
from conftest import import_torch
import reference as ref

RNG = np.random.default_rng(4321)
TOL_ABS, TOL_REL = 1e-5, 2.0**-24  # docs/SEMANTICS.md, "Logprobs with sample": 1e-5 beyond the fp32 rounding


def assert_logprobs(logits, params, n, mode, seed=7, offset=3):
    tokens, ids, values, ranks = nexttok.sample(logits, seed=seed, offset=offset, logprobs=n,
                                                logprobs_mode=mode, **params)
    assert ids.dtype == np.int32 and values.dtype == np.float32 and ranks.dtype == np.int32
    assert ids.shape == (logits.shape[0], n + 1) == values.shape and ranks.shape == tokens.shape
    np.testing.assert_array_equal(tokens, nexttok.sample(logits, seed=seed, offset=offset, **params))
    for r in range(logits.shape[0]):
        # The reference is handed the library's token: it must be one the keep-set holds.
        kept, _ = ref.keep_set(logits[r], params.get("temperature", 1.0), params.get("top_k", 0),
                               params.get("top_p", 1.0), params.get("min_p", 0.0))
        if kept.size:
            assert int(tokens[r]) in set(kept.tolist()), f"row {r}: token {tokens[r]} outside the keep-set"
        else:
            assert tokens[r] == -1, f"row {r}: fully masked, token {tokens[r]}"
        want_ids, want, rank = ref.logprobs(logits[r], params.get("temperature", 1.0),
                                            params.get("top_k", 0), params.get("top_p", 1.0),
                                            params.get("min_p", 0.0), int(tokens[r]), n,
                                            mode == "processed")
        np.testing.assert_array_equal(ids[r], want_ids, err_msg=f"row {r}")
        assert ranks[r] == rank, f"row {r}: rank {ranks[r]}, expected {rank}"
        finite = np.isfinite(want)
        np.testing.assert_array_equal(values[r][~finite], want[~finite], err_msg=f"row {r}")
        np.testing.assert_allclose(values[r][finite], want[finite], rtol=TOL_REL, atol=TOL_ABS,
                                   err_msg=f"row {r}")


def non_degenerate_rows(b, v, params):
    rows = []
    while len(rows) < b:
        row = RNG.normal(0, 2, v).astype(np.float32)
        kept, degenerate = ref.keep_set(row, params.get("temperature", 1.0), params.get("top_k", 0),
                                        params.get("top_p", 1.0), params.get("min_p", 0.0))
        if not degenerate:
            rows.append(row)
    return np.stack(rows)


PARAMS = [dict(temperature=0.8), dict(temperature=1.0, top_k=20, top_p=0.9),
          dict(temperature=0.7, min_p=0.05), dict(temperature=0.0), dict(temperature=1.3, top_k=1)]


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("mode", ["raw", "processed"])
@pytest.mark.parametrize("v,n", [(33, 5), (1000, 20), (3, 20), (500, 0)])
def test_matches_reference(params, mode, v, n):
    assert_logprobs(non_degenerate_rows(4, v, params), params, n, mode)


@pytest.mark.parametrize("mode", ["raw", "processed"])
def test_masked_and_infinite_rows(mode):
    logits = RNG.normal(0, 2, (4, 40)).astype(np.float32)
    logits[0] = -np.inf                     # fully masked
    logits[1, [3, 17]] = np.inf             # two +inf tokens share the mass
    logits[2, ::2] = np.nan                 # NaN counts as -inf
    logits[3, 5] = -np.inf
    assert_logprobs(logits, dict(temperature=0.9), 6, mode)
    tokens, ids, values, ranks = nexttok.sample(logits, logprobs=6, logprobs_mode=mode)
    assert tokens[0] == -1 and ids[0, 0] == -1 and ranks[0] == 0
    assert np.all(values[0] == -np.inf)
    np.testing.assert_array_equal(ids[0, 1:], np.arange(6))
    np.testing.assert_allclose(values[1, 0], -np.log(2), atol=TOL_ABS)
    assert ranks[1] == 2


def test_greedy_processed_is_one_hot():
    logits = RNG.normal(0, 2, (3, 100)).astype(np.float32)
    tokens, ids, values, ranks = nexttok.sample(logits, temperature=0.0, logprobs=3,
                                                logprobs_mode="processed")
    np.testing.assert_array_equal(tokens, np.argmax(logits, axis=1))
    assert np.all(values[:, 0] == 0) and np.all(ranks == 1)
    np.testing.assert_array_equal(ids[:, 1], tokens)
    assert np.all(values[:, 2:] == -np.inf)


@pytest.mark.parametrize("bad,error,arg", [(21, ValueError, "logprobs"), (-1, ValueError, "logprobs"),
                                           ("5", TypeError, "logprobs")])
def test_logprobs_argument_errors(bad, error, arg):
    logits = RNG.normal(0, 1, (2, 10)).astype(np.float32)
    with pytest.raises(error, match=f"'{arg}'"):
        nexttok.sample(logits, logprobs=bad)


def test_logprobs_mode_errors():
    logits = RNG.normal(0, 1, (2, 10)).astype(np.float32)
    with pytest.raises(ValueError, match="'logprobs_mode'"):
        nexttok.sample(logits, logprobs=2, logprobs_mode="log")


def test_torch_op_and_fake():
    torch = import_torch()
    logits = torch.from_numpy(non_degenerate_rows(3, 200, dict(temperature=0.9, top_k=30)))
    tokens, ids, values, ranks = nexttok.sample(logits, temperature=0.9, top_k=30, seed=5,
                                                logprobs=4, logprobs_mode="processed")
    assert torch.equal(tokens, nexttok.sample(logits, temperature=0.9, top_k=30, seed=5))
    for r in range(3):
        want_ids, want, rank = ref.logprobs(logits[r].numpy(), 0.9, 30, 1.0, 0.0, int(tokens[r]), 4,
                                            True)
        np.testing.assert_array_equal(ids[r].numpy(), want_ids)
        assert int(ranks[r]) == rank
        np.testing.assert_allclose(values[r].numpy(), want, rtol=TOL_REL, atol=TOL_ABS)
    # The registered op (what torch.compile reaches), its schema and fake.
    op = torch.ops.nexttok.sample_logprobs.default
    args = (logits, None, 0.9, None, 30, None, 1.0, None, 0.0, None, 5, None, 0, None, False, 4, True)
    out = op(*args)
    assert all(torch.equal(a, b) for a, b in zip(out, (tokens, ids, values, ranks)))
    torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))
