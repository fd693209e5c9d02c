"""Per-kernel device time of nt_sample calls in a warm loop (CUPTI through
torch.profiler), to see how a call's time splits over its kernels and the gaps
between them. Not a benchmark (bench/cuda_sampling_bench.py times the calls):
the profiler adds its own overhead to the wall time, not to kernel durations.
    python3 bench/profile_kernels.py --lib build/libnexttok.so"""
import argparse
import collections
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_sampling_bench as csb  # noqa: E402


def kernel_table(sampler, calls):
    for i in range(5):
        sampler(i)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            sampler(i)
        torch.cuda.synchronize()
    per = collections.defaultdict(list)
    spans = []
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            start, end = ev.time_range.start, ev.time_range.end
            per[ev.name].append(end - start)
            spans.append((start, end))
    spans.sort()
    # Busy time over the loop vs the first kernel's start to the last's end.
    wall = (spans[-1][1] - spans[0][0]) / calls if spans else 0.0
    busy = sum(e - s for s, e in spans) / calls
    return per, wall, busy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    lib = csb.Lib(args.lib)
    gen = torch.Generator(device="cuda").manual_seed(1)
    cases = []
    for rows, vocab in ((1, 128256), (64, 128256), (256, 128256)):
        x = csb.make_logits(rows, vocab, "peaked", torch.float32, gen)
        for cfg in csb.CONFIGS:
            if cfg[0] in ("greedy", "plain T=0.7", "k50+p0.9+min-p 0.05"):
                cases.append(("B=%d V=%d %s" % (rows, vocab, cfg[0]), x, cfg))
    for name, x, cfg in cases:
        sampler = csb.Sampler(lib, [x], csb.RowParams(cfg, x.shape[0], "cuda"))
        per, wall, busy = kernel_table(sampler, args.calls)
        parts = ", ".join("%s %.1f" % (k.split("<")[0].split("(")[0], sum(v) / len(v))
                          for k, v in sorted(per.items()))
        print("%-36s per call: span %.1f us, kernels %.1f us | %s" % (name, wall, busy, parts), flush=True)


if __name__ == "__main__":
    main()
