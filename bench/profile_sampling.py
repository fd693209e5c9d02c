"""Drives a few W3/W4 launches once each, for Nsight Compute to profile:
    ncu --clock-control none -k regex:'sample_|apply_token_bitmask' \
        --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,... \
        python3 bench/profile_sampling.py --lib build/libnexttok.so
It reuses the benchmark's ctypes layer; nothing here is timed."""
import argparse
import ctypes as C
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_sampling_bench as csb  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--more", action="store_true", help="also B=1 and top-p alone")
    args = ap.parse_args()
    lib = csb.Lib(args.lib)
    gen = torch.Generator(device="cuda").manual_seed(1)
    logits = csb.make_logits(256, 128256, "peaked", torch.float32, gen)
    for cfg in csb.CONFIGS:
        if cfg[0] in ("greedy", "plain T=0.7", "k50+p0.9+min-p 0.05"):
            sampler = csb.Sampler(lib, [logits], csb.RowParams(cfg, 256, "cuda"))
            print("profiling", cfg[0], flush=True)
            sampler(0)
    if args.more:
        # B = 1 (a row split over the chip) and top-p alone (the exact fallback).
        row = logits[:1].contiguous()
        flat = csb.make_logits(256, 128256, "flat", torch.float32, gen)
        for name, x, cfg in (("B=1 k50+p0.9+min-p", row, csb.CONFIGS[4]),
                             ("B=256 top-p 0.9", logits, csb.CONFIGS[3]),
                             ("B=1 top-p 0.9 flat", flat[:1].contiguous(), csb.CONFIGS[3]),
                             ("B=256 top-p 0.9 flat", flat, csb.CONFIGS[3])):
            sampler = csb.Sampler(lib, [x], csb.RowParams(cfg, x.shape[0], "cuda"))
            print("profiling", name, flush=True)
            sampler(0)
    bitmask, _ = csb.make_bitmask(256, 128256, "50% random", gen)
    for dtype in (torch.float32, torch.bfloat16):
        x = logits.to(dtype)
        a = csb.MaskArgs()
        a.logits, a.bitmask, a.indices = csb.view(x), csb.view(bitmask), csb.view(None)
        print("profiling mask", dtype, flush=True)
        lib.ok(lib.lib.nt_apply_token_bitmask(C.byref(a), csb.stream_ptr()), "mask")
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
