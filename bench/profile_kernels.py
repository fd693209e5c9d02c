#!/usr/bin/env python3
"""Per-kernel device time of a few nexttok calls in a warm loop (CUPTI through
torch.profiler): how a call's time splits over its kernels and the gaps
between them. Not a benchmark (bench/cuda_*_bench.py time the calls): the
profiler adds its own overhead to the wall time, not to kernel durations.

  PYTHONPATH=build/python python3 bench/profile_kernels.py [--match REGEX]
  ncu -k regex:. python3 bench/profile_kernels.py --once   # each call once, for Nsight Compute

Calls: W3 greedy, plain T=0.7, k50+p0.9+min-p 0.05 and top-p 0.9 alone at
B = 1, 64, 256 and V = 128,256 (peaked logits); W3c k50+p0.9 with per-row
tensors at B = 1 and 256, and W3r's the same with 20 logprobs, raw and
processed; W6 B = 64 x 4, V = 128,256, k50+p0.9 with and without
draft probs; W4 50% random f32 and bf16 at B = 256; W1 and W2 at M = 1 and 64;
W5 (the fused heads on the W1/W2 heads: mask+k50+p0.9, plain and greedy) at
M = 1 and 64; W3 top-p 0.9 alone at B = 1 and 256 on flat logits (last, so the
calls before it keep their inputs).
"""
import argparse
import collections
import re

import torch
from torch.profiler import ProfilerActivity, profile

import cuda_verify_bench as verify_bench
from cuda_fused_head_bench import MODES, random_bitmask
from cuda_lm_head_bench import w1_w2_heads
from cuda_sampling_bench import LIST_KEEP, rows_past_list
import nexttok
from _common import make_logits


def calls(gen):
    """(name, fn) of every profiled call; inputs are made on first use."""
    for rows in (1, 64, 256):
        x = make_logits(rows, 128256, "peaked", torch.float32, gen)
        seed = torch.arange(rows, device="cuda")
        for name, t, k, p, m in (("greedy", 0.0, 0, 1.0, 0.0), ("plain T=0.7", 0.7, 0, 1.0, 0.0),
                                 ("k50+p0.9+min-p 0.05", 0.7, 50, 0.9, 0.05),
                                 ("top-p 0.9", 0.7, 0, 0.9, 0.0)):
            # Whether top-p alone launches the flagged-row kernel's phases here.
            past = rows_past_list([x], (name, t, k, p, m))
            if past is not None:
                print(f"W3 {name} B={rows} peaked: rows past {LIST_KEEP} candidates: {past[0]}", flush=True)
            yield (f"W3 {name} B={rows} V=128256",
                   lambda x=x, t=t, k=k, p=p, m=m, seed=seed: nexttok.sample(x, t, k, p, m, seed=seed,
                                                                             offset=7))
    for rows in (1, 256):
        x = make_logits(rows, 128256, "peaked", torch.float32, gen)
        seed = torch.arange(rows, device="cuda")
        per_row = dict(temperature=torch.full((rows,), 0.7, device="cuda"),
                       top_k=torch.full((rows,), 50, dtype=torch.int32, device="cuda"),
                       top_p=torch.full((rows,), 0.9, device="cuda"), min_p=torch.zeros(rows, device="cuda"))
        yield (f"W3c k50+p0.9 per-row B={rows} V=128256",
               lambda x=x, seed=seed, kw=per_row: nexttok.sample(x, seed=seed, offset=7, **kw))
        for mode in ("raw", "processed"):
            yield (f"W3r logprobs n=20 {mode} B={rows} V=128256",
                   lambda x=x, seed=seed, kw=per_row, mode=mode: nexttok.sample(
                       x, seed=seed, offset=7, logprobs=20, logprobs_mode=mode, **kw))
    for with_probs in (False, True):
        w6 = verify_bench.Inputs(64, 4, 128256, with_probs, gen)
        yield (f"W6 B=64x4 V=128256 {'probs' if with_probs else 'ngram'} k50+p0.9",
               lambda w6=w6: verify_bench.ours(w6, False))
    x = make_logits(256, 128256, "flat", torch.float32, gen)
    bits = torch.randint(-2**31, 2**31, (256, (128256 + 31) // 32), dtype=torch.int64, device="cuda",
                         generator=gen).to(torch.int32)
    for dtype in (torch.float32, torch.bfloat16):
        xd = x.to(dtype)
        yield f"W4 {str(dtype)[6:]} B=256 50% random", lambda xd=xd: nexttok.apply_token_bitmask(xd, bits)
    V, H, G = 248320, 5120, 128
    (weight,), (wq,), (wscale,), _ = w1_w2_heads(1, V, H, G, gen)
    for m in (1, 64):
        h = torch.randn(m, H, device="cuda", generator=gen)
        q, s = nexttok.quantize_activations(h)
        yield f"W1 binary M={m}", lambda q=q, s=s: nexttok.lm_head_topk_binary(q, s, wq, wscale,
                                                                              group_size=G, k=50)
        hb = h.to(torch.bfloat16)
        yield f"W2 dense bf16 M={m}", lambda hb=hb: nexttok.lm_head_topk_dense(hb, weight, k=50)
        mask = random_bitmask(m, V, gen)
        for mode, spec in MODES.items():
            kw = {k: v for k, v in spec.items() if k != "mask"}
            if spec["mask"]:
                kw["bitmask"] = mask
            yield (f"W5 binary M={m} {mode}",
                   lambda q=q, s=s, kw=kw: nexttok.lm_head_sample_binary(q, s, wq, wscale, group_size=G,
                                                                         seed=1, **kw))
        yield (f"W5 dense M={m} mask+k50+p0.9",
               lambda hb=hb, mask=mask: nexttok.lm_head_sample_dense(hb, weight, bitmask=mask, top_k=50,
                                                                     top_p=0.9, seed=1))
    for rows in (1, 256):
        x = make_logits(rows, 128256, "flat", torch.float32, gen)
        seed = torch.arange(rows, device="cuda")
        yield (f"W3 top-p 0.9 B={rows} V=128256 flat",
               lambda x=x, seed=seed: nexttok.sample(x, 0.7, 0, 0.9, 0.0, seed=seed, offset=7))


def kernel_table(fn, n):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    per = collections.defaultdict(list)
    spans = []
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            per[ev.name].append(ev.time_range.end - ev.time_range.start)
            spans.append((ev.time_range.start, ev.time_range.end))
    spans.sort()
    # The first kernel's start to the last one's end, against the kernels' busy time.
    span = (spans[-1][1] - spans[0][0]) / n if spans else 0.0
    busy = sum(e - s for s, e in spans) / n
    return per, span, busy


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=50, help="calls per profiled loop")
    ap.add_argument("--match", default="", help="only the calls whose name matches this regex")
    ap.add_argument("--once", action="store_true", help="run each call once, without the profiler")
    args = ap.parse_args()
    match = re.compile(args.match)
    gen = torch.Generator(device="cuda").manual_seed(1)
    for name, fn in calls(gen):
        if not match.search(name):
            continue
        if args.once:
            print("call", name, flush=True)
            fn()
            torch.cuda.synchronize()
            continue
        per, span, busy = kernel_table(fn, args.calls)
        parts = ", ".join("%s %.1f" % (k.replace("(anonymous namespace)::", "").split("<")[0].split("(")[0],
                                       sum(v) / len(v))
                          for k, v in sorted(per.items()))
        print(f"{name:<36} per call: span {span:.1f} us, kernels {busy:.1f} us | {parts}", flush=True)


if __name__ == "__main__":
    main()
