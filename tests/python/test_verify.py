"""verify_draft and verify_tree against a reference walk written here from
docs/SEMANTICS.md ("Speculative verification"): Philox4x32-10 in Python, the
keep-set of reference.keep_set, probabilities in float64 and Gumbel noise from
float64 logs. Decisions within a margin of their boundary (the library's masses
are fixed-point, its logs fp32) make a request degenerate, and it is skipped.
numpy always; torch (CPU and CUDA) when installed: the torch.library ops and
their fakes under torch.compile, and CUDA-graph replays."""
import math

import numpy as np
import pytest

import nexttok
from conftest import require_device, torch_devices
from reference import keep_set

RNG = np.random.default_rng(61)
MASK32 = 0xFFFFFFFF


# ---- the reference walk --------------------------------------------------------------

def philox(c, k):
    """Philox4x32-10 of counter c (4 words) and key k (2 words)."""
    c0, c1, c2, c3 = c
    k0, k1 = k
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK32, p1 & MASK32, \
            ((p0 >> 32) ^ c3 ^ k1) & MASK32, p0 & MASK32
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return c0, c1, c2, c3


def uniform(seed, offset, tag, block, word):
    w = philox((block, tag, offset & MASK32, offset >> 32), (seed & MASK32, seed >> 32))[word]
    return ((w >> 9) + 0.5) * 2.0 ** -23


def tag(per_request, b, position):
    return 0x80000000 | ((0 if per_request else b) << 12) | position


class Row:
    """One target row: keep-set, probabilities, scores (fp32), greedy argmax."""

    def __init__(self, x, prm, joint):
        t, k, p, m = prm[:4]
        self.greedy = not t > 0 or k == 1 or x.size == 1
        kept, self.degenerate = keep_set(x, t, k, p, m, joint)
        self.kept = sorted(int(i) for i in kept)
        self.empty = not self.kept
        self.argmax = self.kept[0] if self.greedy and self.kept else -1
        self.p = np.zeros(x.size)
        if self.greedy or self.empty:
            return
        s = (np.where(np.isnan(x), -np.inf, x).astype(np.float32) / np.float32(t)).astype(np.float32)
        self.inf_row = bool(np.any(np.isposinf(s)))
        self.s = np.where(np.isposinf(s), 0.0, s).astype(np.float64)
        w = np.exp(self.s[self.kept] - self.s[self.kept].max())
        self.p[self.kept] = w / w.sum()


class Walk:
    def __init__(self, seed, offset, tag_word):
        self.seed, self.offset, self.tag = seed, offset, tag_word
        self.degenerate = False

    def accepts(self, k, lhs_factor, px):
        u = uniform(self.seed, self.offset, self.tag, MASK32 - (k >> 2), k & 3)
        lhs = u * lhs_factor
        if px > 0 and abs(lhs - px) <= 1e-6 * max(lhs, px):
            self.degenerate = True
        return lhs < px

    def gumbel(self, i):
        u = uniform(self.seed, self.offset, self.tag, i >> 2, i & 3)
        return -math.log(-math.log(u))

    def argmax(self, keys):
        """Largest key (ties to the lower index); near-ties are degenerate."""
        if not keys:
            return -1
        ranked = sorted(keys.items(), key=lambda kv: (-kv[1], kv[0]))
        if len(ranked) > 1 and ranked[0][1] - ranked[1][1] <= 1e-4:
            self.degenerate = True
        return ranked[0][0]

    def from_p(self, row, excluded=()):
        return self.argmax({i: row.s[i] + self.gumbel(i) for i in row.kept if i not in excluded})

    def residual(self, row, q):
        keys = {}
        for i in row.kept:
            r = row.p[i] - max(float(q[i]), 0.0)
            if abs(r) <= 1e-6 * row.p[i]:
                self.degenerate = True
            if r > 0:
                keys[i] = math.log(r) + self.gumbel(i)
        return self.argmax(keys)


def reference_chain(target, drafts, cu, probs, width, params, per_request, joint=False):
    """Per request: (tokens, degenerate)."""
    out = []
    td = len(drafts)
    for b in range(len(cu) - 1):
        prm = [p[b] for p in params]
        lo = min(max(int(cu[b]), 0), td)
        n = min(max(int(cu[b + 1]) - lo, 0), min(td - lo, width - 1))
        tokens, bad = [], False
        for j in range(n + 1):
            row = Row(target[lo + b + j], prm, joint)
            walk = Walk(prm[4], prm[5], tag(per_request, b, j))
            bad |= row.degenerate
            if row.empty:
                break
            if row.greedy:
                tokens.append(row.argmax)
                if j < n and int(drafts[lo + j]) == row.argmax:
                    continue
                break
            if j == n:
                tokens.append(walk.from_p(row))
                bad |= walk.degenerate
                break
            x = int(drafts[lo + j])
            q = None if probs is None else probs[lo + j]
            qx = 1.0 if q is None else max(float(q[x]), 0.0)
            if walk.accepts(0, qx, row.p[x]):
                tokens.append(x)
                bad |= walk.degenerate
                continue
            t = walk.residual(row, q) if q is not None else walk.from_p(row, {x})
            if t < 0:
                t = walk.from_p(row)
            tokens.append(t)
            bad |= walk.degenerate
            break
        out.append((tokens, bad))
    return out


def reference_tree(target, cand, nxt, sib, width, params, per_request, joint=False):
    """Per request: (tokens, nodes, degenerate), walking first children and siblings."""
    out = []
    batch, d = cand.shape
    for b in range(batch):
        prm = [p[b] for p in params]
        valid = lambda v: int(v) if 1 <= v < d else -1  # noqa: E731
        tokens, nodes, bad, node = [], [], False, 0
        while True:
            row = Row(target[b * d + node], prm, joint)
            walk = Walk(prm[4], prm[5], tag(per_request, b, node))
            bad |= row.degenerate
            if row.empty:
                break
            if len(tokens) == width - 1:
                tokens.append(row.argmax if row.greedy else walk.from_p(row))
                nodes.append(-1)
                bad |= walk.degenerate
                break
            tried, rejected, accepted = [], 0.0, -1
            child, k = valid(nxt[b, node]), 0
            while child >= 0 and k < d:
                x = int(cand[b, child])
                if row.greedy:
                    if x == row.argmax:
                        accepted = child
                        break
                else:
                    repeated = x in tried
                    px = 0.0 if repeated or not 0 <= x < row.p.size else row.p[x]
                    if walk.accepts(k, 1.0 - rejected, px):
                        accepted = child
                        break
                    if not repeated:
                        tried.append(x)
                        rejected += px
                child, k = valid(sib[b, child]), k + 1
            if accepted >= 0:
                tokens.append(int(cand[b, accepted]))
                nodes.append(accepted)
                node = accepted
                bad |= walk.degenerate
                continue
            t = row.argmax if row.greedy else walk.from_p(row, set(tried))
            if t < 0:
                t = walk.from_p(row)
            tokens.append(t)
            nodes.append(-1)
            bad |= walk.degenerate
            break
        out.append((tokens, nodes, bad))
    return out


# ---- inputs ---------------------------------------------------------------------------

def request_params(batch, greedy_share=0.2):
    t = np.where(RNG.random(batch) < greedy_share, 0.0, RNG.uniform(0.5, 1.5, batch)).astype(np.float32)
    k = np.where(RNG.random(batch) < 0.3, RNG.integers(2, 8, batch), 0).astype(np.int32)
    p = np.where(RNG.random(batch) < 0.3, RNG.uniform(0.5, 0.95, batch), 1.0).astype(np.float32)
    m = np.where(RNG.random(batch) < 0.2, RNG.uniform(0.01, 0.2, batch), 0.0).astype(np.float32)
    seed = RNG.integers(0, 2**63, batch, dtype=np.uint64)
    offset = RNG.integers(0, 2**63, batch, dtype=np.uint64)
    return t, k, p, m, seed, offset


def as_lists(params):
    return [[float(v) if i in (0, 2, 3) else int(v) for v in p] for i, p in enumerate(params)]


def random_chain(batch, vocab, max_draft, with_probs):
    counts = RNG.integers(0, max_draft + 1, batch)
    cu = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    td = int(cu[-1])
    target = (RNG.standard_normal((td + batch, vocab)) * 2.5).astype(np.float32)
    drafts = np.empty(td, np.int32)
    for b in range(batch):
        for j in range(cu[b], cu[b + 1]):
            row = target[j + b]
            drafts[j] = int(np.argmax(row)) if RNG.random() < 0.6 else int(RNG.integers(0, vocab))
    probs = None
    if with_probs:
        probs = np.exp(1.5 * RNG.standard_normal((td, vocab))).astype(np.float32)
        probs /= probs.sum(axis=1, keepdims=True)
    return target, drafts, cu, probs


def random_tree(batch, vocab, nodes):
    target = (RNG.standard_normal((batch * nodes, vocab)) * 2.5).astype(np.float32)
    cand = RNG.integers(0, vocab, (batch, nodes)).astype(np.int64)
    nxt = np.full((batch, nodes), -1, np.int64)
    sib = np.full((batch, nodes), -1, np.int64)
    for b in range(batch):
        last = {}
        for d in range(1, nodes):
            parent = int(RNG.integers(0, d))
            if RNG.random() < 0.4:
                cand[b, d] = int(np.argmax(target[b * nodes + parent]))
            if parent in last:
                sib[b, last[parent]] = d
            else:
                nxt[b, parent] = d
            last[parent] = d
    return target, cand, nxt, sib


def check_rows(out_ids, num, expected, nodes_out=None):
    compared = 0
    for b, exp in enumerate(expected):
        n = int(num[b])
        assert np.all(out_ids[b, n:] == -1), f"request {b}: -1 after the last token"
        if exp[-1]:  # degenerate
            continue
        compared += 1
        assert list(out_ids[b, :n]) == exp[0], f"request {b}"
        if nodes_out is not None:
            assert list(nodes_out[b, :n]) == exp[1], f"request {b}: nodes"
    assert compared * 10 >= 9 * len(expected), "too many degenerate requests"


# ---- numpy --------------------------------------------------------------------------

@pytest.mark.parametrize("with_probs", [False, True])
@pytest.mark.parametrize("vocab", [29, 300])
def test_chain_matches_the_reference_walk(with_probs, vocab):
    batch, max_draft = 20, 4
    target, drafts, cu, probs = random_chain(batch, vocab, max_draft, with_probs)
    params = request_params(batch)
    out_ids, num = nexttok.verify_draft(target, drafts, cu, probs, max_draft, *params)
    assert out_ids.shape == (batch, max_draft + 1) and out_ids.dtype == np.int32
    assert num.shape == (batch,) and num.dtype == np.int32
    check_rows(out_ids, num, reference_chain(target, drafts, cu, probs, max_draft + 1,
                                             as_lists(params), True))


def test_chain_scalar_parameters_and_greedy_argmax_loop():
    batch, vocab, max_draft = 12, 77, 3
    target, drafts, cu, _ = random_chain(batch, vocab, max_draft, False)
    out_ids, num = nexttok.verify_draft(target, drafts, cu, max_draft=max_draft, temperature=0.0)
    for b in range(batch):
        want = []
        for j in range(cu[b + 1] - cu[b] + 1):
            a = int(np.argmax(target[cu[b] + b + j]))
            want.append(a)
            if j == cu[b + 1] - cu[b] or drafts[cu[b] + j] != a:
                break
        assert list(out_ids[b, :num[b]]) == want
    params = [np.full(batch, v) for v in (0.7, 5, 0.9, 0.0)] + [np.full(batch, 99), np.full(batch, 4)]
    out_ids, num = nexttok.verify_draft(target, drafts, cu, None, max_draft, 0.7, 5, 0.9, 0.0, 99, 4)
    check_rows(out_ids, num, reference_chain(target, drafts, cu, None, max_draft + 1,
                                             as_lists(params), False))


@pytest.mark.parametrize("vocab", [17, 200])
def test_tree_matches_the_reference_walk(vocab):
    batch, nodes = 16, 9
    target, cand, nxt, sib = random_tree(batch, vocab, nodes)
    params = request_params(batch)
    for steps in (nodes, 3):
        out_ids, out_nodes, num = nexttok.verify_tree(target, cand, nxt, sib, steps, *params)
        assert out_ids.shape == (batch, steps) and out_nodes.shape == (batch, steps)
        check_rows(out_ids, num, reference_tree(target, cand, nxt, sib, steps, as_lists(params),
                                                True), out_nodes)


def test_tree_first_level_follows_the_target():
    """Many requests over one root row: the first token's frequencies are the
    target's softmax over its top-k, whatever the children."""
    batch, vocab, nodes = 6000, 5, 4
    root = np.array([1.0, 0.2, -0.3, 0.8, -2.0], np.float32)
    target = np.tile(np.concatenate([root[None], RNG.standard_normal((nodes - 1, vocab))]).astype(np.float32), (batch, 1))
    cand = np.tile(np.array([0, 3, 0, 4], np.int64), (batch, 1))
    nxt = np.tile(np.array([1, -1, -1, -1], np.int64), (batch, 1))
    sib = np.tile(np.array([-1, 2, 3, -1], np.int64), (batch, 1))
    seeds = RNG.integers(0, 2**63, batch, dtype=np.uint64)
    out_ids, _, num = nexttok.verify_tree(target, cand, nxt, sib, 2, top_k=4, seed=seeds)
    assert np.all(num >= 1)
    p = np.exp(root[:4] - root.max())
    p /= p.sum()
    freq = np.bincount(out_ids[:, 0], minlength=vocab) / batch
    assert freq[4] == 0
    tv = 0.5 * np.abs(freq[:4] - p).sum()
    assert tv <= 0.5 * math.sqrt(4 / batch) + math.sqrt(math.log(1e6) / (2 * batch))


def test_edge_cases():
    vocab = 33
    target = RNG.standard_normal((5, vocab)).astype(np.float32)
    target[1] = -np.inf  # request 1's first row: nothing to emit
    target[3] = np.nan
    target[3, 7] = 1.0  # only token 7 is finite
    drafts = np.array([5, 9], np.int32)
    cu = np.array([0, 0, 1, 2], np.int32)  # request 0: no drafts
    out_ids, num = nexttok.verify_draft(target[[0, 1, 2, 3, 4]], drafts, cu, max_draft=1, seed=3)
    assert num[0] == 1 and out_ids[0, 1] == -1
    assert num[1] == 0 and np.all(out_ids[1] == -1)
    assert out_ids[2, 0] == 7  # the draft 9 is outside the keep-set {7}
    one = np.zeros((3, 1), np.float32)
    out_ids, num = nexttok.verify_draft(one, np.zeros(2, np.int32), np.array([0, 2], np.int32))
    assert list(num) == [3] and list(out_ids[0]) == [0, 0, 0]


def test_errors_name_the_argument():
    target = np.zeros((5, 10), np.float32)
    drafts = np.zeros(3, np.int32)
    cu = np.array([0, 1, 3], np.int32)
    with pytest.raises(ValueError, match="'target_logits'"):
        nexttok.verify_draft(target[:4], drafts, cu)
    with pytest.raises((TypeError, ValueError), match="'draft_ids'"):
        nexttok.verify_draft(target, drafts.astype(np.int64), cu)
    with pytest.raises(ValueError, match="'draft_probs'"):
        nexttok.verify_draft(target, drafts, cu, np.zeros((3, 9), np.float32))
    with pytest.raises(ValueError, match="'temperature'"):
        nexttok.verify_draft(target, drafts, cu, temperature=float("nan"))
    with pytest.raises(ValueError, match="'temperature'"):
        nexttok.verify_draft(target, drafts, cu, temperature=np.ones(3, np.float32))
    cand = np.zeros((2, 4), np.int64)
    with pytest.raises(ValueError, match="'target_logits'"):
        nexttok.verify_tree(np.zeros((7, 10), np.float32), cand, cand, cand)


# ---- torch ----------------------------------------------------------------------------

@pytest.fixture(params=torch_devices())
def device(request):
    require_device(request.param)
    import torch
    return torch.device(request.param)


def test_torch_ops_equal_numpy_and_compile(device):
    import torch
    batch, vocab, max_draft = 10, 64, 3
    target, drafts, cu, probs = random_chain(batch, vocab, max_draft, True)
    params = request_params(batch)
    want_ids, want_num = nexttok.verify_draft(target, drafts, cu, probs, max_draft, *params)
    tp = [torch.as_tensor(p.astype(np.int64) if p.dtype == np.uint64 else p).to(device) for p in params]
    args = [torch.as_tensor(a).to(device) for a in (target, drafts, cu, probs)]
    out_ids, num = nexttok.verify_draft(*args, max_draft, *tp)
    assert torch.equal(out_ids.cpu(), torch.as_tensor(want_ids))
    assert torch.equal(num.cpu(), torch.as_tensor(want_num))
    ops = nexttok.torch._op
    torch.library.opcheck(ops["verify_draft"], (*args, max_draft + 1, tp[0], 0.0, tp[1], 0, tp[2],
                                                1.0, tp[3], 0.0, tp[4], 0, tp[5], 0, False),
                          test_utils=("test_schema", "test_faketensor"))

    def step(t, d, c, q):
        ids, n = nexttok.verify_draft(t, d, c, q, max_draft, *tp)
        return ids + 1, n

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    ids, n = compiled(*args)
    assert torch.equal(ids - 1, out_ids) and torch.equal(n, num)

    tt, cand, nxt, sib = random_tree(batch, vocab, 6)
    want = nexttok.verify_tree(tt, cand, nxt, sib, 4, *params)
    got = nexttok.verify_tree(*[torch.as_tensor(a).to(device) for a in (tt, cand, nxt, sib)], 4, *tp)
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), torch.as_tensor(w))


def test_torch_cuda_graph_replay_reads_device_seeds(device):
    import torch
    if device.type != "cuda":
        pytest.skip("CUDA graphs")
    batch, vocab, max_draft = 32, 5000, 4
    target, drafts, cu, probs = [torch.as_tensor(a).to(device) for a in random_chain(batch, vocab, max_draft, True)]
    seed = torch.randint(0, 2**62, (batch,), device=device)
    offset = torch.zeros(batch, dtype=torch.int64, device=device)
    out = {}

    def step():
        out["r"] = nexttok.verify_draft(target, drafts, cu, probs, max_draft, temperature=0.8,
                                        top_k=40, top_p=0.9, seed=seed, offset=offset)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(3):
        offset += 1
        graph.replay()
        ids = out["r"][0].clone()
        cpu = nexttok.verify_draft(target.cpu(), drafts.cpu(), cu.cpu(), probs.cpu(), max_draft,
                                   temperature=0.8, top_k=40, top_p=0.9, seed=seed.cpu(),
                                   offset=offset.cpu())
        assert torch.equal(ids.cpu(), cpu[0])
