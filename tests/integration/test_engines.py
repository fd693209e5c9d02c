"""The SGLang sampler backend and the vLLM plugin: their sampling on CPU tensors
against the engines' rules written out here, their entry points against the
engines' published signatures, and (where the engine imports) registration in
the engine itself; engines that cannot be installed here skip those with the
reason."""
import inspect
import pathlib
import sys
import types

import pytest

from conftest import need

torch = need("torch")
from nexttok.integrations import sglang as nt_sglang  # noqa: E402
from nexttok.integrations import vllm as nt_vllm  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def names(f):
    return list(inspect.signature(f).parameters)


def bitmask_of(allowed):
    """int32 [B, ceil(V/32)] with bit t set where allowed[:, t]."""
    rows, vocab = allowed.shape
    words = (vocab + 31) // 32
    padded = torch.zeros(rows, words * 32, dtype=torch.int64)
    padded[:, :vocab] = allowed.long()
    weights = torch.tensor([1 << j for j in range(32)], dtype=torch.int64)
    packed = (padded.view(rows, words, 32) * weights).sum(-1)
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


def top_set(row, k):
    """Token ids of the k largest entries (values distinct here)."""
    return set(torch.topk(row, k).indices.tolist())


# ---- SGLang ---------------------------------------------------------------------------
# SGLang's published interface (python/sglang/srt/layers/sampler.py, 0.5 line)
SGLANG_FORWARD = ["self", "logits_output", "sampling_info", "return_logprob",
                  "top_logprobs_nums", "token_ids_logprobs", "positions"]
SGLANG_REGISTER = ["backend", "factory"]


def batch_info(rows, vocab, gen, **fields):
    info = dict(temperatures=torch.ones(rows, 1), top_ks=torch.full((rows,), 1 << 30,
                dtype=torch.int32), top_ps=torch.ones(rows), min_ps=torch.zeros(rows),
                vocab_mask=None, sampling_seed=None, is_all_greedy=False)
    info.update(fields)
    return types.SimpleNamespace(**info)


def test_sglang_forward_has_sglangs_signature():
    assert names(nt_sglang.forward) == SGLANG_FORWARD


def test_sglang_batch_honours_mask_filters_and_greedy_rows():
    gen = torch.Generator().manual_seed(30)
    rows, vocab = 6, 300
    logits = torch.randn(rows, vocab, generator=gen) * 3
    allowed = torch.rand(rows, vocab, generator=gen) < 0.5
    allowed[5] = False  # a row with no allowed token
    info = batch_info(rows, vocab, gen,
                      temperatures=torch.tensor([[0.7], [1.0], [1.3], [1.0], [0.9], [1.0]]),
                      top_ks=torch.tensor([1, 5, 1 << 30, 20, 1 << 30, 3], dtype=torch.int32),
                      top_ps=torch.tensor([1.0, 1.0, 0.5, 0.9, 1.0, 1.0]),
                      min_ps=torch.tensor([0.0, 0.0, 0.0, 0.0, 0.2, 0.0]),
                      vocab_mask=bitmask_of(allowed))
    masked = logits.masked_fill(~allowed, float("-inf"))
    for trial in range(20):
        tokens = nt_sglang.sample_batch(logits.clone(), info, positions=None)
        assert tokens.dtype == torch.int32 and tokens.shape == (rows,)
        assert all(bool(allowed[r, tokens[r]]) for r in range(5))
        assert tokens[0] == torch.argmax(masked[0])  # top_k 1: greedy
        assert int(tokens[1]) in top_set(masked[1], 5)
        p4 = torch.softmax(masked[4] / 0.9, 0)
        assert p4[tokens[4]] >= 0.2 * p4.max()  # min-p on the tempered distribution
        assert tokens[5] == 0  # nothing allowed: SGLang's fallback, the argmax of the masked row
    greedy = batch_info(rows, vocab, gen, is_all_greedy=True, vocab_mask=bitmask_of(allowed))
    assert torch.equal(nt_sglang.sample_batch(logits.clone(), greedy)[:5].long(),
                       torch.argmax(masked[:5], 1))


def test_sglang_seeded_requests_do_not_depend_on_the_batch():
    gen = torch.Generator().manual_seed(31)
    logits = torch.randn(5, 400, generator=gen)
    seeds = torch.tensor([11, 12, 13, 14, 15])
    positions = torch.tensor([7, 0, 3, 9, 2])
    info = batch_info(5, 400, gen, sampling_seed=seeds, temperatures=torch.full((5, 1), 1.2))
    tokens = nt_sglang.sample_batch(logits.clone(), info, positions)
    assert torch.equal(tokens, nt_sglang.sample_batch(logits.clone(), info, positions))
    order = torch.tensor([3, 0, 4, 1, 2])
    shuffled = batch_info(5, 400, gen, sampling_seed=seeds[order],
                          temperatures=torch.full((5, 1), 1.2))
    assert torch.equal(nt_sglang.sample_batch(logits[order].clone(), shuffled, positions[order]),
                       tokens[order])
    later = nt_sglang.sample_batch(logits.clone(), info, positions + 1)
    assert not torch.equal(later, tokens)  # the position moves the draw


def test_sglang_logprobs_are_the_tempered_log_softmax():
    gen = torch.Generator().manual_seed(32)
    logits = torch.randn(3, 50, generator=gen)
    info = batch_info(3, 50, gen, temperatures=torch.tensor([[0.5], [1.0], [2.0]]))
    expected = torch.log_softmax(logits / info.temperatures, dim=-1)
    assert torch.allclose(nt_sglang.logprobs_of(logits, info), expected)


def test_sglang_registration():
    sampler = pytest.importorskip("sglang.srt.layers.sampler",
                                  reason="SGLang is not installed (it needs CUDA)")
    assert names(sampler.register_sampler_backend) == SGLANG_REGISTER
    assert names(sampler.Sampler.forward) == SGLANG_FORWARD
    cls = nt_sglang.register()
    assert issubclass(cls, sampler.Sampler)
    assert nt_sglang.BACKEND in sampler._CUSTOM_SAMPLER_FACTORIES


# ---- vLLM ------------------------------------------------------------------------------
# vLLM's published call site (vllm/v1/sample/ops/topk_topp_sampler.py)
VLLM_FLASHINFER_SAMPLE = [("logits",), ("k",), ("p",), ("generators", {})]


def test_vllm_flashinfer_sample_has_vllms_signature():
    params = [(p.name,) if p.default is inspect.Parameter.empty else (p.name, p.default)
              for p in inspect.signature(nt_vllm.flashinfer_sample).parameters.values()]
    assert params == VLLM_FLASHINFER_SAMPLE


def vllm_keep(row, k, p):
    """vLLM's apply_top_k_top_p on one row: top-k, then the top-p nucleus of the
    distribution renormalized on it (smallest prefix reaching p)."""
    ids = torch.argsort(row, descending=True).tolist()
    if k is not None and k < row.numel():
        ids = ids[:k]
    if p is None:
        return set(ids)
    probs = torch.softmax(row[ids].double(), 0).tolist()
    kept, mass = [], 0.0
    for t, q in zip(ids, probs):
        if mass >= p:
            break
        kept.append(t)
        mass += q
    return set(kept)


def test_vllm_flashinfer_sample_keeps_vllms_sets():
    gen = torch.Generator().manual_seed(33)
    rows, vocab = 4, 200
    logits = torch.randn(rows, vocab, generator=gen) * 2
    k = torch.tensor([5, 200, 30, 1], dtype=torch.int32)
    p = torch.tensor([1.0, 0.6, 0.8, 0.5])
    for args in ((k, p), (k, None), (None, p)):
        sets = [vllm_keep(logits[r], None if args[0] is None else int(args[0][r]),
                          None if args[1] is None else float(args[1][r])) for r in range(rows)]
        seen = [set() for _ in range(rows)]
        for _ in range(200):
            tokens = nt_vllm.flashinfer_sample(logits, *args)
            assert tokens.shape == (rows,)
            for r in range(rows):
                seen[r].add(int(tokens[r]))
        for r in range(rows):
            assert seen[r] <= sets[r]
            assert len(seen[r]) > 1 or len(sets[r]) == 1  # draws, not a fixed token


def test_vllm_generators_seed_their_rows():
    logits = torch.randn(3, 500, generator=torch.Generator().manual_seed(34))
    k, p = torch.tensor([100, 100, 100], dtype=torch.int32), torch.tensor([0.95, 0.95, 0.95])
    a = nt_vllm.flashinfer_sample(logits, k, p, {1: torch.Generator().manual_seed(5)})
    b = nt_vllm.flashinfer_sample(logits, k, p, {1: torch.Generator().manual_seed(5)})
    assert a[1] == b[1]
    draws = {int(nt_vllm.flashinfer_sample(logits, k, p, {1: torch.Generator().manual_seed(s)})[1])
             for s in range(20)}
    assert len(draws) > 1


def test_vllm_plugin_entry_point_is_declared():
    if sys.version_info >= (3, 11):
        import tomllib

        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        plugins = project["entry-points"]["vllm.general_plugins"]
        assert plugins == {"nexttok": "nexttok.integrations.vllm:register"}
    from importlib.metadata import entry_points

    found = [e for e in entry_points(group="vllm.general_plugins") if e.name == "nexttok"]
    assert found and found[0].load() is nt_vllm.register


def test_vllm_registration():
    module = pytest.importorskip("vllm.v1.sample.ops.topk_topp_sampler",
                                 reason="vLLM is not installed (it needs CUDA)")
    assert names(module.flashinfer_sample) == [n[0] for n in VLLM_FLASHINFER_SAMPLE]
    nt_vllm.register()
    assert module.flashinfer_sample is nt_vllm.flashinfer_sample
