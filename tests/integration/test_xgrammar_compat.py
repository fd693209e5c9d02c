"""nexttok.compat.xgrammar.apply_token_bitmask_inplace against xgrammar's own
function (its CPU kernel and its torch implementation) and against the rule
written out here, on fresh random logits and bitmasks."""
import pytest

from conftest import need

torch = need("torch")
xgr = need("xgrammar")
from nexttok.compat import xgrammar as compat  # noqa: E402


def random_case(gen, rows, vocab, words, dtype):
    logits = (torch.randn(rows, vocab, generator=gen) * 3).to(dtype)
    bitmask = torch.randint(-(2**31), 2**31, (rows, words), generator=gen, dtype=torch.int64)
    return logits, bitmask.to(torch.int32)


def rule(logits, bitmask, vocab_size, rows):
    """XGrammar's rule with Python loops: -inf where t < vocab_size and the bit is 0."""
    out = logits.clone()
    words = bitmask.view(torch.int32).tolist()
    for r in rows:
        for t in range(vocab_size):
            if not (words[r][t // 32] >> (t % 32)) & 1:
                out[r, t] = float("-inf")
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("vocab,words", [(100, 4), (128, 4), (130, 4), (64, 3), (1000, 32)])
def test_equals_xgrammar_without_indices(dtype, vocab, words):
    gen = torch.Generator().manual_seed(vocab * 7 + words)
    logits, bitmask = random_case(gen, 5, vocab, words, dtype)
    ours, theirs, native = logits.clone(), logits.clone(), logits.clone()
    with pytest.warns(UserWarning) if 32 * words < vocab else _no_warning():
        assert compat.apply_token_bitmask_inplace(ours, bitmask) is None
    with pytest.warns(UserWarning) if 32 * words < vocab else _no_warning():
        xgr.apply_token_bitmask_inplace(theirs, bitmask, backend="cpu")
        xgr.apply_token_bitmask_inplace(native, bitmask, backend="torch_native")
    expected = rule(logits, bitmask, min(vocab, 32 * words), range(5))
    assert torch.equal(ours, expected)
    assert torch.equal(theirs, expected)
    assert torch.equal(native, expected)
    if 32 * words < vocab:  # tokens past the bitmask are left as they were
        assert torch.equal(ours[:, 32 * words:], logits[:, 32 * words:])


class _no_warning:
    def __enter__(self):
        import warnings

        self.w = warnings.catch_warnings()
        self.w.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        self.w.__exit__(*exc)


@pytest.mark.parametrize("vocab_size", [0, 1, 3, 4, 33, 90, 100])
def test_vocab_size_limits_masking(vocab_size):
    gen = torch.Generator().manual_seed(vocab_size + 11)
    logits, bitmask = random_case(gen, 3, 100, 4, torch.float32)
    ours, theirs = logits.clone(), logits.clone()
    compat.apply_token_bitmask_inplace(ours, bitmask, vocab_size=vocab_size)
    xgr.apply_token_bitmask_inplace(theirs, bitmask, vocab_size=vocab_size,
                                    backend="torch_native")
    assert torch.equal(ours, rule(logits, bitmask, vocab_size, range(3)))
    assert torch.equal(ours, theirs)
    if vocab_size >= 4:
        # xgrammar 0.2.9's CPU kernel also masks tokens in [vocab_size, 4) when
        # vocab_size < 4 (its documented rule and torch implementation do not)
        cpu = logits.clone()
        xgr.apply_token_bitmask_inplace(cpu, bitmask, vocab_size=vocab_size, backend="cpu")
        assert torch.equal(ours, cpu)
    assert torch.equal(ours[:, vocab_size:], logits[:, vocab_size:])


@pytest.mark.parametrize("bitmask_rows", [6, 3, 9])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_indices_select_rows(bitmask_rows, as_tensor):
    gen = torch.Generator().manual_seed(bitmask_rows * 3 + as_tensor)
    logits, _ = random_case(gen, 6, 200, 7, torch.float32)
    _, bitmask = random_case(gen, bitmask_rows, 200, 7, torch.float32)
    rows = [2, 0] if bitmask_rows == 3 else [5, 1, 3]
    indices = torch.tensor(rows, dtype=torch.int32) if as_tensor else rows
    ours, theirs = logits.clone(), logits.clone()
    compat.apply_token_bitmask_inplace(ours, bitmask, indices=indices)
    xgr.apply_token_bitmask_inplace(theirs, bitmask, indices=rows, backend="torch_native")
    assert torch.equal(ours, rule(logits, bitmask, 200, rows))
    assert torch.equal(ours, theirs)


def test_one_dimensional_and_strided_rows():
    gen = torch.Generator().manual_seed(5)
    logits, bitmask = random_case(gen, 1, 77, 3, torch.float32)
    row, mask = logits[0].clone(), bitmask[0].clone()
    compat.apply_token_bitmask_inplace(row, mask)
    assert torch.equal(row, rule(logits, bitmask, 77, [0])[0])
    wide = torch.randn(4, 160, generator=gen)
    view = wide[:, :96]  # rows strided by 160
    _, bm = random_case(gen, 4, 96, 3, torch.float32)
    expected = rule(view, bm, 96, range(4))
    compat.apply_token_bitmask_inplace(view, bm)
    assert torch.equal(wide[:, :96], expected)


def test_errors_name_the_argument():
    logits = torch.randn(2, 64, generator=torch.Generator().manual_seed(9))
    before = logits.clone()
    bitmask = torch.zeros(2, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="'bitmask' must be int32"):
        compat.apply_token_bitmask_inplace(logits, bitmask.long())
    with pytest.raises(ValueError, match="'vocab_size'"):
        compat.apply_token_bitmask_inplace(logits, bitmask, vocab_size=65)
    with pytest.raises(ValueError, match="'indices' must be in"):
        compat.apply_token_bitmask_inplace(logits, bitmask, indices=[2])
    with pytest.raises(ValueError, match="'logits' must be 1-D or 2-D"):
        compat.apply_token_bitmask_inplace(logits[None], bitmask)
    with pytest.raises(ValueError, match="one row per logits row"):
        compat.apply_token_bitmask_inplace(logits, bitmask[:1])
    assert torch.equal(logits, before)  # the refused calls wrote nothing


def test_replaces_xgrammar_by_import():
    """Same signature as xgrammar's, less its `backend` choice."""
    import inspect

    ours = inspect.signature(compat.apply_token_bitmask_inplace).parameters
    theirs = inspect.signature(xgr.apply_token_bitmask_inplace).parameters
    assert list(ours) == [p for p in theirs if p != "backend"]
    for name in ours:
        assert ours[name].kind == theirs[name].kind and ours[name].default == theirs[name].default
