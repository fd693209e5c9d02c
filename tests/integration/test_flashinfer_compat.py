"""nexttok.compat.flashinfer against FlashInfer's definitions, written out here
with sorts (and against FlashInfer itself where it imports on a CUDA machine):
keep-sets, the distribution of the draws, renorm and mask results, outputs'
dtypes and shapes, seeds, indices and the published signatures."""
import inspect

import pytest

from conftest import need

torch = need("torch")
from nexttok.compat import flashinfer as fi  # noqa: E402

DRAWS = 20000


# ---- FlashInfer's definitions, as sorts ---------------------------------------
def order(row):
    """Token ids by value descending, then index ascending."""
    return sorted(range(row.numel()), key=lambda t: (-float(row[t]), t))


def top_k_set(row, k):
    return set(order(row)[:k]) if 0 < k < row.numel() else set(range(row.numel()))


def top_p_set(probs, p, within=None):
    """The shortest prefix by descending probability whose mass reaches p (of the
    mass of `within`, default every token), with the crossing token."""
    ids = [t for t in order(probs) if within is None or t in within]
    total = sum(float(probs[t]) for t in ids)
    kept, mass = set(), 0.0
    for t in ids:
        if mass >= p * total:
            break
        kept.add(t)
        mass += float(probs[t])
    boundary = min(abs(m - p * total) for m in _prefix_masses(probs, ids))
    assert boundary > 1e-5, "degenerate case: a prefix mass lies on the top-p boundary"
    return kept


def _prefix_masses(probs, ids):
    mass = 0.0
    for t in ids:
        mass += float(probs[t])
        yield mass


def min_p_set(probs, m):
    top = float(probs.max())
    assert all(abs(float(x) - m * top) > 1e-6 for x in probs), "degenerate min-p case"
    return {t for t in range(probs.numel()) if float(probs[t]) >= m * top}


def keep_set(probs, top_k=0, top_p=1.0, min_p=0.0, order_mode="top_k_first"):
    kept = top_k_set(probs, top_k)
    if top_p < 1:
        if order_mode == "top_k_first":
            kept = top_p_set(probs, top_p, within=kept)
        else:
            kept = kept & top_p_set(probs, top_p)
    if min_p > 0:
        kept = kept & min_p_set(probs, min_p)
    return kept


def assert_draws_follow(tokens, probs, kept):
    """Every token in the keep-set, and frequencies within sampling error of the
    probabilities renormalized on it (total variation over DRAWS draws)."""
    counts = torch.bincount(tokens.long(), minlength=probs.numel()).double()
    assert set(torch.nonzero(counts).flatten().tolist()) <= kept
    target = torch.zeros_like(probs, dtype=torch.float64)
    ids = torch.tensor(sorted(kept))
    target[ids] = probs.double()[ids] / probs.double()[ids].sum()
    tv = 0.5 * (counts / counts.sum() - target).abs().sum()
    assert tv < 0.03, f"total variation {tv:.4f}"
    for t in kept:  # no kept token of some mass is missing
        if target[t] > 0.01:
            assert counts[t] > 0


def random_logits(seed, vocab=40, scale=2.0):
    return torch.randn(vocab, generator=torch.Generator().manual_seed(seed)) * scale


# ---- sampling ------------------------------------------------------------------
CASES = [  # (top_k, top_p, min_p, filter order)
    (0, 1.0, 0.0, None), (7, 1.0, 0.0, None), (0, 0.7, 0.0, None), (0, 1.0, 0.08, None),
    (12, 0.6, 0.0, "top_k_first"), (12, 0.6, 0.0, "joint"), (5, 0.9, 0.0, "joint"),
    (5, 0.9, 0.0, "top_k_first"), (4, 0.8, 0.0, "top_k_first"),
]


def call(name, x, k, p, m, mode, **kw):
    f = getattr(fi, name)
    if name in ("sampling_from_logits", "sampling_from_probs"):
        return f(x, **kw)
    if name == "top_k_sampling_from_probs":
        return f(x, k, **kw)
    if name == "top_p_sampling_from_probs":
        return f(x, p, **kw)
    if name == "min_p_sampling_from_probs":
        return f(x, m, **kw)
    return f(x, k, p, filter_apply_order=mode, **kw)


def function_for(case, from_logits):
    k, p, m, mode = case
    if mode is not None:
        return "top_k_top_p_sampling_from_" + ("logits" if from_logits else "probs")
    if from_logits:
        return "sampling_from_logits" if (k, p, m) == (0, 1.0, 0.0) else None
    if k:
        return "top_k_sampling_from_probs"
    if p < 1:
        return "top_p_sampling_from_probs"
    if m > 0:
        return "min_p_sampling_from_probs"
    return "sampling_from_probs"


@pytest.mark.parametrize("case,from_logits", [
    (case, from_logits) for case in CASES for from_logits in (False, True)
    if function_for(case, from_logits) is not None])  # FlashInfer's functions of each case
def test_draws_follow_flashinfer_keep_set(case, from_logits):
    name = function_for(case, from_logits)
    k, p, m, mode = case
    logits = random_logits(CASES.index(case) * 2 + from_logits)
    probs = torch.softmax(logits, dim=0)
    x = (logits if from_logits else probs)[None].expand(DRAWS, -1).contiguous()
    tokens = call(name, x, k, p, m, mode, seed=1234, offset=7)
    assert tokens.dtype == torch.int32 and tokens.shape == (DRAWS,)
    assert_draws_follow(tokens, probs, keep_set(probs, k, p, m, mode or "top_k_first"))


def test_per_row_parameters():
    """top_k and top_p as (batch_size,) tensors: each row follows its own keep-set."""
    logits = random_logits(21)
    probs = torch.softmax(logits, dim=0)
    half = DRAWS // 2
    x = probs[None].expand(2 * half, -1).contiguous()
    top_k = torch.tensor([4, 15]).repeat_interleave(half)
    top_p = torch.tensor([0.95, 0.5]).repeat_interleave(half)
    tokens = fi.top_k_top_p_sampling_from_probs(x, top_k, top_p, seed=3, offset=0)
    assert_draws_follow(tokens[:half], probs, keep_set(probs, 4, 0.95))
    assert_draws_follow(tokens[half:], probs, keep_set(probs, 15, 0.5))


def test_probabilities_are_taken_relative_to_the_row_sum():
    """Unnormalized probabilities draw as their normalized values do (same keep-set)."""
    probs = torch.softmax(random_logits(8), dim=0)
    x = probs[None].expand(64, -1).contiguous()
    a = fi.top_p_sampling_from_probs(x, 0.8, seed=5, offset=1)
    b = fi.top_p_sampling_from_probs(x * 3.0, 0.8, seed=5, offset=1)
    assert torch.equal(a, b)


# ---- seeds, offsets and generators ---------------------------------------------
def test_seed_offset_reproduce_and_rows_are_independent():
    logits = torch.randn(64, 500, generator=torch.Generator().manual_seed(2))
    a = fi.top_k_top_p_sampling_from_logits(logits, 50, 0.9, seed=11, offset=4)
    assert torch.equal(a, fi.top_k_top_p_sampling_from_logits(logits, 50, 0.9, seed=11, offset=4))
    assert not torch.equal(a, fi.top_k_top_p_sampling_from_logits(logits, 50, 0.9, seed=11,
                                                                   offset=5))
    same = logits[:1].expand(64, -1).contiguous()  # one row: a scalar seed still varies by row
    assert len(set(fi.sampling_from_logits(same, seed=1, offset=0).tolist())) > 1


def test_per_row_seeds_do_not_depend_on_batch_position():
    logits = torch.randn(6, 300, generator=torch.Generator().manual_seed(4))
    seeds = torch.tensor([5, 9, 5, 123456789012, 0, 31], dtype=torch.int64)
    offsets = torch.tensor([0, 3, 0, 8, 1, 2], dtype=torch.int64)
    batch = fi.top_p_sampling_from_probs(torch.softmax(logits, 1), 0.9, seed=seeds,
                                         offset=offsets)
    for r in range(6):
        alone = fi.top_p_sampling_from_probs(torch.softmax(logits[r:r + 1], 1), 0.9,
                                             seed=seeds[r:r + 1], offset=offsets[r:r + 1])
        assert alone.item() == batch[r].item()
    # rows 0 and 2 share seed and offset but not scores; equal scores would give one token
    twin = fi.sampling_from_logits(logits[[1, 1]], seed=seeds[[1, 1]], offset=offsets[[1, 1]])
    assert twin[0] == twin[1]


def test_length_one_seed_tensor_means_the_int():
    logits = torch.randn(16, 200, generator=torch.Generator().manual_seed(6))
    by_int = fi.sampling_from_logits(logits, seed=77, offset=3)
    by_tensor = fi.sampling_from_logits(logits, seed=torch.tensor([77]), offset=torch.tensor([3]))
    assert torch.equal(by_int, by_tensor)


def test_generator_gives_the_seed_when_none_is_given():
    logits = torch.randn(32, 200, generator=torch.Generator().manual_seed(7))
    a = fi.sampling_from_logits(logits, generator=torch.Generator().manual_seed(99))
    b = fi.sampling_from_logits(logits, generator=torch.Generator().manual_seed(99))
    assert torch.equal(a, b)
    torch.manual_seed(3)
    c = fi.sampling_from_logits(logits)
    torch.manual_seed(3)
    assert torch.equal(c, fi.sampling_from_logits(logits))


def test_seed_errors_name_the_argument():
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(8))
    with pytest.raises(ValueError, match="'seed' and 'offset' must both be tensors"):
        fi.sampling_from_logits(logits, seed=torch.tensor([1]), offset=0)
    with pytest.raises(ValueError, match="'seed' must have length 1 or batch_size = 4"):
        fi.sampling_from_logits(logits, seed=torch.tensor([1, 2]), offset=torch.tensor([0]))
    with pytest.raises(ValueError, match="'offset' must be a 1-D int64 or uint64"):
        fi.sampling_from_logits(logits, seed=torch.tensor([1]), offset=torch.tensor([0.5]))
    with pytest.raises(ValueError, match="'filter_apply_order'"):
        fi.top_k_top_p_sampling_from_logits(logits, 3, 0.5, filter_apply_order="top_p_first")
    with pytest.raises(ValueError, match="'probs' contains NaN"):
        fi.sampling_from_probs(torch.full((2, 3), float("nan")), check_nan=True)
    with pytest.raises(ValueError, match="'probs' must be 2-D"):
        fi.sampling_from_probs(torch.rand(3))


# ---- indices and return_valid ----------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_indices_map_outputs_to_rows(dtype):
    """Row j allows only tokens j*10 .. j*10+9: each output's token names its row."""
    gen = torch.Generator().manual_seed(12)
    probs = torch.zeros(3, 30)
    for j in range(3):
        probs[j, j * 10:(j + 1) * 10] = torch.rand(10, generator=gen) + 0.1
    probs /= probs.sum(1, keepdim=True)
    indices = torch.tensor([2, 0, 0, 1, 2, 1, 1], dtype=dtype)
    for f in (lambda **kw: fi.sampling_from_probs(probs, indices, **kw),
              lambda **kw: fi.top_k_sampling_from_probs(probs, 5, indices, **kw),
              lambda **kw: fi.sampling_from_logits(torch.log(probs), indices, **kw)):
        tokens = f(seed=1, offset=0)
        assert tokens.dtype == dtype and tokens.shape == (7,)
        assert torch.equal(tokens // 10, indices.to(tokens.dtype))


def test_return_valid_marks_rows_without_a_distribution():
    probs = torch.rand(4, 20, generator=torch.Generator().manual_seed(13))
    probs[2] = 0.0
    probs /= probs.sum(1, keepdim=True).clamp_min(1e-30)
    for f in (lambda: fi.sampling_from_probs(probs, return_valid=True, seed=0, offset=0),
              lambda: fi.top_k_top_p_sampling_from_probs(probs, 5, 0.8, return_valid=True,
                                                         seed=0, offset=0),
              lambda: fi.min_p_sampling_from_probs(probs, 0.1, return_valid=True,
                                                   seed=0, offset=0)):
        tokens, valid = f()
        assert valid.dtype == torch.bool and valid.tolist() == [True, True, False, True]
        assert tokens[2] == -1 and bool((tokens[valid] >= 0).all())


# ---- renorm, mask and softmax --------------------------------------------------------
def test_top_k_mask_logits_keeps_the_top_k():
    logits = torch.randn(5, 300, generator=torch.Generator().manual_seed(14))
    k = torch.tensor([1, 10, 0, 299, 300])  # 0 and >= V keep every token
    for kk, dtype in ((k, torch.float32), (17, torch.bfloat16)):
        x = logits.to(dtype)
        out = fi.top_k_mask_logits(x, kk)
        assert out.dtype == dtype and out.shape == x.shape
        for r in range(5):
            kr = int(kk[r]) if isinstance(kk, torch.Tensor) else kk
            keep = torch.zeros(300, dtype=torch.bool)
            keep[list(top_k_set(x[r].float(), kr))] = True
            assert torch.equal(out[r][keep], x[r][keep])
            assert bool(torch.isneginf(out[r][~keep]).all())


def test_top_k_renorm_probs_equals_mask_then_softmax():
    logits = torch.randn(4, 256, generator=torch.Generator().manual_seed(15))
    probs = torch.softmax(logits, 1)
    for k in (3, torch.tensor([1, 8, 50, 255])):
        renorm = fi.top_k_renorm_probs(probs, k)
        via_mask = torch.softmax(fi.top_k_mask_logits(logits, k), 1)
        assert torch.equal(renorm > 0, via_mask > 0)
        assert torch.allclose(renorm, via_mask, rtol=1e-5, atol=1e-7)
        assert torch.allclose(renorm.sum(1), torch.ones(4))
    assert fi.top_k_renorm_probs(probs.half(), 4).dtype == torch.float16


def test_top_p_renorm_probs_keeps_the_nucleus():
    probs = torch.softmax(torch.randn(6, 100, generator=torch.Generator().manual_seed(16)) * 2, 1)
    for top_p in (0.3, torch.tensor([0.1, 0.5, 0.9, 0.99, 1.0, 0.75])):
        out = fi.top_p_renorm_probs(probs, top_p)
        assert out.dtype == torch.float32
        for r in range(6):
            p = float(top_p[r]) if isinstance(top_p, torch.Tensor) else top_p
            kept = top_p_set(probs[r], p) if p < 1 else set(range(100))
            assert set(torch.nonzero(out[r]).flatten().tolist()) == kept
            ids = torch.tensor(sorted(kept))
            assert torch.allclose(out[r, ids], probs[r, ids] / probs[r, ids].sum(), rtol=1e-5)


def test_softmax_with_temperature():
    logits = torch.randn(3, 64, generator=torch.Generator().manual_seed(17)).bfloat16()
    t = torch.tensor([0.5, 1.0, 2.0])
    assert torch.allclose(fi.softmax(logits, t), torch.softmax(logits.float() / t[:, None], 1))
    assert torch.allclose(fi.softmax(logits, 0.7), torch.softmax(logits.float() / 0.7, 1))
    assert fi.softmax(logits).dtype == torch.float32


# ---- the published signatures -----------------------------------------------------
_SEED = [("deterministic", True), ("generator", None), ("check_nan", False), ("seed", None),
         ("offset", None)]
PUBLISHED = {  # FlashInfer's public signatures (flashinfer/sampling.py, commit 01c897d)
    "softmax": [("logits",), ("temperature", None), ("enable_pdl", None)],
    "sampling_from_logits": [("logits",), ("indices", None)] + _SEED,
    "sampling_from_probs": [("probs",), ("indices", None)] + _SEED + [("return_valid", False)],
    "top_p_sampling_from_probs": [("probs",), ("top_p",), ("indices", None)] + _SEED +
                                 [("return_valid", False)],
    "top_k_sampling_from_probs": [("probs",), ("top_k",), ("indices", None)] + _SEED +
                                 [("return_valid", False)],
    "min_p_sampling_from_probs": [("probs",), ("min_p",), ("indices", None)] + _SEED +
                                 [("return_valid", False)],
    "top_k_top_p_sampling_from_logits": [("logits",), ("top_k",), ("top_p",), ("indices", None),
                                         ("filter_apply_order", "top_k_first")] + _SEED,
    "top_k_top_p_sampling_from_probs": [("probs",), ("top_k",), ("top_p",), ("indices", None),
                                        ("filter_apply_order", "top_k_first")] + _SEED +
                                       [("return_valid", False)],
    "top_k_mask_logits": [("logits",), ("top_k",)],
    "top_k_renorm_probs": [("probs",), ("top_k",), ("is_deterministic", False)],
    "top_p_renorm_probs": [("probs",), ("top_p",), ("is_deterministic", False)],
    "chain_speculative_sampling": [("draft_probs",), ("draft_token_ids",), ("target_probs",),
                                   ("maybe_output_accepted_token_num", None),
                                   ("maybe_output_emitted_draft_token_num", None),
                                   ("deterministic", True), ("generator", None), ("seed", None),
                                   ("offset", None)],
}


def params(f):
    return [(p.name,) if p.default is inspect.Parameter.empty else (p.name, p.default)
            for p in inspect.signature(f).parameters.values()]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_signature_is_flashinfers(name):
    assert params(getattr(fi, name)) == PUBLISHED[name]


def test_against_flashinfer_itself():
    """Where FlashInfer imports and a GPU is there: same masks and renorms, same
    keep-sets for the draws."""
    flashinfer = pytest.importorskip("flashinfer.sampling",
                                     reason="FlashInfer is not installed (it needs CUDA)")
    if not torch.cuda.is_available():
        pytest.skip("FlashInfer runs on CUDA only and there is no GPU")
    for name in PUBLISHED:
        ours, theirs = params(getattr(fi, name)), params(getattr(flashinfer, name))
        assert ours == theirs[: len(ours)], name
    gen = torch.Generator().manual_seed(18)
    logits = torch.randn(8, 4096, generator=gen).cuda()
    probs = torch.softmax(logits, 1)
    assert torch.equal(fi.top_k_mask_logits(logits, 20), flashinfer.top_k_mask_logits(logits, 20))
    assert torch.equal(fi.top_k_renorm_probs(probs, 20) > 0,
                       flashinfer.top_k_renorm_probs(probs, 20) > 0)
    assert torch.equal(fi.top_p_renorm_probs(probs, 0.6) > 0,
                       flashinfer.top_p_renorm_probs(probs, 0.6) > 0)
    ours = fi.top_k_top_p_sampling_from_probs(probs, 20, 0.6, seed=1, offset=0)
    keep = flashinfer.top_p_renorm_probs(flashinfer.top_k_renorm_probs(probs, 20), 0.6) > 0
    assert bool(keep.gather(1, ours.long()[:, None]).all())
