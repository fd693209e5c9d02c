"""nexttok.compat.flashinfer.chain_speculative_sampling against FlashInfer's
definition, written out here: draft x at position i is accepted while u < p(x)/q(x);
at the first rejection the token is drawn from max(p - q, 0) renormalized (from p
after every draft is accepted), the rest is -1; the emitted counter counts the
accepted drafts, the accepted counter adds an independent test of every later
position. Checked exactly where the inputs make the walk deterministic, and
in distribution (total variation over many requests) elsewhere."""
from collections import defaultdict

import pytest

from conftest import need

torch = need("torch")
from nexttok.compat import flashinfer as fi  # noqa: E402

DRAWS = 20000
chain = fi.chain_speculative_sampling


# ---- FlashInfer's definition ----------------------------------------------------
def acceptance(q, drafts, p):
    """a[i] = P(u * q < p) for u uniform in (0, 1]: min(1, p/q), 1 where q = 0 < p."""
    n = len(drafts)
    out = []
    for i in range(n):
        pi, qi = float(p[i, drafts[i]]), float(q[i, drafts[i]])
        out.append(0.0 if pi <= 0 else 1.0 if qi <= 0 else min(1.0, pi / qi))
    return out


def residual(q, p, k, n):
    r = p[k].double() if k == n else (p[k].double() - q[k].double()).clamp(min=0)
    return r / r.sum()


def reference_walk(q, drafts, p, u):
    """One request under FlashInfer's definition, its uniforms from u():
    (tokens [n+1] with -1 padding, accepted counter, emitted counter)."""
    n = len(drafts)
    tokens = []
    for i in range(n):
        if u() * float(q[i, drafts[i]]) < float(p[i, drafts[i]]):
            tokens.append(drafts[i])
        else:
            break
    k = len(tokens)
    cdf = torch.cumsum(residual(q, p, k, n), 0)
    tokens.append(int(torch.searchsorted(cdf, torch.tensor([u()], dtype=cdf.dtype))[0]))
    accepted = k + sum(u() * float(q[i, drafts[i]]) < float(p[i, drafts[i]])
                       for i in range(k, n))
    return tokens + [-1] * (n - k), accepted, k


def reference_law(q, drafts, p):
    """The exact laws under FlashInfer's definition: per position a dict token ->
    probability (-1: no token there), and the joint law of (emitted, accepted)."""
    n = len(drafts)
    a = acceptance(q, drafts, p)
    positions = [defaultdict(float) for _ in range(n + 1)]
    counters = defaultdict(float)
    reach = 1.0
    for k in range(n + 1):  # k drafts accepted
        pk = reach * (1.0 - a[k] if k < n else 1.0)
        if k < n:
            reach *= a[k]
        if pk == 0:
            continue
        for j in range(k):
            positions[j][drafts[j]] += pk
        for t, pt in enumerate(residual(q, p, k, n).tolist()):
            if pt > 0:
                positions[k][t] += pk * pt
        for j in range(k + 1, n + 1):
            positions[j][-1] += pk
        extra = {0: 1.0}  # independent tests of positions k .. n-1
        for i in range(k, n):
            nxt = defaultdict(float)
            for c, pc in extra.items():
                nxt[c + 1] += pc * a[i]
                nxt[c] += pc * (1 - a[i])
            extra = nxt
        for c, pc in extra.items():
            counters[(k, k + c)] += pk * pc
    return positions, counters


def tv(counts, law):
    total = sum(counts.values())
    keys = set(counts) | set(law)
    return 0.5 * sum(abs(counts.get(x, 0) / total - law.get(x, 0.0)) for x in keys)


def expand(q, drafts, p, batch):
    ids = torch.tensor(drafts, dtype=torch.int32)
    return (q[None].expand(batch, -1, -1).contiguous(), ids[None].expand(batch, -1).contiguous(),
            p[None].expand(batch, -1, -1).contiguous())


def rows(seed, n, vocab, zeros=()):
    """n rows of probabilities over vocab (float32, each summing to 1), with the
    listed (row, token) entries exactly 0."""
    x = torch.softmax(torch.randn(n, vocab, generator=torch.Generator().manual_seed(seed)), -1)
    for r, t in zeros:
        x[r, t] = 0.0
    return x / x.sum(-1, keepdim=True)


def check_padding(out, num_tokens):
    """-1 exactly after each request's tokens, none before."""
    width = out.shape[1]
    after = torch.arange(width)[None, :] >= num_tokens[:, None]
    assert bool((out[after] == -1).all()) and bool((out[~after] >= 0).all())


# ---- exact cases ---------------------------------------------------------------------
def test_flashinfer_docstring_example():
    """FlashInfer's documented example: every uniform gives the same result."""
    q = torch.tensor([[[0.1, 0.2, 0.3, 0.4], [0.2, 0.3, 0.4, 0.1]]])
    drafts = torch.tensor([[2, 1]], dtype=torch.int32)
    p = torch.tensor([[[0.0, 0.1, 0.6, 0.3], [1.0, 0.0, 0.0, 0.0], [0.7, 0.1, 0.1, 0.1]]])
    for s in range(8):
        out, accepted, emitted = chain(q, drafts, p, seed=s, offset=3)
        assert out.dtype == torch.int32 and out.tolist() == [[2, 0, -1]]
        assert accepted.dtype == torch.int32 and accepted.tolist() == [1]
        assert emitted.dtype == torch.int32 and emitted.tolist() == [1]


def test_one_hot_targets_are_deterministic():
    """One-hot target rows: drafts equal to the target's token are accepted, the
    first other one is replaced by the target's token, the bonus is the last
    row's token; every uniform gives the same tokens and counters, the
    reference's."""
    n, vocab, batch = 4, 9, 64
    gen = torch.Generator().manual_seed(1)
    want = torch.randint(0, vocab, (batch, n + 1), generator=gen)
    p = torch.nn.functional.one_hot(want, vocab).float()
    match = torch.rand(batch, n, generator=gen) < 0.7
    other = (want[:, :n] + torch.randint(1, vocab, (batch, n), generator=gen)) % vocab
    drafts = torch.where(match, want[:, :n], other).to(torch.int32)
    q = torch.softmax(torch.randn(batch, n, vocab, generator=gen), -1)  # q < 1: residual e_t
    for seed in (0, 7, torch.arange(batch)):
        off = 0 if isinstance(seed, int) else torch.zeros(batch, dtype=torch.int64)
        out, accepted, emitted = chain(q, drafts, p, seed=seed, offset=off)
        for b in range(batch):
            ids = drafts[b].tolist()
            ref, ref_acc, ref_emit = reference_walk(q[b], ids, p[b], lambda: 0.5)
            assert out[b].tolist() == ref
            assert (accepted[b].item(), emitted[b].item()) == (ref_acc, ref_emit)
            assert ref_acc == int(match[b].sum())  # every independent test is decided
        check_padding(out, emitted.long() + 1)


def test_zero_draft_probs_accept_every_possible_token():
    """q = 0 (target-only drafts): a draft is accepted iff p > 0, the token after
    the first one with p = 0 is drawn from p; the counters are exact."""
    n, vocab, batch = 3, 7, 500
    gen = torch.Generator().manual_seed(2)
    p = torch.softmax(torch.randn(batch, n + 1, vocab, generator=gen), -1)
    drafts = torch.randint(0, vocab, (batch, n), generator=gen, dtype=torch.int32)
    dead = torch.rand(batch, n, generator=gen) < 0.3  # these drafts get p = 0
    at = drafts.long()[:, :, None]
    p[:, :n].scatter_(2, at, p[:, :n].gather(2, at).masked_fill(dead[:, :, None], 0.0))
    p = p / p.sum(-1, keepdim=True)
    q = torch.zeros(batch, n, vocab)
    out, accepted, emitted = chain(q, drafts, p, seed=5, offset=0)
    alive = ~dead
    k = torch.where(dead.any(1), dead.int().argmax(1), torch.full((batch,), n))
    assert torch.equal(emitted.long(), k)
    assert torch.equal(accepted.long(), alive.sum(1))
    for b in range(batch):
        kb = int(k[b])
        assert out[b, :kb].tolist() == drafts[b, :kb].tolist()
        assert p[b, kb, out[b, kb]] > 0  # drawn from p (q = 0), never a zero
    check_padding(out, k + 1)


def test_no_drafts_draws_the_bonus_token():
    """n = 0: one token per request from its only target row; counters 0."""
    p = rows(3, 1, 6, zeros=[(0, 1), (0, 4)])
    q, drafts, target = expand(torch.zeros(0, 6), [], p, DRAWS)
    out, accepted, emitted = chain(q, drafts.reshape(DRAWS, 0), target, seed=9, offset=1)
    assert out.shape == (DRAWS, 1) and out.dtype == torch.int32
    assert not bool(accepted.any()) and not bool(emitted.any())
    counts = defaultdict(int)
    for t in out[:, 0].tolist():
        counts[t] += 1
    assert counts[1] == 0 and counts[4] == 0
    assert tv(counts, {t: float(x) for t, x in enumerate(p[0].tolist()) if x > 0}) < 0.03


def test_empty_batch():
    out, accepted, emitted = chain(torch.zeros(0, 2, 5), torch.zeros(0, 2, dtype=torch.int32),
                                   torch.zeros(0, 3, 5), seed=0, offset=0)
    assert out.shape == (0, 3) and accepted.shape == (0,) and emitted.shape == (0,)


# ---- distributions ----------------------------------------------------------------------
@pytest.mark.parametrize("seeding", ["scalar", "per_request"])
def test_laws_match_flashinfers_definition(seeding):
    """Fixed drafts, every request the same: the token at each position (or -1) and
    the pair (emitted, accepted) follow the exact laws of FlashInfer's definition;
    zero-probability tokens never appear."""
    n, vocab = 3, 6
    p = rows(11, n + 1, vocab, zeros=[(0, 5), (1, 0), (2, 3), (3, 2)])
    q = rows(12, n, vocab)
    # at each position the draft whose acceptance probability is nearest 1/2
    drafts = [min(range(vocab), key=lambda t: abs(acceptance(q[i:i + 1], [t], p[i:i + 1])[0]
                                                  - 0.5)) for i in range(n)]
    a = acceptance(q, drafts, p)
    assert all(0.1 < x < 0.95 for x in a), a  # every branch of the walk is exercised
    dq, dd, dp = expand(q, drafts, p, DRAWS)
    if seeding == "scalar":
        seed, offset = 1234, 5
    else:
        seed = torch.arange(DRAWS, dtype=torch.int64) * 7919 + 3
        offset = torch.full((DRAWS,), 5, dtype=torch.int64)
    out, accepted, emitted = chain(dq, dd, dp, seed=seed, offset=offset)
    positions, counters = reference_law(q, drafts, p)
    for j in range(n + 1):
        counts = defaultdict(int)
        for t in out[:, j].tolist():
            counts[t] += 1
        zero = {t for t in range(vocab) if p[j, t] == 0}
        assert not zero & set(counts), f"position {j} emitted a zero-probability token"
        assert tv(counts, positions[j]) < 0.03, f"position {j}"
    pairs = defaultdict(int)
    for e, c in zip(emitted.tolist(), accepted.tolist()):
        pairs[(e, c)] += 1
    assert tv(pairs, counters) < 0.03
    check_padding(out, emitted.long() + 1)
    assert torch.equal(out[:, :n].ne(-1).sum(1) - (emitted < n).long(), emitted.long())


def test_emitted_tokens_follow_the_target():
    """Drafts drawn from q: the token emitted at each position, among the requests
    that reach it, is distributed as that position's target probabilities."""
    n, vocab = 3, 5
    p = rows(21, n + 1, vocab, zeros=[(0, 1), (1, 4), (3, 0)])
    q = rows(22, n, vocab, zeros=[(2, 2)])
    gen = torch.Generator().manual_seed(23)
    drafts = torch.stack([torch.multinomial(q[i], DRAWS, replacement=True, generator=gen)
                          for i in range(n)], 1).to(torch.int32)
    dq = q[None].expand(DRAWS, -1, -1).contiguous()
    dp = p[None].expand(DRAWS, -1, -1).contiguous()
    out, accepted, emitted = chain(dq, drafts, dp, seed=torch.arange(DRAWS),
                                   offset=torch.zeros(DRAWS, dtype=torch.int64))
    for j in range(n + 1):
        reached = out[:, j][out[:, j] >= 0]
        assert reached.numel() > 2000, f"position {j} reached too rarely"
        counts = torch.bincount(reached.long(), minlength=vocab).double()
        assert not bool(counts[p[j] == 0].any()), f"position {j} emitted a zero-probability token"
        dist = 0.5 * (counts / counts.sum() - p[j].double()).abs().sum()
        assert dist < 0.03, f"position {j}: total variation {dist:.4f}"
    assert bool((accepted >= emitted).all())


# ---- counters, seeds, errors ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_counters_are_added_in_place(dtype):
    n, vocab, batch = 2, 5, 8
    p = rows(31, n + 1, vocab)[None].expand(batch, -1, -1).contiguous()
    q = rows(32, n, vocab)[None].expand(batch, -1, -1).contiguous()
    drafts = torch.zeros(batch, n, dtype=torch.int64)
    _, acc0, emit0 = chain(q, drafts, p, seed=4, offset=0)
    acc = torch.full((batch,), 10, dtype=dtype)
    emit = torch.full((batch,), 20, dtype=dtype)
    out, acc_out, emit_out = chain(q, drafts, p, acc, emit, seed=4, offset=0)
    assert acc_out is acc and emit_out is emit
    assert torch.equal(acc, (acc0 + 10).to(dtype)) and torch.equal(emit, (emit0 + 20).to(dtype))


def test_seeds_reproduce_and_requests_do_not_depend_on_batch_position():
    n, vocab, batch = 3, 50, 6
    gen = torch.Generator().manual_seed(41)
    p = torch.softmax(torch.randn(batch, n + 1, vocab, generator=gen), -1)
    q = torch.softmax(torch.randn(batch, n, vocab, generator=gen), -1)
    drafts = torch.randint(0, vocab, (batch, n), generator=gen, dtype=torch.int32)
    seeds = torch.tensor([5, 9, 5, 123456789012, 0, 31], dtype=torch.int64)
    offsets = torch.tensor([0, 3, 0, 8, 1, 2], dtype=torch.int64)
    first = chain(q, drafts, p, seed=seeds, offset=offsets)
    again = chain(q, drafts, p, seed=seeds, offset=offsets)
    for x, y in zip(first, again):
        assert torch.equal(x, y)
    for b in range(batch):
        alone = chain(q[b:b + 1], drafts[b:b + 1], p[b:b + 1], seed=seeds[b:b + 1],
                      offset=offsets[b:b + 1])
        assert [t[0].tolist() for t in alone] == [t[b].tolist() for t in first]
    g1 = chain(q, drafts, p, generator=torch.Generator().manual_seed(3))
    g2 = chain(q, drafts, p, generator=torch.Generator().manual_seed(3))
    for x, y in zip(g1, g2):
        assert torch.equal(x, y)


def test_errors_name_the_argument():
    q, d, p = torch.rand(2, 3, 5), torch.zeros(2, 3, dtype=torch.int32), torch.rand(2, 4, 5)
    with pytest.raises(ValueError, match="'draft_probs' must be 3-D"):
        chain(q[0], d, p)
    with pytest.raises(ValueError, match="'draft_token_ids' must have shape"):
        chain(q, d[:, :2], p)
    with pytest.raises(ValueError, match="'target_probs' must have shape"):
        chain(q, d, p[:, :3])
    with pytest.raises(ValueError, match="'target_probs' must have shape"):
        chain(q, d, torch.rand(2, 4, 6))
    with pytest.raises(ValueError, match="'draft_token_ids' must be int32 or int64"):
        chain(q, d.float(), p)
    with pytest.raises(ValueError, match="'target_probs' must be a floating-point"):
        chain(q, d, p.int())
    with pytest.raises(TypeError, match="'draft_probs' must be a torch.Tensor"):
        chain(q.tolist(), d, p)
    with pytest.raises(ValueError, match="'maybe_output_accepted_token_num' must be an int32"):
        chain(q, d, p, torch.zeros(3, dtype=torch.int32))
    with pytest.raises(ValueError, match="'maybe_output_emitted_draft_token_num' must be"):
        chain(q, d, p, None, torch.zeros(2))
    with pytest.raises(ValueError, match="'seed' and 'offset' must both be tensors"):
        chain(q, d, p, seed=torch.tensor([1]), offset=0)
