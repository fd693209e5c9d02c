#!/usr/bin/env python3
"""W1 (binary LM head) and W2 (dense bf16 LM head) with exact top-k on a CUDA
GPU: nexttok (the Python package, on torch tensors) against cuBLAS matmul +
torch.topk (BENCH.md), timed in the same process on the same inputs (method:
bench/_common.py).

  PYTHONPATH=build/python python3 bench/cuda_lm_head_bench.py --check --bench [--json out.json]

--check   exactness against torch on materialised logits (fp64 and fp32):
          indices equal torch.topk on non-degenerate rows, values within 1e-5
          (dense) or 1e-4 (binary) of fp64, ties in (value desc, index asc)
          order, NaN and inf weights; pack_weights and quantize_activations
          bit for bit. --small leaves out the full W1/W2 shapes, --tiny keeps
          small shapes only (for compute-sanitizer).
--bench   W1 and W2 at V = 248,320, H = 5,120, G = 128, k = 50, M = --m;
          the W1 baseline is the user's fallback, the same head dequantized to bf16.
"""
import math
import sys

import torch

import nexttok
from _common import Checks, Rows, cuda_device, parser, rotation_copies, time_calls


def rng(seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g


# ---- check cases --------------------------------------------------------------------

def plant_dense(hidden, weight, k, gen):
    """Gives every row m its own k+1 best vocabulary rows, well separated:
    weight[v] = alpha * h_m / |h_m|^2 with alpha from 10 down to 6."""
    m_rows, vocab = hidden.shape[0], weight.shape[0]
    n = k + 1
    idx = torch.randperm(vocab, generator=gen, device="cuda")[: m_rows * n].view(m_rows, n)
    alpha = 6.0 + 4.0 * torch.arange(n - 1, -1, -1, device="cuda", dtype=torch.float64) / max(1, n - 1)
    for m in range(m_rows):
        h = hidden[m].double()
        weight[idx[m]] = (alpha[:, None] * h[None, :] / h.dot(h)).to(weight.dtype)


def dense_case(seed, m, vocab, cols, dtype, bias_dtype, plant_k=None, period=None):
    gen = rng(seed)
    hidden = torch.randn(m, cols, generator=gen, device="cuda").to(dtype)
    if period:
        base = torch.randn(period, cols, generator=gen, device="cuda") / math.sqrt(cols)
        weight = base.repeat((vocab + period - 1) // period, 1)[:vocab].to(dtype).contiguous()
    else:
        weight = (torch.randn(vocab, cols, generator=gen, device="cuda") / math.sqrt(cols)).to(dtype)
    if plant_k:
        plant_dense(hidden, weight, plant_k, gen)
    bias = None
    if bias_dtype is not None:
        bias = (0.5 * torch.randn(vocab, generator=gen, device="cuda")).to(bias_dtype)
    return dict(hidden=hidden, weight=weight, bias=bias)


def f16_ladder(n):
    """n distinct f16 values >= 1, consecutive ones 2^-10 to 2^-8 apart (relative)."""
    i = torch.arange(n, dtype=torch.float64)
    e = torch.floor(i / 1024)
    return torch.pow(2.0, e) * (1.0 + (i - 1024 * e) / 1024.0)


def binary_case(seed, m, vocab, cols, group, bias_dtype, plant_k=None):
    gen = rng(seed)
    x = torch.randn(m, cols, generator=gen, device="cuda")
    act_q, act_scale = nexttok.quantize_activations(x)
    signs = torch.randint(0, 2, (vocab, cols), generator=gen, device="cuda", dtype=torch.int8) * 2 - 1
    groups = cols // group
    mag = 0.5 + torch.rand(vocab, groups, generator=gen, device="cuda")
    flip = torch.rand(vocab, groups, generator=gen, device="cuda") < 0.1
    wscale = (torch.where(flip, -mag, mag) / math.sqrt(cols)).to(torch.float16)
    if plant_k:
        n = plant_k + 1
        idx = torch.randperm(vocab, generator=gen, device="cuda")[: m * n].view(m, n)
        ladder = f16_ladder(n).flip(0).to(device="cuda", dtype=torch.float16)
        for r in range(m):
            signs[idx[r]] = torch.where(act_q[r] >= 0, 1, -1).to(torch.int8)[None, :]
            wscale[idx[r]] = ladder[:, None].expand(n, groups)
    bias = None
    if bias_dtype is not None:
        bias = (0.5 * torch.randn(vocab, generator=gen, device="cuda")).to(bias_dtype)
    return dict(act_q=act_q, act_scale=act_scale, signs=signs, wq=nexttok.pack_weights(signs),
                wscale=wscale, group=group, bias=bias)


# ---- references -----------------------------------------------------------------------

def dense_logits(t, dtype, chunk=16384):
    h = t["hidden"].to(dtype)
    z = torch.cat([h @ t["weight"][v0:v0 + chunk].to(dtype).T
                   for v0 in range(0, t["weight"].shape[0], chunk)], dim=1)
    if t["bias"] is not None:
        z = z + t["bias"].to(dtype)[None, :]
    return z


def binary_logits(t, dtype, chunk=8192):
    m, cols = t["act_q"].shape
    g = t["group"]
    a = t["act_q"].to(dtype).view(m, cols // g, g)
    out = []
    for v0 in range(0, t["signs"].shape[0], chunk):
        s = t["signs"][v0:v0 + chunk].to(dtype)
        d = torch.einsum("mgj,vgj->mvg", a, s.view(s.shape[0], cols // g, g))  # exact integers
        out.append((d * t["wscale"][v0:v0 + chunk].to(dtype)[None]).sum(-1))
    z = torch.cat(out, dim=1) * t["act_scale"].to(dtype)[:, None]
    if t["bias"] is not None:
        z = z + t["bias"].to(dtype)[None, :]
    return z


def expected_order(z, k):
    """Reference top-k by the library's rule (value desc, index asc, NaN as -inf)."""
    key = torch.where(torch.isnan(z), torch.full_like(z, -math.inf), z)
    return torch.sort(key, dim=1, descending=True, stable=True).indices[:, :k]


# ---- checks ---------------------------------------------------------------------------

def check_topk(chk, name, vals, idx, z64, z32, tol, exact_order=None):
    """Indices must equal torch.topk of the fp32 logits on non-degenerate rows
    (gap between consecutive top-(k+1) values above 1e-5 of the row's max);
    values within tol of the fp64 logits, relative to the row's max |logit|.
    With exact_order: indices equal to it, values equal to the fp64 logits."""
    k = idx.shape[1]
    finite = torch.where(torch.isfinite(z64), z64.abs(), torch.zeros_like(z64))
    rowmax = finite.max(dim=1).values.clamp_min(1e-30)
    if exact_order is not None:
        ok_idx = torch.equal(idx, exact_order)
        ref_vals = torch.gather(z64, 1, exact_order)
        same = (torch.isnan(vals) & torch.isnan(ref_vals)) | (vals.double() == ref_vals)
        err = torch.where(same, torch.zeros_like(ref_vals), (vals.double() - ref_vals).abs())
        worst = (torch.nan_to_num(err, nan=math.inf) / rowmax[:, None]).max().item()
        chk.report(name, ok_idx and worst <= tol,
                   f"order {'==' if ok_idx else '!='} (value desc, index asc) reference; max rel err {worst:.2e}")
        return
    top = torch.topk(z64, min(k + 1, z64.shape[1]), dim=1)
    gaps = (top.values[:, :-1] - top.values[:, 1:])[:, :k] if top.values.shape[1] > 1 \
        else torch.full_like(top.values, math.inf)
    degenerate = gaps.min(dim=1).values <= 1e-5 * rowmax
    ref_idx = torch.topk(z32, k, dim=1).indices
    same = (idx == ref_idx).all(dim=1)
    bad_idx = (~same & ~degenerate).sum().item()
    at_ours = torch.gather(z64, 1, idx.clamp(0, z64.shape[1] - 1))
    err_at = ((vals.double() - at_ours).abs() / rowmax[:, None]).max().item()
    err_sorted = ((vals.double() - top.values[:, :k]).abs() / rowmax[:, None]).max().item()
    in_range = bool(((idx >= 0) & (idx < z64.shape[1])).all().item())
    unique = all(len(set(r.tolist())) == k for r in idx)
    ok = bad_idx == 0 and err_at <= tol and err_sorted <= tol and in_range and unique
    detail = (f"index mismatches {bad_idx} (non-degenerate rows), degenerate rows "
              f"{degenerate.sum().item()}/{idx.shape[0]}, max rel err at our indices {err_at:.2e}, "
              f"vs sorted ref {err_sorted:.2e}")
    if bad_idx:
        r = int(torch.nonzero(~same & ~degenerate)[0].item())
        j = int(torch.nonzero(idx[r] != ref_idx[r])[0].item())
        detail += (f"; first: row {r} pos {j}: ours {idx[r, j].item()} ({vals[r, j].item():.7g}) "
                   f"torch {ref_idx[r, j].item()} ({z64[r, ref_idx[r, j]].item():.7g})")
    chk.report(name, ok, detail)


def dense_check(chk, name, seed, m, vocab, cols, dtype, bias_dtype, k, **kw):
    t = dense_case(seed, m, vocab, cols, dtype, bias_dtype, **kw)
    vals, idx = nexttok.lm_head_topk_dense(t["hidden"], t["weight"], k=k, bias=t["bias"])
    period = kw.get("period")
    if period:  # repeated rows: the logits of one period, tiled, so that ties are exact
        base = dict(t, weight=t["weight"][:period], bias=None)
        reps = (vocab + period - 1) // period
        z64 = dense_logits(base, torch.float64).repeat(1, reps)[:, :vocab]
        z32 = dense_logits(base, torch.float32).repeat(1, reps)[:, :vocab]
        check_topk(chk, f"dense {name}", vals, idx, z64, z32, 1e-5, expected_order(z64, k))
        return
    check_topk(chk, f"dense {name}", vals, idx, dense_logits(t, torch.float64),
               dense_logits(t, torch.float32), 1e-5)


def binary_check(chk, name, seed, m, vocab, cols, group, bias_dtype, k, **kw):
    t = binary_case(seed, m, vocab, cols, group, bias_dtype, **kw)
    vals, idx = nexttok.lm_head_topk_binary(t["act_q"], t["act_scale"], t["wq"], t["wscale"],
                                            bias=t["bias"], group_size=group, k=k)
    check_topk(chk, f"binary {name}", vals, idx, binary_logits(t, torch.float64),
               binary_logits(t, torch.float32), 1e-4)


def check_pack_quantize(chk):
    gen = rng(7)
    for vocab, cols in ((1000, 5120), (37, 96)):
        signs = torch.randint(0, 2, (vocab, cols), generator=gen, device="cuda", dtype=torch.int8) * 2 - 1
        bits = (signs > 0).view(vocab, cols // 32, 32).long()
        ref = (bits << torch.arange(32, device="cuda")).sum(-1)
        ref = torch.where(ref >= 2**31, ref - 2**32, ref).to(torch.int32)
        chk.report(f"pack_weights V={vocab} H={cols}", torch.equal(nexttok.pack_weights(signs), ref),
                   "bit-exact vs torch")
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = (3 * torch.randn(6, 777, generator=gen, device="cuda")).to(dtype)
        x[1] = 0
        x[2, 5] = float("nan")
        x[3, 7] = float("inf")
        q, s = nexttok.quantize_activations(x)
        xf = x.float()
        # nan_to_num would also clamp +inf to FLT_MAX; SEMANTICS keeps inf in the max
        # (scale = inf, so finite entries -> 0 and inf / inf = NaN -> 0).
        amax = xf.abs().masked_fill(torch.isnan(xf), 0.0).amax(dim=1)
        scale = torch.where(amax == 0, torch.ones_like(amax), amax / 127.0)
        r = torch.round(xf / scale[:, None])
        ref_q = torch.where(torch.isnan(r), torch.zeros_like(r), r.clamp(-127, 127)).to(torch.int8)
        chk.report(f"quantize_activations {str(dtype).split('.')[-1]}",
                   torch.equal(q, ref_q) and torch.equal(s, scale), "bit-exact vs torch")


def nan_checks(chk):
    gen = rng(31)
    hidden = torch.randn(8, 64, generator=gen, device="cuda").to(torch.bfloat16)
    weight = torch.randn(64, 64, generator=gen, device="cuda").to(torch.bfloat16)
    weight[5, 3] = float("nan")
    weight[9, 0] = float("nan")
    weight[11, 1] = float("inf")
    for m in (8, 1):
        t = dict(hidden=hidden[:m].contiguous(), weight=weight, bias=None)
        vals, idx = nexttok.lm_head_topk_dense(t["hidden"], weight, k=64)
        z64, z32 = dense_logits(t, torch.float64), dense_logits(t, torch.float32)
        check_topk(chk, f"dense NaN/inf rows M={m}, k=V=64", vals, idx, z64, z32, 1e-5,
                   expected_order(z32, 64))


bf16, f16, f32 = torch.bfloat16, torch.float16, torch.float32

# (name, seed, M, V, H, dtype, bias dtype, k, extra): shapes across row counts,
# ragged vocabularies and hidden sizes, k from 1 to 2048, planted winners, ties.
DENSE_CASES = [
    ("M=5 V=50001 H=1000 k=1 bias=bf16", 1, 5, 50001, 1000, bf16, bf16, 1, {}),
    ("M=3 V=30011 H=4096 k=2048 planted bias=f32", 2, 3, 30011, 4096, bf16, f32, 2048, {"plant_k": 2048}),
    ("M=64 V=100003 H=2048 k=64 bias=f16", 3, 64, 100003, 2048, bf16, f16, 64, {}),
    ("f16 M=2 V=20000 H=512 k=100", 4, 2, 20000, 512, f16, None, 100, {}),
    ("f32 M=3 V=20000 H=300 k=10", 5, 3, 20000, 300, f32, None, 10, {}),
    ("M=70 V=9000 H=256 k=20", 6, 70, 9000, 256, bf16, None, 20, {}),
    ("odd H M=4 V=7777 H=100 k=33 bias=f32", 7, 4, 7777, 100, bf16, f32, 33, {}),
    ("ties: rows repeat every 1024, M=2 V=8192 H=512 k=30", 8, 2, 8192, 512, bf16, None, 30, {"period": 1024}),
    ("M=17 V=4000 H=2880 k=2048", 9, 17, 4000, 2880, bf16, None, 2048, {}),
    ("V=1 k=1", 10, 3, 1, 64, bf16, None, 1, {}),
    ("M=10 V=30000 H=1024 k=50 bias=bf16", 13, 10, 30000, 1024, bf16, bf16, 50, {}),
    ("f16 M=1 V=20000 H=1000 k=100 bias=f32", 14, 1, 20000, 1000, f16, f32, 100, {}),
    ("M=1 V=30011 H=4096 k=2048 planted bias=bf16", 15, 1, 30011, 4096, bf16, bf16, 2048, {"plant_k": 2048}),
    ("ties: rows repeat every 1024, M=1 V=8192 H=512 k=30", 16, 1, 8192, 512, bf16, None, 30, {"period": 1024}),
    ("M=68 V=9000 H=256 k=20 bias=f16", 17, 68, 9000, 256, bf16, f16, 20, {}),
    ("M=4 V=50001 H=2880 k=50 bias=bf16", 18, 4, 50001, 2880, bf16, bf16, 50, {}),
]
DENSE_FULL = [
    ("W2 shape M=1 V=248320 H=5120 k=50", 11, 1, 248320, 5120, bf16, None, 50, {}),
    ("W2 shape M=16 V=248320 H=5120 k=50 bias=bf16", 12, 16, 248320, 5120, bf16, bf16, 50, {}),
]
DENSE_TINY = [
    ("tiny M=1 V=3001 H=512 k=50", 41, 1, 3001, 512, bf16, f32, 50, {}),
    ("tiny M=10 V=3001 H=256 k=20", 42, 10, 3001, 256, bf16, None, 20, {}),
    ("tiny M=20 V=2001 H=256 k=7", 43, 20, 2001, 256, bf16, None, 7, {}),
    ("tiny M=40 V=2001 H=128 k=64", 44, 40, 2001, 128, bf16, bf16, 64, {}),
    ("tiny f32 M=3 V=1000 H=100 k=10", 45, 3, 1000, 100, f32, None, 10, {}),
    ("tiny k=2048 M=2 V=2500 H=64", 46, 2, 2500, 64, bf16, None, 2048, {}),
    ("tiny f16 M=1 V=2001 H=200 k=7", 47, 1, 2001, 200, f16, bf16, 7, {}),
    ("tiny M=4 V=2001 H=256 k=20", 48, 4, 2001, 256, bf16, None, 20, {}),
]
# (name, seed, M, V, H, G, bias dtype, k, extra)
BINARY_CASES = [
    ("M=16 V=50001 H=2880 G=64 k=1", 21, 16, 50001, 2880, 64, None, 1, {}),
    ("M=3 V=30011 H=4096 G=256 k=2048 planted bias=bf16", 22, 3, 30011, 4096, 256, bf16, 2048, {"plant_k": 2048}),
    ("M=64 V=100003 H=1024 G=32 k=64 bias=f32", 23, 64, 100003, 1024, 32, f32, 64, {}),
    ("M=70 V=9000 H=512 G=128 k=20", 24, 70, 9000, 512, 128, None, 20, {}),
    ("M=4 V=20000 H=2880 G=32 k=10", 25, 4, 20000, 2880, 32, f16, 10, {}),
    ("M=8 V=3001 H=96 G=32 k=500", 26, 8, 3001, 96, 32, None, 500, {}),
    ("M=20 V=40000 H=1024 G=64 k=7", 29, 20, 40000, 1024, 64, None, 7, {}),
    ("M=12 V=60000 H=2048 G=128 k=50 bias=bf16", 30, 12, 60000, 2048, 128, bf16, 50, {}),
    ("M=16 V=70001 H=5120 G=128 k=100 bias=f16", 31, 16, 70001, 5120, 128, f16, 100, {}),
    ("M=1 V=151936 H=3072 G=256 k=1", 32, 1, 151936, 3072, 256, None, 1, {}),
    ("M=9 V=4099 H=8192 G=128 k=300 planted", 33, 9, 4099, 8192, 128, None, 300, {"plant_k": 300}),
    ("M=5 V=40000 H=2048 G=128 k=50 bias=f32", 34, 5, 40000, 2048, 128, f32, 50, {}),
    ("M=8 V=33333 H=1536 G=256 k=200 planted", 35, 8, 33333, 1536, 256, None, 200, {"plant_k": 200}),
    ("M=2 V=65537 H=5120 G=128 k=2048 bias=f16", 36, 2, 65537, 5120, 128, f16, 2048, {}),
    ("M=1 V=100003 H=3584 G=128 k=50 bias=bf16", 37, 1, 100003, 3584, 128, bf16, 50, {}),
]
BINARY_FULL = [
    ("W1 shape M=1 V=248320 H=5120 G=128 k=50", 27, 1, 248320, 5120, 128, None, 50, {}),
    ("W1 shape M=64 V=248320 H=5120 G=128 k=50 bias=f32", 28, 64, 248320, 5120, 128, f32, 50, {}),
]
BINARY_TINY = [
    ("tiny M=1 V=3001 H=512 G=128 k=50", 51, 1, 3001, 512, 128, f32, 50, {}),
    ("tiny M=12 V=3001 H=1024 G=256 k=20", 52, 12, 3001, 1024, 256, None, 20, {}),
    ("tiny M=20 V=2001 H=512 G=64 k=7", 53, 20, 2001, 512, 64, None, 7, {}),
    ("tiny M=40 V=2001 H=256 G=32 k=64", 54, 40, 2001, 256, 32, bf16, 64, {}),
    ("tiny M=3 V=1000 H=96 G=32 k=5", 55, 3, 1000, 96, 32, None, 5, {}),
]


def run_checks(chk, small, tiny):
    torch.backends.cuda.matmul.allow_tf32 = False
    chk.run("pack/quantize", lambda: check_pack_quantize(chk))
    if tiny:
        dense, binary = DENSE_TINY, BINARY_TINY
    else:
        dense = DENSE_CASES if small else DENSE_FULL + DENSE_CASES
        binary = BINARY_CASES if small else BINARY_FULL + BINARY_CASES
    for name, seed, m, vocab, cols, dtype, bias, k, kw in dense:
        chk.run("dense " + name, lambda: dense_check(chk, name, seed, m, vocab, cols, dtype, bias, k, **kw))
    for name, seed, m, vocab, cols, group, bias, k, kw in binary:
        chk.run("binary " + name, lambda: binary_check(chk, name, seed, m, vocab, cols, group, bias, k, **kw))
    if not tiny:
        chk.run("NaN/inf", lambda: nan_checks(chk))
    torch.cuda.synchronize()


# ---- bench ----------------------------------------------------------------------------

def copy_ceiling_tbps(runs):
    """Read + write bandwidth of a 2 GiB device copy, TB/s."""
    a = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    med, _, _ = time_calls(lambda i: b.copy_(a), 1, runs, 3)
    return 2 * a.numel() / (med * 1e-6) / 1e12


def w1_w2_heads(n, V, H, G, gen):
    """n copies of the W2 head (dense bf16 [V, H]) and of the W1 head (packed signs,
    f16 scales of groups of G) with its dequantized bf16 twin: lists
    (weight, wq, wscale, deq)."""
    weight, wq, wscale, deq = [], [], [], []
    for _ in range(n):
        weight.append((torch.randn(V, H, generator=gen, device="cuda") / math.sqrt(H)).to(bf16))
        signs = torch.randint(0, 2, (V, H), generator=gen, device="cuda", dtype=torch.int8) * 2 - 1
        wq.append(nexttok.pack_weights(signs))
        wscale.append(((0.5 + torch.rand(V, H // G, generator=gen, device="cuda")) / math.sqrt(H)).to(f16))
        deq.append((signs.view(V, H // G, G).to(bf16) * wscale[-1].to(bf16)[:, :, None]).view(V, H))
        del signs
    torch.cuda.synchronize()
    return weight, wq, wscale, deq


def bench(rows, ms, l2):
    V, H, G, K = 248320, 5120, 128, 50
    bin_bytes = V * H // 8 + V * (H // G) * 2
    dense_bytes = V * H * 2
    n = rotation_copies(bin_bytes, l2)  # the smallest weights still exceed 4x the L2 in n copies
    print(f"\nweights: binary {bin_bytes / 1e6:.1f} MB, dense bf16 {dense_bytes / 1e6:.1f} MB, "
          f"{n} copies of each rotated", flush=True)
    gen = rng(1234)
    weight, wq, wscale, deq = w1_w2_heads(n, V, H, G, gen)
    for m in ms:
        x = [torch.randn(m, H, generator=gen, device="cuda") for _ in range(n)]
        xb = [v.to(bf16) for v in x]
        act = [nexttok.quantize_activations(v) for v in x]
        logit_bytes = m * V * 2 * 2  # the baseline's bf16 logits, written then read
        name = f"W1 binary M={m}"
        if rows.wanted(name):
            rows.time(name,
                      lambda i: nexttok.lm_head_topk_binary(act[i][0], act[i][1], wq[i], wscale[i],
                                                            group_size=G, k=K),
                      lambda i: torch.topk(xb[i] @ deq[i].T, K, dim=1), n,
                      bin_bytes + m * H + m * 4, "cuBLAS bf16 + torch.topk",
                      dense_bytes + m * H * 2 + logit_bytes)
        name = f"W2 dense bf16 M={m}"
        if rows.wanted(name):
            rows.time(name, lambda i: nexttok.lm_head_topk_dense(xb[i], weight[i], k=K),
                      lambda i: torch.topk(xb[i] @ weight[i].T, K, dim=1), n,
                      dense_bytes + m * H * 2, "cuBLAS bf16 + torch.topk",
                      dense_bytes + m * H * 2 + logit_bytes)


def main():
    ap = parser(__doc__)
    ap.add_argument("--small", action="store_true", help="check without the full W1/W2 shapes")
    ap.add_argument("--tiny", action="store_true", help="check tiny shapes only (compute-sanitizer)")
    ap.add_argument("--bench", action="store_true", help="time W1 and W2")
    ap.add_argument("--m", default="1,4,16,64", help="row counts M of the timed rows")
    args = ap.parse_args()
    ms = [int(v) for v in args.m.split(",")]
    info = cuda_device()
    chk = Checks()
    if args.check:
        run_checks(chk, args.small, args.tiny)
        print(chk.summary(), flush=True)
    rows = Rows(args)
    if args.bench:
        tbps = copy_ceiling_tbps(args.runs)
        print(f"copy ceiling: {tbps:.2f} TB/s (read + write)", flush=True)
        info = dict(info, copy_tbps=tbps)
        bench(rows, ms, info["l2"])
    if args.json:
        rows.write_json(args.json, info, chk)
    if args.bench:
        print()
        rows.print_table()
    return 1 if chk.failed or any("error" in r for r in rows.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
