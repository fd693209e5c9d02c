"""torch tensors, on the CPU and (when present) CUDA: results against torch's
own ops on materialized logits, the torch.library registration, torch.compile
and CUDA graphs."""
import re

import numpy as np
import pytest

import nexttok
import reference as ref
from conftest import import_torch, require_device, torch_devices

torch = import_torch()
DEVICES = torch_devices()


def assert_topk(values, indices, logits, k, tol):
    """torch.equal to torch.topk of the materialized (float64) logits at every
    position whose score is more than tol * max|logit| from its neighbours
    (closer ones may swap under float32 rounding); values within tol."""
    ref_v, ref_i = torch.topk(logits, k + 1)
    scale = logits.abs().max(dim=1, keepdim=True).values
    gap = (ref_v[:, :-1] - ref_v[:, 1:]) > tol * scale
    ok = gap[:, :k].clone()
    ok[:, 1:] &= gap[:, : k - 1]
    assert ok.float().mean() > 0.5
    assert torch.equal(indices.cpu()[ok.cpu()], ref_i[:, :k].cpu()[ok.cpu()])
    assert ((values.double() - ref_v[:, :k]).abs() <= tol * scale).all()


@pytest.fixture(params=DEVICES)
def device(request):
    require_device(request.param)
    return torch.device(request.param)


def gen(device, seed=0):
    return torch.Generator(device="cpu").manual_seed(seed)


def test_registered_ops():
    ops = torch.ops.nexttok
    for name in ("apply_token_bitmask", "bitmask_from_allowed", "sample", "lm_head_topk_dense",
                 "lm_head_topk_binary", "pack_weights", "quantize_activations"):
        assert hasattr(ops, name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dense_head_equals_topk_of_materialized_logits(device, dtype):
    g = gen(device)
    hidden = torch.randn(8, 512, generator=g).to(device, dtype)
    weight = torch.randn(5000, 512, generator=g).to(device, dtype)
    values, indices = nexttok.lm_head_topk_dense(hidden, weight, k=50)
    assert isinstance(values, torch.Tensor) and values.device.type == device.type
    assert_topk(values, indices, hidden.double() @ weight.double().T, 50, 1e-5)


def test_binary_head_equals_dequantized_reference(device):
    g = gen(device, 1)
    v, h, gs = 3000, 512, 128
    signs = (torch.randint(0, 2, (v, h), generator=g, dtype=torch.int8) * 2 - 1).to(device)
    wq = nexttok.pack_weights(signs)
    wscale = (torch.rand(v, h // gs, generator=g) + 0.5).half().to(device)
    x = torch.randn(4, h, generator=g).to(device)
    act_q, act_scale = nexttok.quantize_activations(x)
    values, indices = nexttok.lm_head_topk_binary(act_q, act_scale, wq, wscale, group_size=gs, k=50)
    dq = (signs.double().view(v, h // gs, gs) * wscale.double()[:, :, None]).view(v, h)
    logits = (act_q.double() @ dq.T) * act_scale.double()[:, None]
    assert_topk(values, indices, logits, 50, 1e-4)


def test_greedy_equals_argmax(device):
    logits = torch.randint(0, 5, (64, 4000), generator=gen(device, 2)).float().to(device)
    assert torch.equal(nexttok.sample(logits, temperature=0.0), torch.argmax(logits, dim=1))
    assert torch.equal(nexttok.sample(logits.bfloat16(), top_k=1),
                       torch.argmax(logits.bfloat16(), dim=1))


def sort_chain_keep(logits, t, k, p, mp):
    """The transformers-style chain with a sort: boolean keep mask [B, V]."""
    s = logits.float() / t
    order = torch.sort(s, dim=1, descending=True, stable=True)
    sv, si = order.values, order.indices
    pos = torch.arange(s.shape[1], device=s.device)
    keep = (pos[None, :] < (k if 0 < k < s.shape[1] else s.shape[1])).expand_as(sv).clone()
    probs = torch.softmax(sv.masked_fill(~keep, -float("inf")).double(), dim=1)
    before = probs.cumsum(dim=1) - probs
    keep &= before < p
    pm = torch.exp(sv.double() - sv[:, :1].double())
    keep &= pm >= mp
    out = torch.zeros_like(keep)
    out.scatter_(1, si, keep)
    return out


@pytest.mark.parametrize("t,k,p,mp", [(0.7, 50, 0.9, 0.0), (1.0, 0, 0.8, 0.05), (1.5, 200, 1.0, 0.0)])
def test_sampled_tokens_lie_in_the_sort_chain_keep_set(device, t, k, p, mp):
    logits = (torch.randn(128, 32000, generator=gen(device, 3)) * 4).to(device)
    keep = sort_chain_keep(logits, t, k, p, mp)
    tokens = nexttok.sample(logits, temperature=t, top_k=k, top_p=p, min_p=mp, seed=5)
    assert keep.gather(1, tokens[:, None]).all()
    # And the same tokens on every backend: the CPU result of the same draw.
    if device.type == "cuda":
        assert torch.equal(tokens.cpu(), nexttok.sample(logits.cpu(), temperature=t, top_k=k,
                                                        top_p=p, min_p=mp, seed=5))


def test_mask_matches_masked_fill(device):
    g = gen(device, 4)
    allowed = (torch.rand(16, 3000, generator=g) < 0.3).to(device)
    mask = nexttok.bitmask_from_allowed(allowed)
    assert mask.dtype == torch.int32 and mask.shape == (16, 94)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        logits = torch.randn(16, 3000, generator=g).to(device, dtype)
        expected = logits.masked_fill(~allowed, -float("inf"))
        out = nexttok.apply_token_bitmask(logits, mask)
        assert out is logits and torch.equal(logits, expected)
    np.testing.assert_array_equal(mask.cpu().numpy(), ref.bitmask_from_allowed(allowed.cpu().numpy()))


def test_per_row_device_parameters(device):
    logits = torch.randn(4, 1000, generator=gen(device, 5)).to(device)
    temps = torch.tensor([0.0, 0.5, 1.0, 2.0], device=device)
    ks = torch.tensor([1, 10, 0, 40], dtype=torch.int32, device=device)
    seeds = torch.arange(4, dtype=torch.int64, device=device) + 7
    offsets = torch.full((4,), 3, dtype=torch.int64, device=device)
    got = nexttok.sample(logits, temperature=temps, top_k=ks, seed=seeds, offset=offsets)
    for r in range(4):
        one = nexttok.sample(logits[r:r + 1], float(temps[r]), int(ks[r]), seed=seeds[r:r + 1],
                             offset=3)
        assert got[r] == one[0]
    # The dispatcher path (what torch.compile and tensor subclasses reach) agrees.
    op = nexttok.torch._op["sample"](logits, temps, 1.0, ks, 0, None, 1.0, None, 0.0, seeds, 0,
                                     offsets, 0, None, False)
    assert torch.equal(op, got)


def test_errors_name_the_argument(device):
    logits = torch.randn(4, 100, device=device)
    with pytest.raises(TypeError, match="'logits'"):
        nexttok.sample(logits.double())
    with pytest.raises(ValueError, match="'temperature'"):
        nexttok.sample(logits, temperature=torch.ones(3, device=device))
    with pytest.raises(ValueError, match="'logits'"):
        nexttok.sample(logits.t())
    with pytest.raises(ValueError, match="'top_p'"):
        nexttok.sample(logits, top_p=2.0)
    with pytest.raises(ValueError, match="'bitmask'"):
        nexttok.apply_token_bitmask(logits, torch.zeros(3, 4, dtype=torch.int32, device=device))
    if device.type == "cuda":
        with pytest.raises(ValueError, match="'bitmask'"):
            nexttok.apply_token_bitmask(logits, torch.zeros(4, 4, dtype=torch.int32))


def test_opcheck(device):
    g = gen(device, 6)
    logits = torch.randn(4, 300, generator=g).to(device)
    mask = torch.randint(-2**31, 2**31 - 1, (4, 10), generator=g, dtype=torch.int32).to(device)
    hidden = torch.randint(-3, 4, (2, 64), generator=g).float().to(device)
    weight = torch.randint(-3, 4, (300, 64), generator=g).float().to(device)
    signs = (torch.randint(0, 2, (300, 64), generator=g, dtype=torch.int8) * 2 - 1).to(device)
    ops = nexttok.torch._op
    cases = [
        ("apply_token_bitmask", (logits.clone(), mask, None)),
        ("bitmask_from_allowed", (logits > 0,)),
        ("sample", (logits, None, 0.0, None, 0, None, 1.0, None, 0.0, None, 0, None, 0, None, False)),
        ("lm_head_topk_dense", (hidden, weight, None, 8)),
        ("pack_weights", (signs,)),
        ("quantize_activations", (hidden,)),
    ]
    for name, args in cases:
        torch.library.opcheck(ops[name], args, test_utils=("test_schema", "test_faketensor"))


# Calls the eager path refuses before launch for an argument that decides an
# output's shape, on the tensors of shape_error_inputs: h, w, q, s, wq, ws.
SHAPE_ERRORS = [
    ("dense k<0", lambda h, w, q, s, wq, ws: nexttok.lm_head_topk_dense(h, w, k=-3)),
    ("dense k=0", lambda h, w, q, s, wq, ws: nexttok.lm_head_topk_dense(h, w, k=0)),
    ("dense k>V", lambda h, w, q, s, wq, ws: nexttok.lm_head_topk_dense(h, w, k=301)),
    ("dense 1-D hidden", lambda h, w, q, s, wq, ws: nexttok.lm_head_topk_dense(h[0], w, k=5)),
    ("dense 1-D weight", lambda h, w, q, s, wq, ws: nexttok.lm_head_topk_dense(h, w[0], k=5)),
    ("binary k<0", lambda h, w, q, s, wq, ws: nexttok.lm_head_topk_binary(q, s, wq, ws,
                                                                          group_size=64, k=-1)),
    ("binary k>V", lambda h, w, q, s, wq, ws: nexttok.lm_head_topk_binary(q, s, wq, ws,
                                                                          group_size=64, k=301)),
    ("binary V=0", lambda h, w, q, s, wq, ws: nexttok.lm_head_topk_binary(q, s, wq[:0], ws[:0],
                                                                          group_size=64, k=1)),
    ("sample 1-D logits", lambda h, w, q, s, wq, ws: nexttok.sample(w[0])),
    ("quantize 1-D x", lambda h, w, q, s, wq, ws: nexttok.quantize_activations(h[0])),
    ("mask 1-D allowed", lambda h, w, q, s, wq, ws: nexttok.bitmask_from_allowed(h[0] > 0)),
    ("pack H % 32", lambda h, w, q, s, wq, ws: nexttok.pack_weights(q[:, :40])),
]


def shape_error_inputs(device):
    g = gen(device, 9)
    return (torch.randn(2, 64, generator=g).to(device),
            torch.randn(300, 64, generator=g).to(device), torch.ones(2, 64, dtype=torch.int8, device=device), torch.ones(2, device=device),
            torch.zeros(300, 2, dtype=torch.int32, device=device),
            torch.ones(300, 1, dtype=torch.float16, device=device))


@pytest.mark.parametrize("call", [c for _, c in SHAPE_ERRORS], ids=[n for n, _ in SHAPE_ERRORS])
def test_fake_kernels_raise_the_eager_errors(device, call):
    """The fake implementations (what torch.compile runs while tracing) refuse
    what the eager call refuses before launch, with the same exception and message."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    inputs = shape_error_inputs(device)
    with pytest.raises((ValueError, TypeError)) as eager:
        call(*inputs)
    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(t) for t in inputs]
        with pytest.raises(type(eager.value)) as fake:
            call(*fakes)
    assert str(fake.value) == str(eager.value)


@pytest.mark.parametrize("k", [-1, 0, 301])
def test_compile_refuses_k_while_tracing(device, k):
    torch._dynamo.reset()
    hidden, weight = shape_error_inputs(device)[:2]
    with pytest.raises(ValueError, match="'k'") as eager:
        nexttok.lm_head_topk_dense(hidden, weight, k=k)
    compiled = []

    def backend(gm, example_inputs):
        compiled.append(gm)
        return gm

    head = torch.compile(lambda h, w: nexttok.lm_head_topk_dense(h, w, k=k), backend=backend,
                         fullgraph=True)
    # dynamo reports an error of a fake kernel as its own (TorchRuntimeError), message kept
    with pytest.raises(Exception, match=re.escape(str(eager.value))):
        head(hidden, weight)
    assert not compiled  # refused by the fake kernel, not by the kernel at run time


def decode_step(hidden, weight, mask, seeds, offset):
    logits = hidden @ weight.T
    nexttok.apply_token_bitmask(logits, mask)
    return nexttok.sample(logits, temperature=0.8, top_k=40, top_p=0.9, seed=seeds, offset=offset)


def test_compile_fullgraph(device):
    torch._dynamo.reset()
    g = gen(device, 7)
    hidden = torch.randn(4, 64, generator=g).to(device)
    weight = torch.randn(1000, 64, generator=g).to(device)
    mask = torch.randint(-2**31, 2**31 - 1, (4, 32), generator=g, dtype=torch.int32).to(device)
    seeds = torch.arange(4, device=device)
    offset = torch.zeros(4, dtype=torch.int64, device=device)
    compiled = torch.compile(decode_step, fullgraph=True)
    for step in range(3):
        assert torch.equal(compiled(hidden, weight, mask, seeds, offset + step),
                           decode_step(hidden, weight, mask, seeds, offset + step))
    head = torch.compile(lambda h, w: nexttok.lm_head_topk_dense(h, w, k=5), fullgraph=True)
    assert torch.equal(head(hidden, weight)[1], nexttok.lm_head_topk_dense(hidden, weight, k=5)[1])


def test_cuda_graph_replay_reads_device_seeds_and_offsets(device):
    if device.type != "cuda":
        pytest.skip("CUDA graphs")
    g = gen(device, 8)
    hidden = torch.randn(8, 128, generator=g).to(device)
    weight = torch.randn(4000, 128, generator=g).to(device)
    mask = torch.randint(-2**31, 2**31 - 1, (8, 125), generator=g, dtype=torch.int32).to(device)
    seeds = torch.arange(8, device=device) * 1000
    offset = torch.zeros(8, dtype=torch.int64, device=device)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            decode_step(hidden, weight, mask, seeds, offset)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tokens = decode_step(hidden, weight, mask, seeds, offset)
    seen = set()
    for step in range(5):
        offset.fill_(step)
        graph.replay()
        expected = decode_step(hidden, weight, mask, seeds, offset)
        assert torch.equal(tokens, expected)
        seen.add(tuple(tokens.tolist()))
    assert len(seen) > 1  # the offsets changed the draws: read at replay, not frozen
