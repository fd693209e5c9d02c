#!/usr/bin/env python3
"""W3 (logits -> token) and W4 (grammar bitmask) on a CUDA GPU: nexttok through
its C ABI (ctypes) against the PyTorch baselines of BENCH.md, timed in the same
process on the same inputs.

Timing: CUDA events around each call, the queue kept ahead of the host by a GPU
sleep before every timed call (so host overhead is not counted), warm-up, median
of >= 100 calls, inputs rotated over more than 4x the L2. nexttok rows also get a
"graph" figure: many calls captured in one CUDA graph, replayed, time per call.

  python3 bench/cuda_sampling_bench.py --lib build/libnexttok.so [--check] [--json out.json]

--check first verifies, on a few rows, that greedy tokens equal torch.argmax,
that sampled tokens lie in the keep-set of a sort-based reference, that tokens
equal the CPU backend's bit for bit, and that the mask ops equal torch's.
"""
import argparse
import ctypes as C
import json
import math
import os
import re
import statistics
import sys
import time

import torch

# ---- the C ABI (include/nexttok/nexttok.h) -------------------------------------

NT_F32, NT_F16, NT_BF16, NT_I8, NT_I32, NT_I64, NT_U64, NT_BOOL = range(8)
NT_DEVICE_CPU, NT_DEVICE_CUDA = 1, 2
NT_SAMPLE_TOP_P_JOINT = 1
DTYPES = {torch.float32: NT_F32, torch.float16: NT_F16, torch.bfloat16: NT_BF16,
          torch.int8: NT_I8, torch.int32: NT_I32, torch.int64: NT_I64, torch.bool: NT_BOOL}


class Tensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("byte_offset", C.c_int64), ("dtype", C.c_int32),
                ("ndim", C.c_int32), ("shape", C.c_int64 * 2), ("row_stride", C.c_int64),
                ("device", C.c_int32), ("device_id", C.c_int32)]


class ParamF32(C.Structure):
    _fields_ = [("per_row", C.c_void_p), ("scalar", C.c_float)]


class ParamI32(C.Structure):
    _fields_ = [("per_row", C.c_void_p), ("scalar", C.c_int32)]


class ParamU64(C.Structure):
    _fields_ = [("per_row", C.c_void_p), ("scalar", C.c_uint64)]


class SampleArgs(C.Structure):
    _fields_ = [("logits", Tensor), ("temperature", ParamF32), ("top_k", ParamI32),
                ("top_p", ParamF32), ("min_p", ParamF32), ("seed", ParamU64),
                ("offset", ParamU64), ("uniform", Tensor), ("flags", C.c_uint32),
                ("tokens", Tensor)]


class MaskArgs(C.Structure):
    _fields_ = [("logits", Tensor), ("bitmask", Tensor), ("indices", Tensor)]


class PackArgs(C.Structure):
    _fields_ = [("allowed", Tensor), ("bitmask", Tensor)]


class Lib:
    def __init__(self, path):
        self.lib = C.CDLL(path)
        L = self.lib
        L.nt_last_error.restype = C.c_char_p
        L.nt_sample_workspace_size.argtypes = [C.POINTER(SampleArgs), C.POINTER(C.c_size_t)]
        L.nt_sample.argtypes = [C.POINTER(SampleArgs), C.c_void_p, C.c_size_t, C.c_void_p]
        L.nt_apply_token_bitmask.argtypes = [C.POINTER(MaskArgs), C.c_void_p]
        L.nt_bitmask_from_allowed.argtypes = [C.POINTER(PackArgs), C.c_void_p]
        for f in (L.nt_sample_workspace_size, L.nt_sample, L.nt_apply_token_bitmask,
                  L.nt_bitmask_from_allowed):
            f.restype = C.c_int

    def ok(self, status, what):
        if status != 0:
            raise RuntimeError("%s failed (%d): %s" % (what, status, self.lib.nt_last_error().decode()))


def view(t):
    """nt_tensor view of a torch tensor (1-D or 2-D, last dim contiguous), or absent."""
    v = Tensor()
    if t is None:
        return v
    v.data = t.data_ptr()
    v.dtype = DTYPES[t.dtype]
    v.ndim = t.dim()
    if t.dim() == 2:
        v.shape[0], v.shape[1] = t.shape
        v.row_stride = t.stride(0)
        assert t.stride(1) == 1
    else:
        v.shape[0], v.shape[1] = t.shape[0], 0
        v.row_stride = t.shape[0]
    v.device = NT_DEVICE_CUDA if t.is_cuda else NT_DEVICE_CPU
    v.device_id = (t.device.index or 0) if t.is_cuda else 0
    return v


def stream_ptr():
    return C.c_void_p(torch.cuda.current_stream().cuda_stream)


# ---- sampling configurations ----------------------------------------------------

# (name, T, top_k, top_p, min_p); "mixed" is per-row (MIXED_ROWS cycled over the batch).
CONFIGS = [("greedy", 0.0, 0, 1.0, 0.0), ("plain T=0.7", 0.7, 0, 1.0, 0.0),
           ("top-k 50", 0.7, 50, 1.0, 0.0), ("top-p 0.9", 0.7, 0, 0.9, 0.0),
           ("k50+p0.9+min-p 0.05", 0.7, 50, 0.9, 0.05), ("mixed per-row", None, None, None, None)]
MIXED_ROWS = [(0.0, 0, 1.0, 0.0), (0.7, 0, 1.0, 0.0), (0.7, 50, 1.0, 0.0), (0.7, 0, 0.9, 0.0),
              (0.7, 50, 0.9, 0.05), (1.0, 0, 1.0, 0.1)]
SHAPES = [(1, 128256), (64, 128256), (256, 128256), (256, 248320), (1024, 32000)]


class RowParams:
    """Per-row parameter tensors on a device (also used as scalars when uniform)."""

    def __init__(self, cfg, rows, device):
        if cfg[1] is None:
            table = [MIXED_ROWS[r % len(MIXED_ROWS)] for r in range(rows)]
            self.per_row = True
        else:
            table = [cfg[1:]] * rows
            self.per_row = False
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


def sample_args(logits, tokens, prm, uniform=None, flags=0, per_row_seed=True):
    a = SampleArgs()
    a.logits = view(logits)
    a.tokens = view(tokens)
    a.uniform = view(uniform)
    a.flags = flags
    t, k, p, m = prm.scalar
    if prm.per_row:
        a.temperature.per_row, a.top_k.per_row = prm.t.data_ptr(), prm.k.data_ptr()
        a.top_p.per_row, a.min_p.per_row = prm.p.data_ptr(), prm.m.data_ptr()
    else:
        a.temperature.scalar, a.top_k.scalar, a.top_p.scalar, a.min_p.scalar = t, k, p, m
    if per_row_seed:
        a.seed.per_row, a.offset.per_row = prm.seed.data_ptr(), prm.offset.data_ptr()
    else:
        a.seed.scalar, a.offset.scalar = 1234567, 89
    return a


class Sampler:
    """Pre-built nt_sample calls over rotated input copies, sharing one workspace."""

    def __init__(self, lib, copies, prm, token_dtype=torch.int64, flags=0, uniform=None):
        self.lib = lib
        rows = copies[0].shape[0]
        dev = copies[0].device
        self.tokens = [torch.empty(rows, dtype=token_dtype, device=dev) for _ in copies]
        self.args = [sample_args(x, tk, prm, uniform, flags) for x, tk in zip(copies, self.tokens)]
        size = C.c_size_t(0)
        lib.ok(lib.lib.nt_sample_workspace_size(C.byref(self.args[0]), C.byref(size)), "workspace")
        self.ws_bytes = size.value
        self.ws = torch.empty(max(size.value, 16), dtype=torch.uint8, device=dev) if dev.type == "cuda" \
            else torch.empty(max(size.value, 16), dtype=torch.uint8)

    def __call__(self, i, stream=None):
        a = self.args[i % len(self.args)]
        s = stream if stream is not None else (stream_ptr() if self.ws.is_cuda else None)
        self.lib.ok(self.lib.lib.nt_sample(C.byref(a), C.c_void_p(self.ws.data_ptr()),
                                           self.ws_bytes, s), "nt_sample")
        return self.tokens[i % len(self.tokens)]


# ---- baselines ----------------------------------------------------------------------

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


def torch_argmax(logits):
    return torch.argmax(logits, dim=-1)


def unpack_bitmask(bitmask, vocab):
    shifts = torch.arange(32, device=bitmask.device, dtype=torch.int32)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1
    return bits.reshape(bitmask.shape[0], -1)[:, :vocab].bool()


def torch_mask(logits, bitmask):
    allowed = unpack_bitmask(bitmask, logits.shape[1])
    logits.masked_fill_(~allowed, float("-inf"))


# ---- inputs -------------------------------------------------------------------------

def make_logits(rows, vocab, kind, dtype, gen):
    if kind == "peaked":
        x = torch.randn(rows, vocab, device="cuda", generator=gen) * 2.0
        cols = torch.randint(0, vocab, (rows, 4), device="cuda", generator=gen)
        vals = torch.rand(rows, 4, device="cuda", generator=gen) * 6.0 + 10.0
        x.scatter_(1, cols, vals)
    else:
        x = torch.randn(rows, vocab, device="cuda", generator=gen)
    return x.to(dtype)


def rotation_copies(one_bytes, l2_bytes, at_least=2):
    return max(at_least, math.ceil(4.0 * l2_bytes / max(one_bytes, 1)) + 1)


def make_copies(rows, vocab, kind, dtype, gen, l2_bytes, cap_bytes=6 << 30):
    one = rows * vocab * torch.tensor([], dtype=dtype).element_size()
    n = rotation_copies(one, l2_bytes)
    n = min(n, max(2, cap_bytes // max(one, 1)))
    big = make_logits(rows * n, vocab, kind, dtype, gen)
    return [big[i * rows:(i + 1) * rows] for i in range(n)]


def make_bitmask(rows, vocab, kind, gen):
    words = (vocab + 31) // 32
    if kind == "50% random":
        allowed = torch.rand(rows, vocab, device="cuda", generator=gen) < 0.5
    elif kind == "1% allowed":
        allowed = torch.rand(rows, vocab, device="cuda", generator=gen) < 0.01
    else:  # blocky: runs of 1-4k tokens, alternately allowed and masked
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
    weights = (torch.ones(32, dtype=torch.int64, device="cuda") << torch.arange(32, device="cuda"))
    packed = (padded.view(rows, words, 32) * weights).sum(-1)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)
    return packed, allowed


# ---- timing -------------------------------------------------------------------------

SLEEP_CYCLES = 1_000_000  # ~0.5 ms of GPU sleep ahead of every timed call


def time_calls(fn, n_inputs, runs, warmup):
    """Median microseconds of fn(i) over `runs` calls on rotated inputs."""
    for i in range(warmup):
        fn(i % n_inputs)
    torch.cuda.synchronize()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for i in range(runs):
        torch.cuda._sleep(SLEEP_CYCLES)
        start[i].record()
        fn((warmup + i) % n_inputs)
        end[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) * 1000.0 for s, e in zip(start, end))
    return statistics.median(times), times[len(times) // 10], times[-1 - len(times) // 10]


def time_graph(fn, n_inputs, total_calls=1000):
    """Microseconds per call of a CUDA graph of fn over every rotated input."""
    calls = min(n_inputs, 512)
    replays = max(2, total_calls // calls)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):
            fn(i % n_inputs, stream_ptr())
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i, stream_ptr())
    graph.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        graph.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1000.0 / (replays * calls)


# ---- checks -------------------------------------------------------------------------

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
            z = pr[: (fin if joint else n_k)].sum()
            if p <= 0:
                n_p = 1
            else:
                cum = pr[: (fin if joint else n_k)].cumsum(0)
                hit = torch.nonzero(cum >= p * z)
                n_p = int(hit[0]) + 1 if hit.numel() else (fin if joint else n_k)
        n_m = int((pr >= min(m, 1.0)).sum()) if m > 0 else fin
        keep[r, order[: min(n_k, n_p, n_m)]] = True
    return keep


def run_checks(lib, gen):
    results = []

    def report(name, ok, detail=""):
        results.append((name, ok))
        print("CHECK %-60s %s %s" % (name, "ok" if ok else "FAIL", detail), flush=True)

    for kind in ("peaked", "flat"):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            rows, vocab = (64, 128256) if dtype == torch.float32 else (16, 50021)
            x = make_logits(rows, vocab, kind, dtype, gen)
            for cfg in CONFIGS:
                prm = RowParams(cfg, rows, "cuda")
                for flags, uni in ((0, None), (NT_SAMPLE_TOP_P_JOINT, None),
                                   (0, torch.rand(rows, device="cuda", generator=gen))):
                    if (flags or uni is not None) and cfg[0] not in ("top-p 0.9", "mixed per-row",
                                                                    "k50+p0.9+min-p 0.05"):
                        continue
                    tag = "%s %s %s V=%d%s%s" % (cfg[0], kind, str(dtype)[6:], vocab,
                                                 " joint" if flags else "", " u" if uni is not None else "")
                    try:
                        smp = Sampler(lib, [x], prm, flags=flags, uniform=uni)
                        got = smp(0).clone()
                        again = smp(0).clone()
                        torch.cuda.synchronize()
                        report("repeat bitwise " + tag, bool(torch.equal(got, again)))
                        if cfg[0] == "greedy":
                            report("greedy == torch.argmax " + tag, bool(torch.equal(got, torch.argmax(x.float(), -1))))
                        keep = reference_keep(x, prm, joint=bool(flags))
                        inside = keep.gather(1, got.clamp(min=0).unsqueeze(1)).squeeze(1) & (got >= 0)
                        report("in keep-set " + tag, bool(inside.all()), "" if inside.all() else
                               "rows %s" % torch.nonzero(~inside).flatten()[:8].tolist())
                        # the CPU backend on the same inputs: bit-identical tokens
                        xc = x.cpu()
                        prc = prm.to("cpu")
                        tc = torch.empty(rows, dtype=torch.int64)
                        uc = uni.cpu() if uni is not None else None
                        a = sample_args(xc, tc, prc, uc, flags)
                        size = C.c_size_t(0)
                        st = lib.lib.nt_sample_workspace_size(C.byref(a), C.byref(size))
                        if st != 0:
                            report("cpu backend " + tag, False, lib.lib.nt_last_error().decode())
                            continue
                        ws = torch.empty(max(size.value, 16), dtype=torch.uint8)
                        st = lib.lib.nt_sample(C.byref(a), C.c_void_p(ws.data_ptr()), size.value, None)
                        if st != 0:
                            report("cpu backend " + tag, False, lib.lib.nt_last_error().decode())
                            continue
                        same = tc.to("cuda") == got
                        report("== cpu backend " + tag, bool(same.all()), "" if same.all() else
                               "rows %s cuda %s cpu %s" % (torch.nonzero(~same).flatten()[:6].tolist(),
                                                           got[~same][:6].tolist(), tc.cuda()[~same][:6].tolist()))
                    except Exception as e:  # keep going: report and move on
                        report("error " + tag, False, repr(e)[:200])
    # Grammar mask: equal to masked_fill, indices with out-of-range entries, packing.
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for rows, vocab in ((8, 128256), (5, 1001)):
            try:
                x = make_logits(rows, vocab, "flat", dtype, gen)
                bm, allowed = make_bitmask(rows, vocab, "50% random", gen)
                ours, ref = x.clone(), x.clone()
                a = MaskArgs(view(ours), view(bm), view(None))
                lib.ok(lib.lib.nt_apply_token_bitmask(C.byref(a), stream_ptr()), "mask")
                torch_mask(ref, bm)
                report("apply_token_bitmask %s %dx%d" % (str(dtype)[6:], rows, vocab),
                       bool(torch.equal(ours.view(torch.int16 if dtype != torch.float32 else torch.int32),
                                        ref.view(torch.int16 if dtype != torch.float32 else torch.int32))))
                idx = torch.tensor([rows - 1, -3, 0, rows + 4, 0], dtype=torch.int64, device="cuda")
                ours, ref = x.clone(), x.clone()
                a = MaskArgs(view(ours), view(bm), view(idx))
                lib.ok(lib.lib.nt_apply_token_bitmask(C.byref(a), stream_ptr()), "mask indices")
                for r in (rows - 1, 0):
                    ref[r].masked_fill_(~allowed[r], float("-inf"))
                report("apply_token_bitmask indices %s %dx%d" % (str(dtype)[6:], rows, vocab),
                       bool(torch.equal(ours.float().nan_to_num(), ref.float().nan_to_num())))
                words = (vocab + 31) // 32
                packed = torch.empty(rows, words, dtype=torch.int32, device="cuda")
                pa = PackArgs(view(allowed), view(packed))
                lib.ok(lib.lib.nt_bitmask_from_allowed(C.byref(pa), stream_ptr()), "pack")
                report("bitmask_from_allowed %dx%d" % (rows, vocab), bool(torch.equal(packed, bm)))
            except Exception as e:
                report("error mask %s %dx%d" % (str(dtype)[6:], rows, vocab), False, repr(e)[:200])
    torch.cuda.synchronize()
    return results


# ---- workloads --------------------------------------------------------------------------

def with_env(setting, fn):
    """fn() with one of the CUDA backend's switches set (NAME=VALUE; read on every call)."""
    name, value = setting.split("=", 1)
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        return fn()
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def bench_w3(lib, gen, l2, runs, warmup, rows_out, budget_end, match, compare_env=None):
    for rows, vocab in SHAPES:
        for kind in ("peaked", "flat"):
            copies = make_copies(rows, vocab, kind, torch.float32, gen, l2)
            bytes_moved = rows * vocab * 4 + rows * 8
            for cfg in CONFIGS:
                if time.time() > budget_end:
                    print("time budget reached, skipping the rest of W3", flush=True)
                    return
                name = "W3 %s B=%d V=%d %s" % (cfg[0], rows, vocab, kind)
                if not match.search(name):
                    continue
                try:
                    prm = RowParams(cfg, rows, "cuda")
                    smp = Sampler(lib, copies, prm)
                    ours = time_calls(lambda i: smp(i), len(copies), runs, warmup)
                    graph = time_graph(lambda i, s: smp(i, s), len(copies))
                    alt = None
                    if compare_env:  # same rows with the switch set; tokens must not change
                        plain_tokens = smp(0).clone()
                        # Its own calls: a switch may change the workspace a call needs.
                        alt_smp = with_env(compare_env, lambda: Sampler(lib, copies, prm))
                        same = bool(torch.equal(with_env(compare_env, lambda: alt_smp(0).clone()), plain_tokens))
                        alt = (with_env(compare_env, lambda: time_calls(lambda i: alt_smp(i), len(copies), runs,
                                                                        warmup))[0],
                               with_env(compare_env, lambda: time_graph(lambda i, s: alt_smp(i, s),
                                                                        len(copies))),
                               same)
                    if cfg[0] == "greedy":
                        base = time_calls(lambda i: torch_argmax(copies[i]), len(copies), runs, warmup)
                        base_name = "torch.argmax"
                    else:
                        base = time_calls(lambda i: torch_sample(copies[i], prm), len(copies), runs, warmup)
                        base_name = "sort chain"
                except Exception as e:  # report and go on with the other rows
                    print("%-55s ERROR %r" % (name, e), flush=True)
                    continue
                rows_out.append(dict(row=name, ours_us=ours[0], ours_p10=ours[1], ours_p90=ours[2],
                                     graph_us=graph, bytes=bytes_moved, base_us=base[0], baseline=base_name,
                                     workspace=smp.ws_bytes, copies=len(copies)))
                if alt is not None:
                    rows_out[-1].update(alt_us=alt[0], alt_graph_us=alt[1], alt_same_tokens=alt[2],
                                        alt_env=compare_env)
                print("%-55s ours %8.1f us (graph %7.1f)  %s %9.1f us" % (name, ours[0], graph, base_name, base[0]),
                      flush=True)
            copies = None  # free before the next shape
            torch.cuda.empty_cache()


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


def bench_w4(lib, gen, l2, runs, warmup, rows_out, budget_end, match):
    vocab = 128256
    for dtype in (torch.float32, torch.bfloat16):
        for rows in (1, 64, 256):
            copies = make_copies(rows, vocab, "flat", dtype, gen, l2)
            for kind in ("50% random", "1% allowed", "blocky"):
                if time.time() > budget_end:
                    print("time budget reached, skipping the rest of W4", flush=True)
                    return
                name = "W4 %s B=%d V=%d %s" % (str(dtype)[6:], rows, vocab, kind)
                if not match.search(name):
                    continue
                try:
                    bm, _ = make_bitmask(rows, vocab, kind, gen)
                    args = [MaskArgs(view(x), view(bm), view(None)) for x in copies]

                    def ours_call(i, s=None):
                        lib.ok(lib.lib.nt_apply_token_bitmask(C.byref(args[i % len(args)]),
                                                              s if s is not None else stream_ptr()), "mask")

                    ours = time_calls(ours_call, len(copies), runs, warmup)
                    graph = time_graph(ours_call, len(copies))
                    base = time_calls(lambda i: torch_mask(copies[i], bm), len(copies), runs, warmup)
                except Exception as e:
                    print("%-55s ERROR %r" % (name, e), flush=True)
                    continue
                rows_out.append(dict(row=name, ours_us=ours[0], ours_p10=ours[1], ours_p90=ours[2],
                                     graph_us=graph, bytes=mask_bytes(bm, vocab, copies[0].element_size()),
                                     base_us=base[0], baseline="unpack + masked_fill_", copies=len(copies)))
                print("%-55s ours %8.1f us (graph %7.1f)  baseline %9.1f us" % (name, ours[0], graph, base[0]),
                      flush=True)
            copies = None  # free before the next shape
            torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(os.path.dirname(__file__), "..", "build", "libnexttok.so"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", choices=["w3", "w4"], default=None)
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for the timed part")
    ap.add_argument("--match", default="", help="time only the rows whose name matches this regex")
    ap.add_argument("--pdl-compare", action="store_true",
                    help="also time W3 rows with NEXTTOK_CUDA_PDL=1 and check their tokens are unchanged")
    ap.add_argument("--compare-env", default=None, metavar="NAME=VALUE",
                    help="also time W3 rows with this switch set (e.g. NEXTTOK_CUDA_SAMPLE_MERGE=kernel) "
                         "and check their tokens are unchanged")
    args = ap.parse_args()
    compare_env = "NEXTTOK_CUDA_PDL=1" if args.pdl_compare else args.compare_env

    lib = Lib(args.lib)
    torch.cuda.init()
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 60 << 20) or (60 << 20)
    print("device: %s, %d SMs, L2 %.0f MiB, torch %s" % (props.name, props.multi_processor_count,
                                                       l2 / 2**20, torch.__version__), flush=True)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(20261130)
    checks = run_checks(lib, gen) if args.check else []

    rows = []
    end = time.time() + args.budget
    if args.only in (None, "w3"):
        bench_w3(lib, gen, l2, args.runs, args.warmup, rows, end, re.compile(args.match), compare_env)
    if args.only in (None, "w4"):
        bench_w4(lib, gen, l2, args.runs, args.warmup, rows, end, re.compile(args.match))

    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=props.name, sms=props.multi_processor_count, l2=l2,
                           torch=torch.__version__, checks=checks, rows=rows), f, indent=1)
    failed = [c for c, ok in checks if not ok]
    print()
    if checks:
        print("checks: %d ok, %d failed%s" % (len(checks) - len(failed), len(failed),
                                              (": " + "; ".join(failed[:5])) if failed else ""))
    print("| row | ours us | graph us | GB/s | baseline us | speed-up |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %.1f | %.1f | %.0f | %.1f | %.1fx |" % (r["row"], r["ours_us"], r["graph_us"],
                                                            r["bytes"] / (r["ours_us"] * 1e3), r["base_us"],
                                                            r["base_us"] / r["ours_us"]))
    alt_rows = [r for r in rows if "alt_us" in r]
    if alt_rows:
        print()
        print("| row | ours us | with %s us | graph us | graph with it us | same tokens |" % alt_rows[0]["alt_env"])
        print("|---|---:|---:|---:|---:|---|")
        for r in alt_rows:
            print("| %s | %.1f | %.1f | %.1f | %.1f | %s |" % (r["row"], r["ours_us"], r["alt_us"], r["graph_us"],
                                                              r["alt_graph_us"], "yes" if r["alt_same_tokens"] else "NO"))
        if not all(r["alt_same_tokens"] for r in alt_rows):
            return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
