#!/usr/bin/env python3
"""Per-call host overhead of the Python package, on tiny shapes where the
kernels take less than the host does (so wall time per call = host time).

Rows, per device (CPU always, CUDA when present):
  ext      nexttok._nexttok with preallocated outputs: the binding and the C call
  public   nexttok.<op>(torch tensors): what users call (eager: kernel directly)
  op       torch.ops.nexttok.<op>.default: the dispatcher path (torch.compile, subclasses)
  numpy    nexttok.<op>(numpy arrays) (CPU only)
Time per call = wall time of N back-to-back calls / N, best of --repeat runs,
with one synchronize at the end on CUDA.

  python3 bench/python_overhead_bench.py [--calls 20000] [--json out.json]
"""
import argparse
import json
import time

import torch

import nexttok
from nexttok import _nexttok as ext

T = nexttok.torch


def per_call_us(fn, calls, repeat, sync):
    for _ in range(min(1000, calls)):
        fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


def cases(device, b, v):
    logits = torch.randn(b, v, device=device)
    mask = torch.full((b, (v + 31) // 32), -1, dtype=torch.int32, device=device)
    tokens = torch.empty(b, dtype=torch.int64, device=device)
    hidden = torch.randn(1, 64, device=device)
    weight = torch.randn(v, 64, device=device)
    vals = torch.empty(1, 8, device=device)
    idx = torch.empty(1, 8, dtype=torch.int64, device=device)
    stream, alloc = T._stream(logits), T._alloc(logits)
    seeds = torch.arange(b, device=device)
    op = T._op
    yield ("sample", {
        "ext": lambda: ext.sample(logits, tokens, 0.7, 50, 0.9, 0.0, 1, 2, None, False, stream,
                                  alloc),
        "public": lambda: nexttok.sample(logits, 0.7, 50, 0.9, seed=1, offset=2),
        "op": lambda: op["sample"](logits, None, 0.7, None, 50, None, 0.9, None, 0.0, None, 1,
                                   None, 2, None, False),
    })
    yield ("sample, per-row seed", {
        "ext": lambda: ext.sample(logits, tokens, 0.7, 50, 0.9, 0.0, seeds, 2, None, False,
                                  stream, alloc),
        "public": lambda: nexttok.sample(logits, 0.7, 50, 0.9, seed=seeds, offset=2),
        "op": lambda: op["sample"](logits, None, 0.7, None, 50, None, 0.9, None, 0.0, seeds, 0,
                                   None, 2, None, False),
    })
    yield ("apply_token_bitmask", {
        "ext": lambda: ext.apply_token_bitmask(logits, mask, None, stream),
        "public": lambda: nexttok.apply_token_bitmask(logits, mask),
        "op": lambda: op["apply_token_bitmask"](logits, mask, None),
    })
    yield ("lm_head_topk_dense", {
        "ext": lambda: ext.lm_head_topk_dense(hidden, weight, None, 8, vals, idx, stream, alloc),
        "public": lambda: nexttok.lm_head_topk_dense(hidden, weight, k=8),
        "op": lambda: op["lm_head_topk_dense"](hidden, weight, None, 8),
    })
    if device == "cpu":
        ln, mn = logits.numpy(), mask.numpy()
        yield ("sample", {"numpy": lambda: nexttok.sample(ln, 0.7, 50, 0.9, seed=1, offset=2)})
        yield ("apply_token_bitmask", {"numpy": lambda: nexttok.apply_token_bitmask(ln, mn)})


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--b", type=int, default=1)
    p.add_argument("--v", type=int, default=256, help="tiny, so the kernel time stays hidden")
    p.add_argument("--json")
    a = p.parse_args()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() and nexttok.cuda_compiled else [])
    if "cpu" in devices:
        nexttok.set_cpu_threads(1)  # no pool hand-off in a tiny CPU call
    rows = []
    print(f"torch {torch.__version__}, nexttok {nexttok.__version__}, B={a.b}, V={a.v}")
    print("| device | op | path | us/call |\n|---|---|---|---:|")
    for device in devices:
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        for name, paths in cases(device, a.b, a.v):
            for path, fn in paths.items():
                us = per_call_us(fn, a.calls, a.repeat, sync)
                rows.append({"device": device, "op": name, "path": path, "us_per_call": us})
                print(f"| {device} | {name} | {path} | {us:.2f} |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
