"""What the CUDA benchmarks share (bench/cuda_sampling_bench.py,
bench/cuda_lm_head_bench.py, bench/cuda_penalties_bench.py): the timing method, rotated inputs, check
reports, the command line and the output.

Timing: CUDA events around each call, with a GPU sleep queued ahead of every
timed call so that the GPU never waits for the host (host overhead is not
counted), a warm-up, then the median of >= 100 calls; inputs rotate over
copies that together exceed 4x the L2, so that no call reads from cache what a
decode step would not. nexttok rows also get a "graph" figure: up to 512 calls
over the rotated inputs captured in one CUDA graph and replayed, time per call.

nexttok is the Python package: PYTHONPATH=<build>/python for a CMake build
with -DNEXTTOK_PYTHON=ON, or an installed wheel.
"""
import argparse
import json
import math
import re
import statistics
import sys
import time

import torch

import nexttok

SLEEP_CYCLES = 1_000_000  # about 0.5 ms of GPU sleep ahead of every timed call


def device_info():
    """Name, SMs, L2 bytes of GPU 0, and a one-line summary."""
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 0) or (60 << 20)
    line = (f"device: {props.name}, {props.multi_processor_count} SMs, L2 {l2 / 2**20:.0f} MiB, "
            f"torch {torch.__version__}, nexttok {nexttok.__version__}")
    return dict(device=props.name, sms=props.multi_processor_count, l2=l2, torch=torch.__version__,
                nexttok=nexttok.__version__), line


def cuda_device():
    """device_info() of the GPU after printing its line; exits without a CUDA GPU or
    without nexttok's CUDA backend."""
    if not torch.cuda.is_available() or not nexttok.cuda_compiled:
        sys.exit("needs a CUDA GPU and nexttok built with CUDA")
    info, line = device_info()
    print(line, flush=True)
    return info


def rotation_copies(one_bytes, l2_bytes, cap_bytes=None):
    """Copies of an input of one_bytes that together exceed 4x the L2 (at least
    2), at most cap_bytes of them in all."""
    n = max(2, math.ceil(4.0 * l2_bytes / max(one_bytes, 1)) + 1)
    if cap_bytes is not None:
        n = min(n, max(2, cap_bytes // max(one_bytes, 1)))
    return n


def time_calls(fn, n_inputs, runs, warmup):
    """(median, p10, p90) microseconds of fn(i) over `runs` calls on rotated inputs."""
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
    """Microseconds per call of a CUDA graph of fn over the rotated inputs."""
    calls = min(n_inputs, 512)
    replays = max(2, total_calls // calls)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):
            fn(i % n_inputs)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i)
    graph.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        graph.replay()
    b.record()
    torch.cuda.synchronize()
    del graph
    return a.elapsed_time(b) * 1000.0 / (replays * calls)


class Checks:
    """Correctness checks: each prints one line as it runs; failures count."""

    def __init__(self):
        self.results = []

    def report(self, name, ok, detail=""):
        ok = bool(ok)
        self.results.append((name, ok))
        print(f"CHECK {name:<64} {'ok' if ok else 'FAIL'} {detail}", flush=True)

    def run(self, name, fn):
        """fn() under `name`: an exception is a failure, and the checks go on."""
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - reported, then the next check
            self.report("error " + name, False, repr(e)[:300])

    @property
    def failed(self):
        return [name for name, ok in self.results if not ok]

    def summary(self):
        f = self.failed
        return (f"checks: {len(self.results) - len(f)} ok, {len(f)} failed"
                + (": " + "; ".join(f[:5]) if f else ""))


def parser(doc):
    """The options every benchmark takes."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="run the correctness checks first")
    ap.add_argument("--runs", type=int, default=100, help="timed calls per row (median of them)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--match", default="", help="time only the rows whose name matches this regex")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for the timed rows")
    ap.add_argument("--json", default=None, metavar="FILE", help="write the checks and rows here")
    return ap


class Rows:
    """The timed rows: the --match filter, the time budget, the table and the JSON."""

    def __init__(self, args):
        self.match = re.compile(args.match)
        self.end = time.time() + args.budget
        self.runs, self.warmup = args.runs, args.warmup
        self.rows = []
        self.out_of_time = False

    def wanted(self, name):
        if time.time() > self.end:
            if not self.out_of_time:
                print("time budget reached, skipping the remaining rows", flush=True)
            self.out_of_time = True
            return False
        return bool(self.match.search(name))

    def time(self, name, ours, baseline, n_inputs, moved, baseline_name, baseline_moved=None,
             **extra):
        """Times ours(i) (eager and in a graph) and baseline(i) over n_inputs rotated
        inputs; `moved` (and `baseline_moved`) are the bytes each must move."""
        try:
            o = time_calls(ours, n_inputs, self.runs, self.warmup)
            graph = time_graph(ours, n_inputs)
            b = time_calls(baseline, n_inputs, self.runs, self.warmup)
        except Exception as e:  # noqa: BLE001 - report the row and go on with the others
            print(f"{name:<55} ERROR {e!r}", flush=True)
            self.rows.append(dict(row=name, error=repr(e)))
            return
        self.rows.append(dict(row=name, ours_us=o[0], ours_p10=o[1], ours_p90=o[2], graph_us=graph,
                              bytes=moved, base_us=b[0], baseline=baseline_name,
                              base_bytes=baseline_moved if baseline_moved is not None else moved,
                              copies=n_inputs, **extra))
        print(f"{name:<55} ours {o[0]:8.1f} us (graph {graph:7.1f})  {baseline_name} {b[0]:9.1f} us",
              flush=True)

    def print_table(self):
        print("| row | ours us | graph us | MB moved | GB/s | baseline | baseline us | speed-up |")
        print("|---|---:|---:|---:|---:|---|---:|---:|")
        for r in self.rows:
            if "error" in r:
                print(f"| {r['row']} | ERROR | | | | | | |")
                continue
            print(f"| {r['row']} | {r['ours_us']:.1f} | {r['graph_us']:.1f} | {r['bytes'] / 1e6:.1f} | "
                  f"{r['bytes'] / (r['ours_us'] * 1e3):.0f} | {r['baseline']} | {r['base_us']:.1f} | "
                  f"{r['base_us'] / r['ours_us']:.2f}x |")

    def write_json(self, path, info, checks, **extra):
        with open(path, "w") as f:
            json.dump(dict(info, checks=checks.results, rows=self.rows, **extra), f, indent=1)


def make_logits(rows, vocab, kind, dtype, gen):
    """BENCH.md logits: "peaked" N(0, 2) plus 4 peaks in [10, 16] per row, "flat" N(0, 1)."""
    if kind == "peaked":
        x = torch.randn(rows, vocab, device="cuda", generator=gen) * 2.0
        cols = torch.randint(0, vocab, (rows, 4), device="cuda", generator=gen)
        vals = torch.rand(rows, 4, device="cuda", generator=gen) * 6.0 + 10.0
        x.scatter_(1, cols, vals)
    else:
        x = torch.randn(rows, vocab, device="cuda", generator=gen)
    return x.to(dtype)
