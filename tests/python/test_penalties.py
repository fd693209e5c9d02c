"""apply_penalties and apply_logit_bias against vLLM's dense formulation written
here (bincount of the padded ids into [B, V + 1], masks, then masked arithmetic,
each step rounded to the logits' dtype) and an entry-by-entry logit bias; numpy
always, torch (CPU and CUDA) when installed: the torch.library registration,
torch.compile and CUDA-graph replays reading per-row device tensors."""
import numpy as np
import pytest

import nexttok
from conftest import require_device, torch_devices

RNG = np.random.default_rng(37)


# ---- the references -------------------------------------------------------------------

def padded(offsets, ids, rows, vocab):
    """A CSR list as vLLM's padded [B, L] token tensor: pad (and ids outside [0, V)) = V.
    Offsets are read as the device reads them: clamped to [0, N], decreasing = empty."""
    n = len(ids)
    rows_ids = []
    for b in range(rows):
        lo = min(max(int(offsets[b]), 0), n)
        hi = min(max(int(offsets[b + 1]), lo), n)
        rows_ids.append([int(t) if 0 <= t < vocab else vocab for t in ids[lo:hi]])
    width = max([len(r) for r in rows_ids] + [1])
    out = np.full((rows, width), vocab, dtype=np.int64)
    for b, r in enumerate(rows_ids):
        out[b, :len(r)] = r
    return out


def bin_counts(tokens, rows, vocab):
    """vLLM's get_token_bin_counts_and_mask: scatter-add into [B, V + 1], drop the pad."""
    counts = np.zeros((rows, vocab + 1), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(rows), tokens.shape[1]), tokens.ravel()), 1)
    return counts[:, :vocab], counts[:, :vocab] > 0


def dense_penalties(logits, prompt, output, r, p, f):
    """numpy: logits f32/f16 [B, V]; lists (offsets, ids) or None; r, p, f per row."""
    rows, vocab = logits.shape
    dt = logits.dtype
    r = np.asarray(r, np.float32).reshape(rows, 1)
    p = np.asarray(p, np.float32).reshape(rows, 1)
    f = np.asarray(f, np.float32).reshape(rows, 1)
    none = (np.zeros(rows + 1, np.int64), np.zeros(0, np.int32))
    _, prompt_mask = bin_counts(padded(*(prompt or none), rows, vocab), rows, vocab)
    counts, output_mask = bin_counts(padded(*(output or none), rows, vocab), rows, vocab)

    def step(y):  # rounded to the logits' dtype after every step
        return y.astype(dt).astype(np.float32)

    x = logits.astype(np.float32)
    with np.errstate(all="ignore"):
        penalized = prompt_mask | output_mask
        x = np.where(penalized & (r != 1), step(np.where(x > 0, x / r, x * r)), x)
        x = np.where(output_mask & (f != 0), step(x - f * counts.astype(np.float32)), x)
        x = np.where(output_mask & (p != 0), step(x - p), x)
    out = x.astype(dt)
    return np.where(np.isnan(logits), logits, out)  # NaN logits keep their bits


def entrywise_bias(logits, tokens, values):
    rows, vocab = logits.shape
    out = logits.copy()
    offsets, ids = tokens
    n = len(ids)
    for b in range(rows):
        lo = min(max(int(offsets[b]), 0), n)
        hi = min(max(int(offsets[b + 1]), lo), n)
        for i in range(lo, hi):
            t = int(ids[i])
            if 0 <= t < vocab and not np.isnan(logits[b, t]):
                out[b, t] = (np.float32(out[b, t]) + np.float32(values[i])).astype(logits.dtype)
    return out


# ---- inputs ---------------------------------------------------------------------------

def random_lists(rows, vocab, mean, shared=None, offsets_dtype=np.int32):
    lengths = [0 if RNG.random() < 0.2 else int(RNG.integers(0, 2 * mean + 1)) for _ in range(rows)]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(offsets_dtype)
    ids = RNG.integers(0, vocab, size=int(offsets[-1])).astype(np.int32)
    hot = RNG.integers(0, vocab, size=3)
    for i in range(len(ids)):
        u = RNG.random()
        if u < 0.03:
            ids[i] = RNG.choice([-1, vocab, vocab + 5, -(2**31), 2**31 - 1])
        elif u < 0.3:
            ids[i] = RNG.choice(hot)
        elif u < 0.5 and shared is not None and len(shared[1]):
            ids[i] = RNG.choice(shared[1])
    return offsets, ids


def random_logits(rows, vocab, dtype):
    x = (RNG.standard_normal((rows, vocab)) * 3).astype(np.float32)
    x[RNG.random((rows, vocab)) < 0.01] = np.inf
    x[RNG.random((rows, vocab)) < 0.01] = -np.inf
    x[RNG.random((rows, vocab)) < 0.01] = np.nan
    return x.astype(dtype)


def same_bits(a, b):
    view = np.uint32 if a.dtype == np.float32 else np.uint16
    np.testing.assert_array_equal(a.view(view), b.view(view))


# ---- numpy --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("vocab", [1, 33, 1000])
def test_penalties_equal_the_dense_formulation(dtype, per_row, vocab):
    rows = 6
    logits = random_logits(rows, vocab, dtype)
    prompt = random_lists(rows, vocab, 30, offsets_dtype=np.int64)
    output = random_lists(rows, vocab, 15, shared=prompt)
    if per_row:
        r = RNG.uniform(0.5, 2.0, rows).astype(np.float32)
        p = RNG.uniform(-1, 1, rows).astype(np.float32)
        f = RNG.uniform(-1, 1, rows).astype(np.float32)
        r[0], p[1], f[2] = 1.0, 0.0, 0.0
    else:
        r, p, f = 1.3, 0.4, -0.25
    expected = dense_penalties(logits, prompt, output, np.broadcast_to(r, rows),
                               np.broadcast_to(p, rows), np.broadcast_to(f, rows))
    out = nexttok.apply_penalties(logits, prompt, output, repetition=r, presence=p, frequency=f)
    assert out is logits
    same_bits(logits, expected)


def test_penalties_absent_lists_strided_rows_and_neutral_parameters():
    wide = random_logits(5, 90, np.float32)
    logits = wide[:, :70]  # row stride 90: the gap stays
    gap = wide[:, 70:].copy()
    prompt = random_lists(5, 70, 20)
    before = logits.copy()
    nexttok.apply_penalties(logits, prompt, None, repetition=1.0, presence=0.5)  # no output: no-op
    same_bits(logits, before)
    nexttok.apply_penalties(logits, prompt, None, repetition=0.7)
    same_bits(logits, dense_penalties(before, prompt, None, [0.7] * 5, [0] * 5, [0] * 5))
    np.testing.assert_array_equal(wide[:, 70:], gap)
    before = logits.copy()
    nexttok.apply_penalties(logits)  # nothing at all
    nexttok.apply_penalties(logits, repetition=0.7, presence=0.5)  # no lists
    nexttok.apply_penalties(logits, None, prompt, presence=0.0, frequency=0.0)  # neutral
    same_bits(logits, before)
    np.testing.assert_array_equal(wide[:, 70:], gap)


def test_penalties_offsets_that_are_not_a_csr():
    logits = random_logits(4, 300, np.float16)
    ids = RNG.integers(0, 300, size=50).astype(np.int32)
    prompt = (np.array([-4, 30, 10, 49, 400], np.int64), ids)  # negative, decreasing, past N
    output = (np.array([5, 3, 50, 60, 2**40], np.int64), ids)
    expected = dense_penalties(logits, prompt, output, [1.5] * 4, [0.25] * 4, [0.5] * 4)
    nexttok.apply_penalties(logits, prompt, output, repetition=1.5, presence=0.25, frequency=0.5)
    same_bits(logits, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_logit_bias_adds_in_entry_order(dtype):
    rows, vocab = 5, 500
    logits = random_logits(rows, vocab, dtype)
    tokens = random_lists(rows, vocab, 40)
    values = np.where(RNG.random(len(tokens[1])) < 0.5, RNG.uniform(-300, 300, len(tokens[1])),
                      RNG.uniform(-0.02, 0.02, len(tokens[1]))).astype(np.float32)
    expected = entrywise_bias(logits, tokens, values)
    out = nexttok.apply_logit_bias(logits, tokens, values)
    assert out is logits
    same_bits(logits, expected)


ERRORS = [
    ("prompt not a pair", TypeError, "'prompt'", lambda l, o, i: nexttok.apply_penalties(l, prompt=o)),
    ("offsets length", ValueError, "'prompt.offsets'",
     lambda l, o, i: nexttok.apply_penalties(l, prompt=(o[:-1], i), repetition=1.2)),
    ("ids int64", TypeError, "'output.ids'",
     lambda l, o, i: nexttok.apply_penalties(l, output=(o, i.astype(np.int64)), presence=1.0)),
    ("offsets float", TypeError, "'output.offsets'",
     lambda l, o, i: nexttok.apply_penalties(l, output=(o.astype(np.float32), i))),
    ("repetition 0", ValueError, "'repetition'",
     lambda l, o, i: nexttok.apply_penalties(l, prompt=(o, i), repetition=0.0)),
    ("presence nan", ValueError, "'presence'",
     lambda l, o, i: nexttok.apply_penalties(l, output=(o, i), presence=float("nan"))),
    ("frequency per-row length", ValueError, "'frequency'",
     lambda l, o, i: nexttok.apply_penalties(l, output=(o, i), frequency=np.ones(2, np.float32))),
    ("bias tokens None", TypeError, "'tokens'", lambda l, o, i: nexttok.apply_logit_bias(l, None, i)),
    ("bias values length", ValueError, "'values'",
     lambda l, o, i: nexttok.apply_logit_bias(l, (o, i), np.ones(3, np.float32))),
    ("bias values dtype", TypeError, "'values'",
     lambda l, o, i: nexttok.apply_logit_bias(l, (o, i), np.ones(len(i), np.float64))),
    ("logits 1-D", ValueError, "'logits'", lambda l, o, i: nexttok.apply_penalties(l[0], (o, i))),
]


@pytest.mark.parametrize("case", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_argument_and_leave_the_logits(case):
    _, kind, name, call = case
    logits = random_logits(3, 40, np.float32)
    before = logits.copy()
    offsets, ids = np.array([0, 2, 2, 6], np.int32), np.array([1, 2, 3, 4, 5, 6], np.int32)
    with pytest.raises(kind, match=name):
        call(logits, offsets, ids)
    same_bits(logits, before)


# ---- torch ----------------------------------------------------------------------------

TORCH_DEVICES = torch_devices()


@pytest.fixture(params=TORCH_DEVICES)
def device(request):
    require_device(request.param)
    import torch
    return torch.device(request.param)


def torch_lists(lists, device):
    import torch
    return tuple(torch.as_tensor(a).to(device) for a in lists)


def vllm_penalties_torch(logits, prompt, output, r, p, f):
    """vLLM's apply_penalties in torch, each op computed in fp32 and stored in the
    logits' dtype; masked so that tokens outside both lists keep their bits."""
    import torch
    rows, vocab = logits.shape
    dev = logits.device

    def bins(lists):
        tokens = torch.as_tensor(padded(*[a.cpu().numpy() for a in lists], rows, vocab), device=dev)
        counts = torch.zeros((rows, vocab + 1), dtype=torch.long, device=dev)
        counts.scatter_add_(1, tokens, torch.ones_like(tokens))
        return counts[:, :vocab], counts[:, :vocab] > 0

    _, prompt_mask = bins(prompt)
    counts, output_mask = bins(output)
    r, p, f = r[:, None], p[:, None], f[:, None]
    x = logits.clone()
    rep = torch.where(x > 0, x.float() / r, x.float() * r).to(x.dtype)
    x = torch.where((prompt_mask | output_mask) & (r != 1), rep, x)
    x = torch.where(output_mask & (f != 0), (x.float() - f * counts.float()).to(x.dtype), x)
    x = torch.where(output_mask & (p != 0), (x.float() - p).to(x.dtype), x)
    return x


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_penalties_and_bias(device, dtype):
    import torch
    dt = getattr(torch, dtype)
    rows, vocab = 8, 3000
    logits = (torch.randn(rows, vocab, generator=torch.Generator().manual_seed(3)) * 3).to(device, dt)
    prompt = torch_lists(random_lists(rows, vocab, 60, offsets_dtype=np.int64), device)
    output = torch_lists(random_lists(rows, vocab, 20), device)
    r = torch.rand(rows, device=device) + 0.5
    p = torch.rand(rows, device=device) - 0.5
    f = torch.rand(rows, device=device)
    expected = vllm_penalties_torch(logits, prompt, output, r, p, f)
    out = nexttok.apply_penalties(logits, prompt, output, repetition=r, presence=p, frequency=f)
    assert out is logits and torch.equal(logits, expected)
    # scalars, and the dispatcher path (what torch.compile and subclasses reach)
    again = logits.clone()
    nexttok.torch._op["apply_penalties"](again, *prompt, *output, None, 1.2, None, 0.3, None, 0.1)
    nexttok.apply_penalties(logits, prompt, output, repetition=1.2, presence=0.3, frequency=0.1)
    assert torch.equal(again, logits)

    tokens = torch_lists(random_lists(rows, vocab, 10), device)
    values = torch.randn(len(tokens[1]), device=device)
    before = logits.clone()
    assert nexttok.apply_logit_bias(logits, tokens, values) is logits
    if dt != torch.bfloat16:  # numpy has no bfloat16
        expected = entrywise_bias(before.cpu().numpy(), [a.cpu().numpy() for a in tokens],
                                  values.cpu().numpy())
        same_bits(logits.cpu().numpy(), expected)
    cpu = before.cpu()  # and the same bits as the CPU backend
    nexttok.apply_logit_bias(cpu, tuple(a.cpu() for a in tokens), values.cpu())
    assert torch.equal(logits.cpu(), cpu)


def test_torch_opcheck_and_compile(device):
    import torch
    rows, vocab = 4, 500
    logits = torch.randn(rows, vocab, device=device)
    prompt = torch_lists(random_lists(rows, vocab, 20), device)
    output = torch_lists(random_lists(rows, vocab, 10), device)
    r = torch.full((rows,), 1.3, device=device)
    ops = nexttok.torch._op
    torch.library.opcheck(ops["apply_penalties"], (logits.clone(), *prompt, *output, r, 1.0, None,
                                                   0.5, None, 0.25),
                          test_utils=("test_schema", "test_faketensor"))
    values = torch.randn(len(output[1]), device=device)
    torch.library.opcheck(ops["apply_logit_bias"], (logits.clone(), *output, values),
                          test_utils=("test_schema", "test_faketensor"))

    def step(x, r):
        nexttok.apply_logit_bias(x, output, values)
        nexttok.apply_penalties(x, prompt, output, repetition=r, presence=0.5, frequency=0.25)
        return x.argmax(dim=1)

    torch._dynamo.reset()
    # aot_eager: traced whole through the fake implementations, without inductor's
    # CPU code (built with -ffast-math, which would flush subnormals for the rest
    # of the process and break later tests)
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    a, b = logits.clone(), logits.clone()
    assert torch.equal(compiled(a, r), step(b, r))
    assert torch.equal(a, b)


def test_torch_cuda_graph_replay_reads_device_parameters_and_ids(device):
    import torch
    if device.type != "cuda":
        pytest.skip("CUDA graphs")
    rows, vocab = 16, 20000
    pristine = torch.randn(rows, vocab, device=device) * 2
    logits = pristine.clone()
    prompt = torch_lists(random_lists(rows, vocab, 400), device)
    output = torch_lists(random_lists(rows, vocab, 50), device)
    tokens = torch_lists(random_lists(rows, vocab, 8), device)
    values = torch.randn(len(tokens[1]), device=device)
    r = torch.full((rows,), 1.2, device=device)
    p = torch.zeros(rows, device=device)
    f = torch.full((rows,), 0.3, device=device)

    def step():
        logits.copy_(pristine)
        nexttok.apply_logit_bias(logits, tokens, values)
        nexttok.apply_penalties(logits, prompt, output, repetition=r, presence=p, frequency=f)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for k in range(3):
        r.uniform_(0.5, 2.0)
        p.uniform_(-1.0, 1.0)
        output[1][k::5] = (output[1][k::5] + 17) % vocab  # new output tokens, same shapes
        graph.replay()
        replayed = logits.clone()
        step()
        assert torch.equal(replayed, logits)
        cpu = pristine.cpu().clone()  # a copy on every device: the reference is updated in place
        nexttok.apply_logit_bias(cpu, tuple(a.cpu() for a in tokens), values.cpu())
        nexttok.apply_penalties(cpu, tuple(a.cpu() for a in prompt), tuple(a.cpu() for a in output),
                                repetition=r.cpu(), presence=p.cpu(), frequency=f.cpu())
        assert torch.equal(replayed.cpu(), cpu)
