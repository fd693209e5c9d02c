#!/usr/bin/env python3
"""CUDA LM-head benchmark and check for nexttok (BENCH.md W1/W2).

Calls libnexttok through ctypes on torch CUDA tensors (same stream as torch).
  --check   exactness against torch on materialised logits (fp64 and fp32),
            pack_weights / quantize_activations bit-exactness, ties, NaN rows
  --bench   W1 (binary head) and W2 (dense bf16 head), M = 1, 4, 16, 64, k = 50,
            V = 248,320, H = 5,120, G = 128, against cuBLAS matmul + torch.topk;
            median of CUDA-graph replays timed with CUDA events
The markdown table is printed last.
"""
import argparse
import ctypes
import math
import os
import subprocess
import sys
import time

import torch

# ---- the C ABI (include/nexttok/nexttok.h), mirrored field by field ----------

NT_F32, NT_F16, NT_BF16, NT_I8, NT_I32, NT_I64 = 0, 1, 2, 3, 4, 5
NT_DEVICE_CUDA = 2
DTYPES = {torch.float32: NT_F32, torch.float16: NT_F16, torch.bfloat16: NT_BF16,
          torch.int8: NT_I8, torch.int32: NT_I32, torch.int64: NT_I64}


class NtTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("byte_offset", ctypes.c_int64),
                ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 2), ("row_stride", ctypes.c_int64),
                ("device", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DenseArgs(ctypes.Structure):
    _fields_ = [("hidden", NtTensor), ("weight", NtTensor), ("bias", NtTensor),
                ("k", ctypes.c_int32), ("values", NtTensor), ("indices", NtTensor)]


class BinaryArgs(ctypes.Structure):
    _fields_ = [("act_q", NtTensor), ("act_scale", NtTensor), ("wq", NtTensor),
                ("wscale", NtTensor), ("bias", NtTensor), ("group_size", ctypes.c_int32),
                ("k", ctypes.c_int32), ("values", NtTensor), ("indices", NtTensor)]


class PackArgs(ctypes.Structure):
    _fields_ = [("signs", NtTensor), ("wq", NtTensor)]


class QuantizeArgs(ctypes.Structure):
    _fields_ = [("x", NtTensor), ("act_q", NtTensor), ("act_scale", NtTensor)]


def view(t):
    """nt_tensor of a torch CUDA tensor (None -> absent)."""
    v = NtTensor()
    if t is None:
        return v
    assert t.is_cuda and t.dim() in (1, 2) and t.stride(-1) == 1
    v.data = t.data_ptr()
    v.dtype = DTYPES[t.dtype]
    v.ndim = t.dim()
    v.shape[0] = t.shape[0]
    v.shape[1] = t.shape[1] if t.dim() == 2 else 0
    v.row_stride = t.stride(0) if t.dim() == 2 else 0
    v.device = NT_DEVICE_CUDA
    v.device_id = t.device.index or 0
    return v


class Lib:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        L = self.lib
        L.nt_last_error.restype = ctypes.c_char_p
        for name in ("nt_lm_head_topk_dense_workspace_size", "nt_lm_head_topk_binary_workspace_size"):
            getattr(L, name).argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
            getattr(L, name).restype = ctypes.c_int
        for name in ("nt_lm_head_topk_dense", "nt_lm_head_topk_binary"):
            getattr(L, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                         ctypes.c_void_p]
            getattr(L, name).restype = ctypes.c_int
        for name in ("nt_pack_weights", "nt_quantize_activations"):
            getattr(L, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            getattr(L, name).restype = ctypes.c_int

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: status {status}: {self.lib.nt_last_error().decode()}")

    @staticmethod
    def stream():
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def pack_weights(self, signs):
        wq = torch.empty(signs.shape[0], signs.shape[1] // 32, dtype=torch.int32, device=signs.device)
        a = PackArgs(view(signs), view(wq))
        self.check(self.lib.nt_pack_weights(ctypes.byref(a), self.stream()), "pack_weights")
        return wq

    def quantize(self, x):
        q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
        s = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
        a = QuantizeArgs(view(x), view(q), view(s))
        self.check(self.lib.nt_quantize_activations(ctypes.byref(a), self.stream()), "quantize")
        return q, s


class HeadCall:
    """One prepared LM-head call: arguments, outputs and workspace, queried and
    allocated once; run() only launches."""

    def __init__(self, lib, kind, k, m, device, **t):
        self.lib, self.kind, self.k = lib, kind, k
        self.values = torch.empty(m, k, dtype=torch.float32, device=device)
        self.indices = torch.empty(m, k, dtype=torch.int64, device=device)
        self.keep = t  # keeps the tensors alive while the views exist
        if kind == "dense":
            self.args = DenseArgs(view(t["hidden"]), view(t["weight"]), view(t.get("bias")), k,
                                  view(self.values), view(self.indices))
            size_fn, self.fn = lib.lib.nt_lm_head_topk_dense_workspace_size, lib.lib.nt_lm_head_topk_dense
        else:
            self.args = BinaryArgs(view(t["act_q"]), view(t["act_scale"]), view(t["wq"]),
                                   view(t["wscale"]), view(t.get("bias")), t["group"], k,
                                   view(self.values), view(self.indices))
            size_fn, self.fn = lib.lib.nt_lm_head_topk_binary_workspace_size, lib.lib.nt_lm_head_topk_binary
        n = ctypes.c_size_t(0)
        lib.check(size_fn(ctypes.byref(self.args), ctypes.byref(n)), f"{kind} workspace_size")
        self.workspace_bytes = n.value
        self.workspace = torch.empty(max(1, n.value), dtype=torch.uint8, device=device)

    def run(self):
        self.lib.check(self.fn(ctypes.byref(self.args), ctypes.c_void_p(self.workspace.data_ptr()),
                               ctypes.c_size_t(self.workspace_bytes), Lib.stream()), self.kind)


# ---- data ------------------------------------------------------------------------

def rng(seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g


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
    v = torch.pow(2.0, e) * (1.0 + (i - 1024 * e) / 1024.0)
    return v


def binary_case(lib, seed, m, vocab, cols, group, bias_dtype, plant_k=None):
    gen = rng(seed)
    x = torch.randn(m, cols, generator=gen, device="cuda")
    act_q, act_scale = lib.quantize(x)
    signs = (torch.randint(0, 2, (vocab, cols), generator=gen, device="cuda", dtype=torch.int8) * 2 - 1)
    groups = cols // group
    mag = 0.5 + torch.rand(vocab, groups, generator=gen, device="cuda")
    flip = torch.rand(vocab, groups, generator=gen, device="cuda") < 0.1
    wscale = (torch.where(flip, -mag, mag) / math.sqrt(cols)).to(torch.float16)
    if plant_k:
        n = plant_k + 1
        idx = torch.randperm(vocab, generator=gen, device="cuda")[: m * n].view(m, n)
        ladder = f16_ladder(n).flip(0).to(device="cuda", dtype=torch.float16)
        for r in range(m):
            s = torch.where(act_q[r] >= 0, 1, -1).to(torch.int8)
            signs[idx[r]] = s[None, :]
            wscale[idx[r]] = ladder[:, None].expand(n, groups)
    wq = lib.pack_weights(signs)
    bias = None
    if bias_dtype is not None:
        bias = (0.5 * torch.randn(vocab, generator=gen, device="cuda")).to(bias_dtype)
    return dict(x=x, act_q=act_q, act_scale=act_scale, signs=signs, wq=wq, wscale=wscale,
                group=group, bias=bias)


# ---- references -------------------------------------------------------------------

def dense_logits(t, dtype, chunk=16384):
    h = t["hidden"].to(dtype)
    out = []
    for v0 in range(0, t["weight"].shape[0], chunk):
        out.append(h @ t["weight"][v0:v0 + chunk].to(dtype).T)
    z = torch.cat(out, dim=1)
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
        d = torch.einsum("mgj,vgj->mvg", a, s.view(s.shape[0], cols // g, g))  # exact ints
        out.append((d * t["wscale"][v0:v0 + chunk].to(dtype)[None]).sum(-1))
    z = torch.cat(out, dim=1) * t["act_scale"].to(dtype)[:, None]
    if t["bias"] is not None:
        z = z + t["bias"].to(dtype)[None, :]
    return z


def expected_order(z, k):
    """Reference top-k by the library's rule (value desc, index asc, NaN as -inf)."""
    key = torch.where(torch.isnan(z), torch.full_like(z, -math.inf), z)
    order = torch.sort(key, dim=1, descending=True, stable=True).indices[:, :k]
    return order


# ---- check ----------------------------------------------------------------------------

class Checker:
    def __init__(self):
        self.failures = 0
        self.lines = []

    def report(self, name, ok, detail):
        self.failures += 0 if ok else 1
        line = f"{'PASS' if ok else 'FAIL'}  {name}: {detail}"
        self.lines.append(line)
        print(line, flush=True)


def check_topk(chk, name, call, z64, z32, tol, exact_order=None):
    """Indices must equal torch.topk of the fp32 logits on non-degenerate rows
    (gap between consecutive top-(k+1) values above 1e-5 of the row's max);
    values within tol of the fp64 logits, relative to the row's max |logit|."""
    k = call.k
    vals, idx = call.values, call.indices
    finite = torch.where(torch.isfinite(z64), z64.abs(), torch.zeros_like(z64))
    rowmax = finite.max(dim=1).values.clamp_min(1e-30)
    if exact_order is not None:
        ok_idx = torch.equal(idx, exact_order)
        ref_vals = torch.gather(z64, 1, exact_order)
        same = (torch.isnan(vals) & torch.isnan(ref_vals)) | (vals.double() == ref_vals)
        err = torch.where(same, torch.zeros_like(ref_vals), (vals.double() - ref_vals).abs())
        err = torch.nan_to_num(err, nan=math.inf) / rowmax[:, None]
        worst = err.max().item()
        chk.report(name, ok_idx and worst <= tol,
                   f"order {'==' if ok_idx else '!='} (value desc, index asc) reference; max rel err {worst:.2e}")
        return
    top = torch.topk(z64, min(k + 1, z64.shape[1]), dim=1)
    gaps = (top.values[:, :-1] - top.values[:, 1:]) if top.values.shape[1] > 1 else torch.full_like(top.values, math.inf)
    if gaps.shape[1] > k:
        gaps = gaps[:, :k]
    degenerate = (gaps.min(dim=1).values <= 1e-5 * rowmax)
    ref_idx = torch.topk(z32, k, dim=1).indices
    same = (idx == ref_idx).all(dim=1)
    bad_idx = (~same & ~degenerate).sum().item()
    at_ours = torch.gather(z64, 1, idx.clamp(0, z64.shape[1] - 1))
    err_at = ((vals.double() - at_ours).abs() / rowmax[:, None]).max().item()
    err_sorted = ((vals.double() - top.values[:, :k]).abs() / rowmax[:, None]).max().item()
    in_range = bool(((idx >= 0) & (idx < z64.shape[1])).all().item())
    unique = all(len(set(r.tolist())) == k for r in idx)
    ok = bad_idx == 0 and err_at <= tol and err_sorted <= tol and in_range and unique
    detail = (f"index mismatches {bad_idx} (non-degenerate rows), degenerate rows {degenerate.sum().item()}/"
              f"{idx.shape[0]}, max rel err at our indices {err_at:.2e}, vs sorted ref {err_sorted:.2e}")
    if bad_idx:
        r = int(torch.nonzero(~same & ~degenerate)[0].item())
        j = int(torch.nonzero(idx[r] != ref_idx[r])[0].item())
        detail += (f"; first: row {r} pos {j}: ours {idx[r, j].item()} ({vals[r, j].item():.7g}) "
                   f"torch {ref_idx[r, j].item()} ({z64[r, ref_idx[r, j]].item():.7g})")
    chk.report(name, ok, detail)


def run_dense_check(lib, chk, name, seed, m, vocab, cols, dtype, bias_dtype, k, **kw):
    t = dense_case(seed, m, vocab, cols, dtype, bias_dtype, **kw)
    call = HeadCall(lib, "dense", k, m, "cuda", **t)
    call.values.fill_(12345.0)
    call.indices.fill_(-7)
    call.run()
    torch.cuda.synchronize()
    period = kw.get("period")
    if period:
        # repeated rows: tile the logits of one period so that ties are exact
        base = dict(t, weight=t["weight"][:period], bias=None)
        reps = (vocab + period - 1) // period
        z64 = dense_logits(base, torch.float64).repeat(1, reps)[:, :vocab]
        z32 = dense_logits(base, torch.float32).repeat(1, reps)[:, :vocab]
        check_topk(chk, f"dense {name}", call, z64, z32, 1e-5, expected_order(z64, k))
        return
    z64 = dense_logits(t, torch.float64)
    z32 = dense_logits(t, torch.float32)
    check_topk(chk, f"dense {name}", call, z64, z32, 1e-5)


def run_binary_check(lib, chk, name, seed, m, vocab, cols, group, bias_dtype, k, **kw):
    t = binary_case(lib, seed, m, vocab, cols, group, bias_dtype, **kw)
    call = HeadCall(lib, "binary", k, m, "cuda", **t)
    call.values.fill_(12345.0)
    call.indices.fill_(-7)
    call.run()
    torch.cuda.synchronize()
    z64 = binary_logits(t, torch.float64)
    z32 = binary_logits(t, torch.float32)
    check_topk(chk, f"binary {name}", call, z64, z32, 1e-4)


def check_pack_quantize(lib, chk):
    gen = rng(7)
    for vocab, cols in ((1000, 5120), (37, 96)):
        signs = torch.randint(0, 2, (vocab, cols), generator=gen, device="cuda", dtype=torch.int8) * 2 - 1
        wq = lib.pack_weights(signs)
        bits = (signs > 0).view(vocab, cols // 32, 32).long()
        ref = (bits << torch.arange(32, device="cuda")).sum(-1)
        ref = torch.where(ref >= 2**31, ref - 2**32, ref).to(torch.int32)
        chk.report(f"pack_weights V={vocab} H={cols}", torch.equal(wq, ref), "bit-exact vs torch")
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = (3 * torch.randn(6, 777, generator=gen, device="cuda")).to(dtype)
        x[1] = 0
        x[2, 5] = float("nan")
        x[3, 7] = float("inf")
        q, s = lib.quantize(x)
        xf = x.float()
        # nan_to_num would also clamp +inf to FLT_MAX; SEMANTICS keeps inf in the max
        # (scale = inf, so finite entries -> 0 and inf / inf = NaN -> 0).
        amax = xf.abs().masked_fill(torch.isnan(xf), 0.0).amax(dim=1)
        scale = torch.where(amax == 0, torch.ones_like(amax), amax / 127.0)
        r = torch.round(xf / scale[:, None])
        ref_q = torch.where(torch.isnan(r), torch.zeros_like(r), r.clamp(-127, 127)).to(torch.int8)
        ok = torch.equal(q, ref_q) and torch.equal(s, scale)
        chk.report(f"quantize_activations {str(dtype).split('.')[-1]}", ok, "bit-exact vs torch")


def tiny_checks(lib, chk):
    """Every kernel variant on shapes small enough for compute-sanitizer."""
    bf16, f32 = torch.bfloat16, torch.float32
    for name, seed, m, vocab, cols, dtype, bias, k, kw in [
            ("tiny NT=1 M=1 V=3001 H=512 k=50", 41, 1, 3001, 512, bf16, f32, 50, {}),
            ("tiny NT=2 M=10 V=3001 H=256 k=20", 42, 10, 3001, 256, bf16, None, 20, {}),
            ("tiny NT=4 M=20 V=2001 H=256 k=7", 43, 20, 2001, 256, bf16, None, 7, {}),
            ("tiny NT=8 M=40 V=2001 H=128 k=64", 44, 40, 2001, 128, bf16, bf16, 64, {}),
            ("tiny f32 M=3 V=1000 H=100 k=10", 45, 3, 1000, 100, f32, None, 10, {}),
            ("tiny k=2048 M=2 V=2500 H=64", 46, 2, 2500, 64, bf16, None, 2048, {}),
            ("tiny row stream f16 M=1 V=2001 H=200 k=7", 47, 1, 2001, 200, torch.float16, bf16, 7, {}),
            ("tiny row stream M=4 V=2001 H=256 k=20", 48, 4, 2001, 256, bf16, None, 20, {})]:
        run_dense_check(lib, chk, name, seed, m, vocab, cols, dtype, bias, k, **kw)
    for name, seed, m, vocab, cols, group, bias, k, kw in [
            ("tiny NT=1 M=1 V=3001 H=512 G=128 k=50", 51, 1, 3001, 512, 128, f32, 50, {}),
            ("tiny NT=2 M=12 V=3001 H=1024 G=256 k=20", 52, 12, 3001, 1024, 256, None, 20, {}),
            ("tiny NT=4 M=20 V=2001 H=512 G=64 k=7", 53, 20, 2001, 512, 64, None, 7, {}),
            ("tiny NT=8 M=40 V=2001 H=256 G=32 k=64", 54, 40, 2001, 256, 32, bf16, 64, {}),
            ("tiny generic M=3 V=1000 H=96 G=32 k=5", 55, 3, 1000, 96, 32, None, 5, {})]:
        run_binary_check(lib, chk, name, seed, m, vocab, cols, group, bias, k, **kw)


def run_checks(lib, small, tiny=False):
    chk = Checker()
    torch.backends.cuda.matmul.allow_tf32 = False
    check_pack_quantize(lib, chk)
    if tiny:
        tiny_checks(lib, chk)
        return chk
    bf16, f16, f32 = torch.bfloat16, torch.float16, torch.float32
    dense = [
        ("M=5 V=50001 H=1000 k=1 bias=bf16", 1, 5, 50001, 1000, bf16, bf16, 1, {}),
        ("M=3 V=30011 H=4096 k=2048 planted bias=f32", 2, 3, 30011, 4096, bf16, f32, 2048, {"plant_k": 2048}),
        ("M=64 V=100003 H=2048 k=64 bias=f16", 3, 64, 100003, 2048, bf16, f16, 64, {}),
        ("f16 M=2 V=20000 H=512 k=100", 4, 2, 20000, 512, f16, None, 100, {}),
        ("f32 (FFMA path) M=3 V=20000 H=300 k=10", 5, 3, 20000, 300, f32, None, 10, {}),
        ("M=70 (2 passes) V=9000 H=256 k=20", 6, 70, 9000, 256, bf16, None, 20, {}),
        ("odd H (FFMA path) M=4 V=7777 H=100 k=33 bias=f32", 7, 4, 7777, 100, bf16, f32, 33, {}),
        ("ties: rows repeat every 1024, M=2 V=8192 H=512 k=30", 8, 2, 8192, 512, bf16, None, 30, {"period": 1024}),
        ("M=17 V=4000 H=2880 k=2048 (k > rows per CTA)", 9, 17, 4000, 2880, bf16, None, 2048, {}),
        ("V=1 k=1", 10, 3, 1, 64, bf16, None, 1, {}),
        ("M=10 V=30000 H=1024 k=50 bias=bf16", 13, 10, 30000, 1024, bf16, bf16, 50, {}),
        # single-row and few-row passes (the row-stream kernel on the direct path)
        ("f16 M=1 V=20000 H=1000 k=100 bias=f32", 14, 1, 20000, 1000, f16, f32, 100, {}),
        ("M=1 V=30011 H=4096 k=2048 planted bias=bf16", 15, 1, 30011, 4096, bf16, bf16, 2048,
         {"plant_k": 2048}),
        ("ties: rows repeat every 1024, M=1 V=8192 H=512 k=30", 16, 1, 8192, 512, bf16, None, 30,
         {"period": 1024}),
        ("M=68 (last pass of 4 rows) V=9000 H=256 k=20 bias=f16", 17, 68, 9000, 256, bf16, f16, 20, {}),
        ("M=4 V=50001 H=2880 k=50 bias=bf16", 18, 4, 50001, 2880, bf16, bf16, 50, {}),
    ]
    if not small:
        dense.insert(0, ("W2 shape M=1 V=248320 H=5120 k=50", 11, 1, 248320, 5120, bf16, None, 50, {}))
        dense.insert(1, ("W2 shape M=16 V=248320 H=5120 k=50 bias=bf16", 12, 16, 248320, 5120, bf16, bf16, 50, {}))
    for name, seed, m, vocab, cols, dtype, bias, k, kw in dense:
        run_dense_check(lib, chk, name, seed, m, vocab, cols, dtype, bias, k, **kw)
    binary = [
        ("M=16 V=50001 H=2880 G=64 k=1 (odd scale stride: generic)", 21, 16, 50001, 2880, 64, None, 1, {}),
        ("M=3 V=30011 H=4096 G=256 k=2048 planted bias=bf16", 22, 3, 30011, 4096, 256, bf16, 2048, {"plant_k": 2048}),
        ("M=64 V=100003 H=1024 G=32 k=64 bias=f32", 23, 64, 100003, 1024, 32, f32, 64, {}),
        ("M=70 (2 passes) V=9000 H=512 G=128 k=20", 24, 70, 9000, 512, 128, None, 20, {}),
        ("M=4 V=20000 H=2880 G=32 k=10 (partial chunk)", 25, 4, 20000, 2880, 32, f16, 10, {}),
        ("M=8 V=3001 H=96 G=32 k=500 (odd scale stride: generic)", 26, 8, 3001, 96, 32, None, 500, {}),
        ("M=20 V=40000 H=1024 G=64 k=7", 29, 20, 40000, 1024, 64, None, 7, {}),
        ("M=12 V=60000 H=2048 G=128 k=50 bias=bf16", 30, 12, 60000, 2048, 128, bf16, 50, {}),
        ("M=16 V=70001 H=5120 G=128 k=100 bias=f16", 31, 16, 70001, 5120, 128, f16, 100, {}),
        ("M=1 V=151936 H=3072 G=256 k=1", 32, 1, 151936, 3072, 256, None, 1, {}),
        ("M=9 V=4099 H=8192 G=128 k=300 planted", 33, 9, 4099, 8192, 128, None, 300, {"plant_k": 300}),
        # passes of M <= 8 and G = 128 or 256 take the decode kernel (bit planes
        # of 1, 2, 4 or 8 token rows)
        ("M=5 V=40000 H=2048 G=128 k=50 bias=f32", 34, 5, 40000, 2048, 128, f32, 50, {}),
        ("M=8 V=33333 H=1536 G=256 k=200 planted", 35, 8, 33333, 1536, 256, None, 200, {"plant_k": 200}),
        ("M=2 V=65537 H=5120 G=128 k=2048 bias=f16", 36, 2, 65537, 5120, 128, f16, 2048, {}),
        # H = 3,584: a partial last box of signs, scale rows of 56 bytes (cp.async pieces)
        ("M=1 V=100003 H=3584 G=128 k=50 bias=bf16", 37, 1, 100003, 3584, 128, bf16, 50, {}),
    ]
    if not small:
        binary.insert(0, ("W1 shape M=1 V=248320 H=5120 G=128 k=50", 27, 1, 248320, 5120, 128, None, 50, {}))
        binary.insert(1, ("W1 shape M=64 V=248320 H=5120 G=128 k=50 bias=f32", 28, 64, 248320, 5120, 128, f32, 50, {}))
    for name, seed, m, vocab, cols, group, bias, k, kw in binary:
        run_binary_check(lib, chk, name, seed, m, vocab, cols, group, bias, k, **kw)
    nan_case(lib, chk)
    return chk


def nan_case(lib, chk):
    gen = rng(31)
    hidden = torch.randn(8, 64, generator=gen, device="cuda").to(torch.bfloat16)
    weight = torch.randn(64, 64, generator=gen, device="cuda").to(torch.bfloat16)
    weight[5, 3] = float("nan")
    weight[9, 0] = float("nan")
    weight[11, 1] = float("inf")
    for m in (8, 1):  # tensor-core and row-stream kernels
        t = dict(hidden=hidden[:m].contiguous(), weight=weight, bias=None)
        call = HeadCall(lib, "dense", 64, m, "cuda", **t)
        call.run()
        torch.cuda.synchronize()
        z64 = dense_logits(t, torch.float64)
        z32 = dense_logits(t, torch.float32)
        check_topk(chk, f"dense NaN/inf rows M={m}, k=V=64", call, z64, z32, 1e-5, expected_order(z32, 64))


# ---- bench --------------------------------------------------------------------------

def median_us(fn, runs, warmup=5):
    """Median device time of fn, captured once in a CUDA graph and replayed."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(warmup):
        graph.replay()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for i in range(runs):
        starts[i].record()
        graph.replay()
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) * 1000.0 for a, b in zip(starts, ends))
    return times[len(times) // 2], times[0], times[-1]


def kernel_breakdown(fn, calls=5):
    """Mean device time per call of each kernel fn launches (torch.profiler), so
    that a slow row shows whether scoring, prep or merge holds it."""
    try:
        from torch.profiler import ProfilerActivity, profile
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
        parts = []
        for e in prof.key_averages():
            total = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
            if total <= 0 or e.count == 0:
                continue
            name = e.key.replace("(anonymous namespace)", "").split("(")[0].split("<")[0].split("::")[-1]
            parts.append((total / calls, f"{name} x{e.count // calls} {total / calls:.1f} us"))
        return ", ".join(p for _, p in sorted(parts, reverse=True)) or "no kernels recorded"
    except Exception as ex:  # the breakdown is diagnostic only
        return f"unavailable ({type(ex).__name__}: {ex})"


def copy_bandwidth():
    a = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    med, _, _ = median_us(lambda: b.copy_(a), 20)
    return 2 * a.numel() / (med * 1e-6) / 1e12


def env_median_us(name, value, fn, runs):
    """median_us with the switch name=value set while the graph is captured."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        return median_us(fn, runs)
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def pinned_median_us(path, fn, runs):
    """median_us with NEXTTOK_CUDA_LM_HEAD_PATH=path while the graph is captured."""
    return env_median_us("NEXTTOK_CUDA_LM_HEAD_PATH", path, fn, runs)


def run_bench(lib, runs, slow_runs, ms, compare_envs=(), pins=True):
    V, H, G, K = 248320, 5120, 128, 50
    rows = []
    gen = rng(1234)
    # W2: dense bf16 weights; W1: the binary head and its dequantized bf16 twin
    weight = (torch.randn(V, H, generator=gen, device="cuda") / math.sqrt(H)).to(torch.bfloat16)
    signs = torch.randint(0, 2, (V, H), generator=gen, device="cuda", dtype=torch.int8) * 2 - 1
    wq = lib.pack_weights(signs)
    wscale = ((0.5 + torch.rand(V, H // G, generator=gen, device="cuda")) / math.sqrt(H)).to(torch.float16)
    deq = (signs.view(V, H // G, G).to(torch.bfloat16) * wscale.to(torch.bfloat16)[:, :, None]).view(V, H)
    del signs
    torch.cuda.synchronize()
    bin_bytes = wq.numel() * 4 + wscale.numel() * 2
    dense_bytes = weight.numel() * 2
    print(f"\nweights: binary {bin_bytes / 1e6:.1f} MB, dense bf16 {dense_bytes / 1e6:.1f} MB "
          f"(L2 60 MB)", flush=True)
    workspace = {}
    for m in ms:
        x = torch.randn(m, H, generator=gen, device="cuda")
        xb = x.to(torch.bfloat16)
        act_q, act_scale = lib.quantize(x)
        # baseline of both: cuBLAS bf16 matmul + torch.topk
        def baseline(w=None):
            return torch.topk(xb @ w.T, K, dim=1)
        base_logit_bytes = m * V * 2 * 2  # bf16 logits written then read

        call = HeadCall(lib, "binary", K, m, "cuda", act_q=act_q, act_scale=act_scale, wq=wq,
                        wscale=wscale, group=G)
        workspace[f"W1 M={m}"] = call.workspace_bytes
        ours, lo, hi = median_us(call.run, runs)
        base, _, _ = median_us(lambda: baseline(deq), slow_runs)
        read = bin_bytes + m * H + m * 4
        rows.append((f"W1 binary M={m}", ours, lo, hi, read, base, dense_bytes + m * H * 2 + base_logit_bytes))
        print(f"W1 M={m}: ours {ours:.1f} us (min {lo:.1f}, max {hi:.1f}), baseline {base:.1f} us", flush=True)
        print(f"  kernels: {kernel_breakdown(call.run)}", flush=True)
        def pinned_row(path, label):
            t, tlo, thi = pinned_median_us(path, call.run, runs)
            rows.append((f"W1 binary M={m}, {label}", t, tlo, thi, read, base,
                         dense_bytes + m * H * 2 + base_logit_bytes))
            print(f"W1 M={m} {label}: {t:.1f} us", flush=True)

        def compare_rows(label, fn, n, read, base_bytes):
            # The same call with each of the CUDA backend's switches set (NAME=VALUE).
            for setting in compare_envs:
                name, value = setting.split("=", 1)
                t, tlo, thi = env_median_us(name, value, fn, n)
                rows.append((f"{label} M={m}, {setting}", t, tlo, thi, read, base, base_bytes))
                print(f"{label} M={m} {setting}: {t:.1f} us", flush=True)

        compare_rows("W1 binary", call.run, runs, read, dense_bytes + m * H * 2 + base_logit_bytes)
        hopper = torch.cuda.get_device_capability()[0] >= 9
        if pins and m <= 8:
            # The stream decode kernel (expanded signs): at M = 1, 2 the bit planes' predecessor,
            # at M = 3..8 what the warpgroup-MMA kernel replaced.
            pinned_row("expanded", "expanded signs")
        if pins and m <= 2 and hopper:
            # The bit-plane kernel with its stages filled by cp.async pieces instead of bulk
            # copies, and the pass kernel (warpgroup MMAs on sm_90) instead of the bit planes.
            pinned_row("pieces", "cp.async pieces")
            pinned_row("wide", "pass kernel")
        if pins and m > 8 and hopper:
            # The warpgroup-MMA kernel fed by cp.async stages where the default feeds it by
            # bulk tensor copies.
            pinned_row("pass-async-copies", "pass cp.async copies")
        if pins and m >= 3:
            # Warp MMAs (sm_80's pass kernel) where sm_90 takes warpgroup MMAs.
            pinned_row("sync-mma", "warp MMAs")

        call = HeadCall(lib, "dense", K, m, "cuda", hidden=xb, weight=weight)
        workspace[f"W2 M={m}"] = call.workspace_bytes
        ours, lo, hi = median_us(call.run, slow_runs)
        base, _, _ = median_us(lambda: baseline(weight), slow_runs)
        read = dense_bytes + m * H * 2
        rows.append((f"W2 dense bf16 M={m}", ours, lo, hi, read, base, read + base_logit_bytes))
        print(f"W2 M={m}: ours {ours:.1f} us (min {lo:.1f}, max {hi:.1f}), baseline {base:.1f} us", flush=True)
        print(f"  kernels: {kernel_breakdown(call.run)}", flush=True)
        compare_rows("W2 dense bf16", call.run, slow_runs, read, read + base_logit_bytes)
        if pins:
            # The same call pinned to the direct (register-fed) kernels, the
            # pre-sm_90 path, for the comparison.
            old, olo, ohi = pinned_median_us("direct", call.run, slow_runs)
            rows.append((f"W2 dense bf16 M={m}, direct loads", old, olo, ohi, read, base, read + base_logit_bytes))
            print(f"W2 M={m} direct loads: {old:.1f} us", flush=True)
        del call
    return rows, workspace


# The kernel pins (NEXTTOK_CUDA_LM_HEAD_PATH) --check-<path> runs the checks under.
CHECK_PATHS = ("generic", "wide", "expanded", "direct", "pieces", "sync-mma", "pass-bulk-copies",
               "pass-async-copies")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path to the built libnexttok.so")
    ap.add_argument("--check", action="store_true")
    for path in CHECK_PATHS:
        ap.add_argument(f"--check-{path}", action="store_true",
                        help=f"also run the check with NEXTTOK_CUDA_LM_HEAD_PATH={path} (subprocess)")
    ap.add_argument("--small", action="store_true", help="check without the full W1/W2 shapes")
    ap.add_argument("--tiny", action="store_true", help="check tiny shapes only (compute-sanitizer)")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--slow-runs", type=int, default=100)
    ap.add_argument("--m", default="1,4,16,64")
    ap.add_argument("--compare-env", action="append", default=[], metavar="NAME=VALUE",
                    help="also time each row with this switch set (repeatable)")
    ap.add_argument("--no-pins", action="store_true", help="skip the rows pinned to other kernels")
    args = ap.parse_args()
    lib = Lib(os.path.abspath(args.lib))
    torch.cuda.init()
    print(f"device: {torch.cuda.get_device_name()} | torch {torch.__version__} | "
          f"path override: {os.environ.get('NEXTTOK_CUDA_LM_HEAD_PATH', 'none')}", flush=True)
    failures = 0
    if args.check:
        t0 = time.time()
        chk = run_checks(lib, args.small, args.tiny)
        failures += chk.failures
        print(f"check: {len(chk.lines) - chk.failures} passed, {chk.failures} failed "
              f"({time.time() - t0:.0f} s)", flush=True)
    for path in CHECK_PATHS:
        if getattr(args, "check_" + path.replace("-", "_")):
            env = dict(os.environ, NEXTTOK_CUDA_LM_HEAD_PATH=path)
            cmd = [sys.executable, os.path.abspath(__file__), "--lib", args.lib, "--check", "--small"]
            r = subprocess.run(cmd, env=env)
            failures += 1 if r.returncode != 0 else 0
    if args.bench:
        tbps = copy_bandwidth()
        print(f"copy ceiling: {tbps:.2f} TB/s (read + write)", flush=True)
        rows, workspace = run_bench(lib, args.runs, args.slow_runs, [int(v) for v in args.m.split(",")],
                                    args.compare_env, not args.no_pins)
        print("\nworkspace bytes: " + ", ".join(f"{k} {v:,}" for k, v in workspace.items()))
        print("\n| row | ours median us | bytes read | GB/s | baseline us | baseline bytes | speed-up |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, ours, lo, hi, read, base, base_bytes in rows:
            print(f"| {name} | {ours:.1f} | {read / 1e6:.1f} MB | {read / (ours * 1e-6) / 1e9:.0f} | "
                  f"{base:.1f} | {base_bytes / 1e6:.1f} MB | {base / ours:.2f}x |")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
