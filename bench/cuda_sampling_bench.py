#!/usr/bin/env python3
"""W3 (logits -> token), W3u's explicit draws, W3r's logprobs rows and W4
(grammar bitmask) on a CUDA GPU: nexttok (the Python package, on torch
tensors) against the PyTorch baselines of BENCH.md, timed in the same process
on the same inputs (method: bench/_common.py). The logprobs rows (n = 20, raw
and processed) take as baseline nexttok's own sample row of the same shape and
per-row parameters without logprobs.

  PYTHONPATH=build/python python3 bench/cuda_sampling_bench.py [--check] [--json out.json]
      [--xgrammar DIR]

--xgrammar DIR times the W4 rows against XGrammar's CUDA bitmask kernel instead of torch
(DIR/kernels/apply_token_bitmask_inplace_cuda.py of an installed or unpacked
xgrammar package, e.g. `pip install --no-deps xgrammar-*.whl`; the file is
loaded alone, so the package's tokenizer dependencies are not needed, and its
kernel is compiled by torch on first use), after checking that both ops mask
the same logits to the same bits.

--check first verifies, on a few batches, that greedy tokens equal torch.argmax,
that sampled tokens lie in the keep-set of a sort-based reference, that tokens
equal the CPU backend's bit for bit, that repeated calls are bitwise equal, and
that the mask ops equal torch's, and that sample with logprobs returns the
tokens of the call without them and the CPU backend's ids and ranks (values
within 1e-5 + 2^-24 |v|).
"""
import sys

import torch

import nexttok
from _common import Checks, Rows, cuda_device, make_logits, parser, rotation_copies

# (name, T, top_k, top_p, min_p); "mixed" is per-row (MIXED_ROWS cycled over the batch).
CONFIGS = [("greedy", 0.0, 0, 1.0, 0.0), ("plain T=0.7", 0.7, 0, 1.0, 0.0),
           ("top-k 50", 0.7, 50, 1.0, 0.0), ("top-p 0.9", 0.7, 0, 0.9, 0.0),
           ("k50+p0.9+min-p 0.05", 0.7, 50, 0.9, 0.05), ("mixed per-row", None, None, None, None)]
MIXED_ROWS = [(0.0, 0, 1.0, 0.0), (0.7, 0, 1.0, 0.0), (0.7, 50, 1.0, 0.0), (0.7, 0, 0.9, 0.0),
              (0.7, 50, 0.9, 0.05), (1.0, 0, 1.0, 0.1)]
SHAPES = [(1, 128256), (64, 128256), (256, 128256), (256, 248320), (1024, 32000)]
# W3c (issue 37 part 1: every row pays for its own class): the classes as
# scalars, the same values as per-row tensors, and the mixed batch of a quarter
# greedy, a quarter top-p only, a quarter top-k only and the rest k50+p0.9
# (cycled over the rows), each timed against the scalar k50+p0.9 row on the
# same inputs; the closing table sets each against its target. B = 8 is the
# largest batch the CUDA sampler runs as one cluster launch a row.
CLASS_CONFIGS = [("k50+p0.9", 0.7, 50, 0.9, 0.0), ("greedy", 0.0, 0, 1.0, 0.0),
                 ("top-k 50", 0.7, 50, 1.0, 0.0), ("top-p 0.9", 0.7, 0, 0.9, 0.0)]
QUARTER_ROWS = [c[1:] for c in CLASS_CONFIGS[1:]] + [CLASS_CONFIGS[0][1:]]
CLASS_SHAPES = [(1, 128256), (8, 128256), (64, 128256), (256, 128256), (64, 248320), (256, 248320)]
# W3u: explicit draws (uniform=, one u per row), each against the same row's
# Gumbel draw. Without a top-k an explicit draw takes the general filtered scan
# (1,024 candidates a chunk), and the exact fallback where its keep-set passes
# them.
EXPLICIT_CONFIGS = [CONFIGS[1], CONFIGS[3], CONFIGS[4]]
EXPLICIT_SHAPES = [(1, 128256), (256, 128256)]
# W3r's logprobs rows: k50+p0.9 with every parameter a per-row tensor.
LOGPROB_CONFIG = ("k50+p0.9", 0.7, 50, 0.9, 0.0)
LOGPROB_SHAPES = [(256, 128256), (1, 128256)]
# Top-p without top-k: a row whose nucleus passes the LIST_KEEP candidates a
# chunk keeps (the CUDA scan's list; kNucleusCandidates in
# src/cuda/sample_common.cuh, which this must follow) takes the flagged-row
# kernel, and one such row makes its whole batch pay for that kernel; the W3
# and W3c rows of that class print how many rows of each input do (and keep it
# in the JSON).
LIST_KEEP = 64


def rows_past_list(copies, cfg):
    """For each input, the rows whose top-p nucleus (cfg's T and top_p, no
    top-k) holds more than LIST_KEEP tokens; None for other configs."""
    _, temperature, top_k, top_p, _ = cfg
    if temperature is None or temperature == 0.0 or top_k or top_p >= 1.0:
        return None
    counts = []
    for x in copies:
        p = torch.softmax(x.float() / temperature, dim=-1)
        counts.append(int((torch.topk(p, LIST_KEEP, dim=-1).values.sum(-1) < top_p).sum()))
    return counts


def note_rows_past_list(rows_out, copies, cfg):
    counts = rows_past_list(copies, cfg)
    if counts is not None and rows_out.rows and "error" not in rows_out.rows[-1]:
        rows_out.rows[-1]["rows_past_list"] = counts
        print(f"{'':<55} rows past {LIST_KEEP} candidates in each input: {counts}", flush=True)


class RowParams:
    """A batch's sampling parameters: per-row tensors (all rows, for the torch
    baseline and the reference) and what nexttok gets: the tensors for a mixed
    batch, scalars otherwise. Seeds and offsets are per-row tensors always."""

    def __init__(self, cfg, rows, device, mix=MIXED_ROWS):
        table = ([mix[r % len(mix)] for r in range(rows)] if cfg[1] is None
                 else [cfg[1:]] * rows)
        self.per_row = cfg[1] is None
        self.scalar = table[0]
        self.t = torch.tensor([x[0] for x in table], dtype=torch.float32, device=device)
        self.k = torch.tensor([x[1] for x in table], dtype=torch.int32, device=device)
        self.p = torch.tensor([x[2] for x in table], dtype=torch.float32, device=device)
        self.m = torch.tensor([x[3] for x in table], dtype=torch.float32, device=device)
        self.seed = torch.randint(0, 2**62, (rows,), dtype=torch.int64, device=device)
        self.offset = torch.randint(0, 2**20, (rows,), dtype=torch.int64, device=device)

    def to(self, device):
        other = RowParams.__new__(RowParams)
        other.__dict__.update(self.__dict__)
        for name in ("t", "k", "p", "m", "seed", "offset"):
            setattr(other, name, getattr(self, name).to(device))
        return other

    def sample(self, logits, uniform=None, joint=False, **logprobs):
        """nexttok.sample of these parameters on `logits` (logprobs=, logprobs_mode=)."""
        t, k, p, m = (self.t, self.k, self.p, self.m) if self.per_row else self.scalar
        return nexttok.sample(logits, t, k, p, m, seed=self.seed, offset=self.offset,
                              uniform=uniform, joint=joint, **logprobs)


# ---- baselines -------------------------------------------------------------------

def torch_sample(logits, prm):
    """The sort-based chain: sort, softmax, cumsum, masks, exponential race."""
    x = logits.float()
    t = prm.t.unsqueeze(1)
    greedy = (t <= 0).squeeze(1) | (prm.k == 1)
    s = x / torch.where(t > 0, t, torch.ones_like(t))
    s_sorted, order = torch.sort(s, dim=-1, descending=True)
    vocab = s.shape[1]
    ranks = torch.arange(vocab, device=s.device).unsqueeze(0)
    k = torch.where((prm.k > 0) & (prm.k < vocab), prm.k, torch.full_like(prm.k, vocab)).unsqueeze(1)
    s_sorted = s_sorted.masked_fill(ranks >= k, float("-inf"))
    probs = torch.softmax(s_sorted, dim=-1)
    cum = probs.cumsum(dim=-1)
    s_sorted = s_sorted.masked_fill((cum - probs) > prm.p.unsqueeze(1), float("-inf"))
    probs = torch.softmax(s_sorted, dim=-1)
    s_sorted = s_sorted.masked_fill(probs < prm.m.unsqueeze(1) * probs[:, :1], float("-inf"))
    probs = torch.softmax(s_sorted, dim=-1)
    q = torch.empty_like(probs).exponential_()
    pick = (probs / q).argmax(dim=-1, keepdim=True)
    tokens = order.gather(1, pick).squeeze(1)
    return torch.where(greedy, x.argmax(dim=-1), tokens)


def unpack_bitmask(bitmask, vocab):
    shifts = torch.arange(32, device=bitmask.device, dtype=torch.int32)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1
    return bits.reshape(bitmask.shape[0], -1)[:, :vocab].bool()


def torch_mask(logits, bitmask):
    logits.masked_fill_(~unpack_bitmask(bitmask, logits.shape[1]), float("-inf"))


# ---- inputs ----------------------------------------------------------------------

def make_copies(rows, vocab, kind, dtype, gen, l2_bytes):
    one = rows * vocab * torch.tensor([], dtype=dtype).element_size()
    n = rotation_copies(one, l2_bytes, cap_bytes=6 << 30)
    big = make_logits(rows * n, vocab, kind, dtype, gen)
    return [big[i * rows:(i + 1) * rows] for i in range(n)]


def make_bitmask(rows, vocab, kind, gen):
    """BENCH.md masks ("50% random", "1% allowed", "blocky": runs of 1-4k tokens
    alternately allowed and masked): (int32 [rows, ceil(V/32)], bool [rows, V])."""
    words = (vocab + 31) // 32
    if kind == "50% random":
        allowed = torch.rand(rows, vocab, device="cuda", generator=gen) < 0.5
    elif kind == "1% allowed":
        allowed = torch.rand(rows, vocab, device="cuda", generator=gen) < 0.01
    else:
        allowed = torch.zeros(rows, vocab, dtype=torch.bool, device="cuda")
        for r in range(rows):
            pos, on = 0, bool(torch.randint(0, 2, (1,), generator=gen, device="cuda").item())
            lengths = torch.randint(1000, 4001, (vocab // 1000 + 2,), generator=gen, device="cuda").tolist()
            for n in lengths:
                if pos >= vocab:
                    break
                if on:
                    allowed[r, pos:pos + n] = True
                pos, on = pos + n, not on
    padded = torch.zeros(rows, words * 32, dtype=torch.int64, device="cuda")
    padded[:, :vocab] = allowed.long()
    weights = torch.ones(32, dtype=torch.int64, device="cuda") << torch.arange(32, device="cuda")
    packed = (padded.view(rows, words, 32) * weights).sum(-1)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)
    return packed, allowed


# ---- checks ------------------------------------------------------------------------

def reference_keep(logits, prm, joint=False):
    """Boolean keep-set per row, from a stable sort of s = x / T (SEMANTICS.md)."""
    x = logits.float()
    rows, vocab = x.shape
    keep = torch.zeros(rows, vocab, dtype=torch.bool, device=x.device)
    for r in range(rows):
        t, k, p, m = (float(prm.t[r]), int(prm.k[r]), float(prm.p[r]), float(prm.m[r]))
        if not t > 0 or k == 1:
            keep[r, int(torch.argmax(x[r]))] = True
            continue
        s = x[r] / t
        s = torch.where(torch.isnan(s), torch.full_like(s, float("-inf")), s)
        if torch.isinf(s).logical_and(s > 0).any():
            keep[r] = torch.isinf(s) & (s > 0)
            continue
        order = torch.sort(s, descending=True, stable=True).indices
        ss = s[order]
        fin = int(torch.isfinite(ss).sum())
        pr = torch.exp(ss[:fin].double() - ss[0].double())
        n_k = min(k, fin) if 0 < k < vocab else fin
        n_p = n_k
        if p < 1:
            span = fin if joint else n_k
            if p <= 0:
                n_p = 1
            else:
                hit = torch.nonzero(pr[:span].cumsum(0) >= p * pr[:span].sum())
                n_p = int(hit[0]) + 1 if hit.numel() else span
        n_m = int((pr >= min(m, 1.0)).sum()) if m > 0 else fin
        keep[r, order[: min(n_k, n_p, n_m)]] = True
    return keep


def check_sampling(chk, x, cfg, kind, gen, joint, uniform):
    rows, vocab = x.shape
    tag = f"{cfg[0]} {kind} {str(x.dtype)[6:]} V={vocab}{' joint' if joint else ''}" \
          f"{' u' if uniform is not None else ''}"
    prm = RowParams(cfg, rows, "cuda")
    got = prm.sample(x, uniform, joint)
    again = prm.sample(x, uniform, joint)
    chk.report("repeat bitwise " + tag, torch.equal(got, again))
    if cfg[0] == "greedy":
        chk.report("greedy == torch.argmax " + tag, torch.equal(got, torch.argmax(x.float(), -1)))
    keep = reference_keep(x, prm, joint)
    inside = keep.gather(1, got.clamp(min=0).unsqueeze(1)).squeeze(1) & (got >= 0)
    chk.report("in keep-set " + tag, inside.all(),
               "" if inside.all() else f"rows {torch.nonzero(~inside).flatten()[:8].tolist()}")
    # The CPU backend on the same inputs: bit-identical tokens.
    cpu = prm.to("cpu").sample(x.cpu(), None if uniform is None else uniform.cpu(), joint).cuda()
    same = cpu == got
    chk.report("== cpu backend " + tag, same.all(), "" if same.all() else
               f"rows {torch.nonzero(~same).flatten()[:6].tolist()} cuda {got[~same][:6].tolist()} "
               f"cpu {cpu[~same][:6].tolist()}")


def check_logprobs(chk, x, cfg, kind, mode, n=20):
    rows, vocab = x.shape
    tag = f"{cfg[0]} {kind} {str(x.dtype)[6:]} B={rows} V={vocab} {mode}"
    prm = RowParams(cfg, rows, "cuda")
    tokens, ids, values, ranks = prm.sample(x, logprobs=n, logprobs_mode=mode)
    chk.report("logprobs tokens == sample " + tag, torch.equal(tokens, prm.sample(x)))
    c_tokens, c_ids, c_values, c_ranks = prm.to("cpu").sample(x.cpu(), logprobs=n, logprobs_mode=mode)
    chk.report("logprobs tokens == cpu " + tag, torch.equal(tokens.cpu(), c_tokens))
    chk.report("logprobs ids == cpu " + tag, torch.equal(ids.cpu(), c_ids))
    chk.report("logprobs ranks == cpu " + tag, torch.equal(ranks.cpu(), c_ranks))
    v, w = values.cpu().double(), c_values.double()
    inf = torch.isinf(w)
    close = torch.where(inf, v == w, (v - w).abs() <= 1e-5 + 2.0**-24 * w.abs())
    chk.report("logprobs values ~ cpu " + tag, bool(close.all()),
               "" if close.all() else f"max diff {float((v - w)[~inf].abs().max())}")


def check_masks(chk, dtype, rows, vocab, gen):
    tag = f"{str(dtype)[6:]} {rows}x{vocab}"
    x = make_logits(rows, vocab, "flat", dtype, gen)
    bm, allowed = make_bitmask(rows, vocab, "50% random", gen)
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    ours, ref = x.clone(), x.clone()
    nexttok.apply_token_bitmask(ours, bm)
    torch_mask(ref, bm)
    chk.report("apply_token_bitmask " + tag, torch.equal(ours.view(bits), ref.view(bits)))
    # Listed rows, with a repeat and out-of-range entries (which mask nothing).
    idx = torch.tensor([rows - 1, -3, 0, rows + 4, 0], dtype=torch.int64, device="cuda")
    ours, ref = x.clone(), x.clone()
    nexttok.apply_token_bitmask(ours, bm, idx)
    for r in (rows - 1, 0):
        ref[r].masked_fill_(~allowed[r], float("-inf"))
    chk.report("apply_token_bitmask indices " + tag, torch.equal(ours.view(bits), ref.view(bits)))
    chk.report(f"bitmask_from_allowed {rows}x{vocab}", torch.equal(nexttok.bitmask_from_allowed(allowed), bm))


def run_checks(chk, gen):
    for kind in ("peaked", "flat"):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            rows, vocab = (64, 128256) if dtype == torch.float32 else (16, 50021)
            x = make_logits(rows, vocab, kind, dtype, gen)
            for cfg in CONFIGS:
                variants = [(False, None)]
                if cfg[0] in ("top-p 0.9", "mixed per-row", "k50+p0.9+min-p 0.05"):
                    variants += [(True, None), (False, torch.rand(rows, device="cuda", generator=gen))]
                for joint, uniform in variants:
                    chk.run(f"{cfg[0]} {kind} {dtype}",
                            lambda: check_sampling(chk, x, cfg, kind, gen, joint, uniform))
    for kind in ("peaked", "flat"):
        for rows, vocab in ((16, 128256), (1, 128256), (64, 5003)):
            x = make_logits(rows, vocab, kind, torch.float32, gen)
            for cfg in (LOGPROB_CONFIG, CONFIGS[0], CONFIGS[1], CONFIGS[-1]):
                for mode in ("raw", "processed"):
                    chk.run(f"logprobs {cfg[0]} {kind} {rows}x{vocab} {mode}",
                            lambda: check_logprobs(chk, x, cfg, kind, mode))
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for rows, vocab in ((8, 128256), (5, 1001)):
            chk.run(f"mask {dtype} {rows}x{vocab}", lambda: check_masks(chk, dtype, rows, vocab, gen))
    torch.cuda.synchronize()


# ---- workloads -----------------------------------------------------------------------

def for_each_input(rows_out, gen, l2, shapes, names_of, body):
    """body(rows, vocab, kind, names, copies) for each shape of `shapes` and
    each kind of f32 logits where one of names_of(rows, vocab, kind) is wanted;
    the copies are freed before the next."""
    for rows, vocab in shapes:
        for kind in ("peaked", "flat"):
            names = names_of(rows, vocab, kind)
            if any(rows_out.wanted(n) for n in names):
                body(rows, vocab, kind, names, make_copies(rows, vocab, kind, torch.float32, gen, l2))
                torch.cuda.empty_cache()


def bench_w3(rows_out, gen, l2):
    def body(rows, vocab, kind, names, copies):
        for cfg, name in zip(CONFIGS, names):
            if not rows_out.wanted(name):
                continue
            prm = RowParams(cfg, rows, "cuda")
            if cfg[0] == "greedy":
                baseline, baseline_name = (lambda i: torch.argmax(copies[i], dim=-1)), "torch.argmax"
            else:
                baseline, baseline_name = (lambda i: torch_sample(copies[i], prm)), "sort chain"
            rows_out.time(name, lambda i: prm.sample(copies[i]), baseline, len(copies),
                          rows * vocab * 4 + rows * 8, baseline_name)
            note_rows_past_list(rows_out, copies, cfg)
    for_each_input(rows_out, gen, l2, SHAPES,
                   lambda rows, vocab, kind: [f"W3 {cfg[0]} B={rows} V={vocab} {kind}" for cfg in CONFIGS],
                   body)


def bench_w3_classes(rows_out, gen, l2):
    """W3c rows; returns the closing table's lines (per-row / scalar, top-p /
    k50+p0.9, mixed / the row-weighted mean of its classes' scalar rows)."""
    lines = []

    def body(rows, vocab, kind, names, copies):
        tag = f"B={rows} V={vocab} {kind}"
        moved = rows * vocab * 4 + rows * 8
        k50p = RowParams(CLASS_CONFIGS[0], rows, "cuda")
        reference = lambda i: k50p.sample(copies[i])
        timed = {}

        def row(label, prm, cfg=None):
            name = f"W3c {label} {tag}"
            if rows_out.wanted(name):
                rows_out.time(name, lambda i: prm.sample(copies[i]), reference, len(copies), moved,
                              "k50+p0.9 scalars")
                if "error" not in rows_out.rows[-1]:
                    timed[label] = rows_out.rows[-1]["ours_us"]
                    if cfg is not None:
                        note_rows_past_list(rows_out, copies, cfg)

        for cfg in CLASS_CONFIGS:
            row(cfg[0], RowParams(cfg, rows, "cuda"), cfg)
            if cfg[0] in ("k50+p0.9", "top-p 0.9"):
                per_row = RowParams(cfg, rows, "cuda")
                per_row.per_row = True
                row(cfg[0] + " per-row", per_row, cfg)
        if rows >= 4:
            row("mixed quarters per-row", RowParams(("mixed", None), rows, "cuda", QUARTER_ROWS))

        def ratio(a, b):
            return f"{timed[a] / timed[b]:.2f}" if a in timed and b in timed else "-"
        mean = (sum(timed[c[0]] for c in CLASS_CONFIGS) / len(CLASS_CONFIGS)
                if all(c[0] in timed for c in CLASS_CONFIGS) else None)
        mixed = timed.get("mixed quarters per-row")
        lines.append(f"| {tag} | {ratio('k50+p0.9 per-row', 'k50+p0.9')} | "
                     f"{ratio('top-p 0.9', 'k50+p0.9')} | {ratio('top-p 0.9 per-row', 'top-p 0.9')} | "
                     + (f"{mixed:.1f} / {mean:.1f} = {mixed / mean:.2f} |" if mixed and mean else "- |"))

    for_each_input(rows_out, gen, l2, CLASS_SHAPES,
                   lambda rows, vocab, kind: [f"W3c {c[0]} B={rows} V={vocab} {kind}" for c in CLASS_CONFIGS],
                   body)
    return lines


def bench_w3u_explicit(rows_out, gen, l2):
    """W3u rows: sample(..., uniform=u) against the same call without it."""
    def body(rows, vocab, kind, names, copies):
        u = torch.rand(rows, device="cuda", generator=gen)
        for cfg, name in zip(EXPLICIT_CONFIGS, names):
            if rows_out.wanted(name):
                prm = RowParams(cfg, rows, "cuda")
                rows_out.time(name, lambda i: prm.sample(copies[i], uniform=u),
                              lambda i: prm.sample(copies[i]), len(copies),
                              rows * vocab * 4 + rows * 12, "the same row's Gumbel draw")
    for_each_input(rows_out, gen, l2, EXPLICIT_SHAPES,
                   lambda rows, vocab, kind: [f"W3u {cfg[0]} uniform= B={rows} V={vocab} {kind}"
                                              for cfg in EXPLICIT_CONFIGS],
                   body)


def bench_w3r_logprobs(rows_out, gen, l2):
    """W3r logprobs n = 20, raw and processed, each against the same sample row
    without logprobs (per-row tensors, same inputs, same process)."""
    def body(rows, vocab, kind, names, copies):
        prm = RowParams(LOGPROB_CONFIG, rows, "cuda")
        prm.per_row = True  # every parameter a per-row tensor (W3r)
        plain = lambda i: prm.sample(copies[i])
        moved = rows * vocab * 4 + rows * 8
        if rows_out.wanted(names[0]):
            rows_out.time(names[0], plain, lambda i: torch_sample(copies[i], prm), len(copies),
                          moved, "sort chain")
        for mode, name in zip(("raw", "processed"), names[1:]):
            if rows_out.wanted(name):
                rows_out.time(name, lambda i: prm.sample(copies[i], logprobs=20, logprobs_mode=mode),
                              plain, len(copies), moved + rows * 21 * 8 + rows * 4,
                              "the same row without logprobs", baseline_moved=moved)
    for_each_input(rows_out, gen, l2, LOGPROB_SHAPES,
                   lambda rows, vocab, kind: [f"W3r {LOGPROB_CONFIG[0]} per-row B={rows} V={vocab} {kind}"]
                   + [f"W3r logprobs n=20 {mode} B={rows} V={vocab} {kind}" for mode in ("raw", "processed")],
                   body)


def mask_bytes(bitmask, vocab, esize):
    """Bytes the op must move: the mask, plus per 16-byte vector: nothing when all
    allowed, a write when all masked, a read and a write when mixed."""
    allowed = unpack_bitmask(bitmask, vocab)
    per = 16 // esize
    usable = (vocab // per) * per
    v = allowed[:, :usable].reshape(allowed.shape[0], -1, per).sum(-1)
    full_masked = int((v == 0).sum())
    mixed = int(((v > 0) & (v < per)).sum())
    return bitmask.numel() * 4 + full_masked * 16 + mixed * 32


def load_xgrammar_kernel(package_dir):
    """XGrammar's apply_token_bitmask_inplace_cuda, from its file in package_dir."""
    import importlib.util
    import pathlib
    path = pathlib.Path(package_dir) / "kernels" / "apply_token_bitmask_inplace_cuda.py"
    spec = importlib.util.spec_from_file_location("xgrammar_bitmask_cuda", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.apply_token_bitmask_inplace_cuda


def bench_w4(rows_out, gen, l2, xgrammar=None):
    vocab = 128256
    kinds = ("50% random", "1% allowed", "blocky")
    for dtype in (torch.float32, torch.bfloat16):
        for rows in (1, 64, 256):
            suffix = "" if xgrammar is None else " vs XGrammar"
            names = [f"W4 {str(dtype)[6:]} B={rows} V={vocab} {kind}" for kind in kinds]
            if not any(rows_out.wanted(n + suffix) for n in names):
                continue
            copies = make_copies(rows, vocab, "flat", dtype, gen, l2)
            for kind, name in zip(kinds, names):
                if not rows_out.wanted(name + suffix):
                    continue
                bm, _ = make_bitmask(rows, vocab, kind, gen)
                moved = mask_bytes(bm, vocab, copies[0].element_size())
                if xgrammar is None:
                    rows_out.time(name, lambda i: nexttok.apply_token_bitmask(copies[i], bm),
                                  lambda i: torch_mask(copies[i], bm), len(copies), moved, "unpack + masked_fill_")
                    continue
                ours, theirs = copies[0].clone(), copies[0].clone()
                nexttok.apply_token_bitmask(ours, bm)
                xgrammar(theirs, bm)
                if not torch.equal(ours.view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                                   theirs.view(torch.int16 if dtype == torch.bfloat16 else torch.int32)):
                    print(f"{name}: XGrammar's kernel masked other bits; its row is left out", flush=True)
                    rows_out.rows.append(dict(row=name + " vs XGrammar", error="different bits"))
                    continue
                rows_out.time(name + " vs XGrammar", lambda i: nexttok.apply_token_bitmask(copies[i], bm),
                              lambda i: xgrammar(copies[i], bm), len(copies), moved, "XGrammar CUDA kernel")
            copies = None
            torch.cuda.empty_cache()


def main():
    ap = parser(__doc__)
    ap.add_argument("--xgrammar", metavar="DIR", help="an xgrammar package folder: W4 rows against its CUDA kernel")
    args = ap.parse_args()
    info = cuda_device()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(20261130)
    chk = Checks()
    if args.check:
        run_checks(chk, gen)
    rows = Rows(args)
    bench_w3(rows, gen, info["l2"])
    class_lines = bench_w3_classes(rows, gen, info["l2"])
    bench_w3u_explicit(rows, gen, info["l2"])
    bench_w3r_logprobs(rows, gen, info["l2"])
    bench_w4(rows, gen, info["l2"], load_xgrammar_kernel(args.xgrammar) if args.xgrammar else None)
    if args.json:
        rows.write_json(args.json, info, chk)
    print()
    if chk.results:
        print(chk.summary())
    rows.print_table()
    if class_lines:
        print("\nW3c ratios (targets: per-row / scalar <= 1.10; top-p / k50+p0.9 <= 1.10 on peaked "
              "rows; mixed / the mean of its four classes' scalar rows <= 1.10)\n")
        print("| shape | k50+p0.9 per-row / scalar | top-p / k50+p0.9 | top-p per-row / scalar | "
              "mixed us / class mean us |")
        print("|---|---:|---:|---:|---:|")
        print("\n".join(class_lines))
    return 1 if chk.failed or any("error" in r for r in rows.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
