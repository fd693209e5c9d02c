#!/usr/bin/env python3
"""W5 (hidden state -> token in one call) on a CUDA GPU: nexttok.lm_head_sample_binary
and lm_head_sample_dense (the W1/W2 heads: V = 248,320, H = 5,120, G = 128) beside
(a) the two-step path with nexttok's own ops (cuBLAS bf16 logits, apply_token_bitmask,
sample; the binary head's two-step path runs on its dequantized bf16 twin) and (b)
torch's chain (cuBLAS logits, the bitmask unpacked and masked_fill, then the sort-based
filters and torch.multinomial), timed in one process on the same inputs (method:
bench/_common.py).

  PYTHONPATH=build/python python3 bench/cuda_fused_head_bench.py --check [--json out.json]

--check   on smaller heads: greedy tokens equal the argmax of the fp32 logits (rows
          without a near tie); k50 + p0.9 tokens allowed by the bitmask and among
          the 55 best of the fp32 logits (50 plus a margin for the head's rounding);
          the same seed gives the same tokens; logprobs' column 0 is the token and
          their values descend.
          The bit-exact contract (the token is sample()'s on the head's own scores)
          is tested by the C++ suite (LmHeadSampleOnDevice).
Rows: M = --m; "mask+k50+p0.9" (a random 50% bitmask), "plain" and "greedy".
"""
import json
import math
import re
import sys
import time

import torch

import nexttok
from _common import Checks, cuda_device, parser, rotation_copies, time_calls, time_graph
from cuda_lm_head_bench import rng, w1_w2_heads

bf16, f16 = torch.bfloat16, torch.float16
V, H, G, K, P = 248320, 5120, 128, 50, 0.9
# BENCH.md targets (H200 medians), us: (binary, dense) by M.
TARGETS = {("binary", 1): 65, ("binary", 16): 80, ("binary", 64): 140, ("dense", 1): 620, ("dense", 64): 680}
MODES = {"mask+k50+p0.9": dict(top_k=K, top_p=P, mask=True), "plain": dict(mask=False),
         "greedy": dict(temperature=0.0, mask=False)}


def random_bitmask(rows, vocab, gen):
    bits = torch.rand(rows, vocab, device="cuda", generator=gen) < 0.5
    bits[:, 0] = True  # every row allows a token
    return nexttok.bitmask_from_allowed(bits)


def unpack(bitmask, vocab):
    shifts = torch.arange(32, device=bitmask.device, dtype=torch.int32)
    bits = (bitmask[:, :, None] >> shifts) & 1
    return bits.view(bitmask.shape[0], -1)[:, :vocab].bool()


def torch_chain(logits, allowed, temperature=1.0, top_k=0, top_p=1.0, gen=None):
    """The sort-based chain a user writes today."""
    z = logits.float()
    if allowed is not None:
        z = z.masked_fill(~allowed, float("-inf"))
    if temperature <= 0:
        return z.argmax(dim=1)
    z = z / temperature
    if top_k:
        kth = torch.topk(z, top_k, dim=1).values[:, -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p < 1.0:
        s, idx = torch.sort(z, dim=1, descending=True)
        cum = torch.softmax(s, dim=1).cumsum(dim=1)
        drop = cum - torch.softmax(s, dim=1) > top_p
        z = z.scatter(1, idx, s.masked_fill(drop, float("-inf")))
    return torch.multinomial(torch.softmax(z, dim=1), 1, generator=gen).squeeze(1)


# ---- checks -------------------------------------------------------------------------

def small_heads(seed, m, vocab, cols):
    gen = rng(seed)
    x = torch.randn(m, cols, generator=gen, device="cuda")
    signs = torch.randint(0, 2, (vocab, cols), generator=gen, device="cuda", dtype=torch.int8) * 2 - 1
    wscale = ((0.5 + torch.rand(vocab, cols // G, generator=gen, device="cuda")) / math.sqrt(cols)).to(f16)
    act_q, act_scale = nexttok.quantize_activations(x)
    deq = (signs.view(vocab, cols // G, G).float() * wscale.float()[:, :, None]).view(vocab, cols)
    binary_logits = (act_q.float() @ deq.T) * act_scale[:, None]
    weight = (torch.randn(vocab, cols, generator=gen, device="cuda") / math.sqrt(cols)).to(bf16)
    xb = x.to(bf16)
    dense_logits = xb.float() @ weight.float().T
    return dict(binary=(lambda **kw: nexttok.lm_head_sample_binary(act_q, act_scale, nexttok.pack_weights(signs),
                                                                   wscale, group_size=G, **kw), binary_logits),
                dense=(lambda **kw: nexttok.lm_head_sample_dense(xb, weight, **kw), dense_logits))


def run_checks(chk):
    for seed, (m, vocab, cols) in enumerate([(1, 5000, 1024), (16, 32000, 1024), (40, 20000, 1024), (70, 3001, 256)]):
        heads = small_heads(100 + seed, m, vocab, cols)
        mask = random_bitmask(m, vocab, rng(200 + seed))
        allowed = unpack(mask, vocab)
        for name, (call, logits) in heads.items():
            tag = f"{name} M={m} V={vocab} H={cols}"

            def greedy():
                tok = call(temperature=0.0)
                top2 = torch.topk(logits, 2, dim=1).values
                clear = (top2[:, 0] - top2[:, 1]) > 1e-3 * top2[:, 0].abs().clamp(min=1.0)
                ok = bool((tok[clear] == logits.argmax(dim=1)[clear]).all())
                chk.report(f"greedy = argmax, {tag}", ok, f"{int(clear.sum())} clear rows")

            def filtered():
                a = call(bitmask=mask, top_k=K, top_p=P, seed=7, offset=3)
                b = call(bitmask=mask, top_k=K, top_p=P, seed=7, offset=3)
                z = logits.masked_fill(~allowed, float("-inf"))
                best = torch.topk(z, min(K + 5, vocab), dim=1).indices
                inside = (best == a[:, None]).any(dim=1)
                ok = bool(torch.equal(a, b)) and bool(allowed.gather(1, a[:, None]).all()) and bool(inside.all())
                chk.report(f"k50+p0.9 token allowed, among the best, repeatable, {tag}", ok)

            def logprobs():
                tok, ids, lp, ranks = call(bitmask=mask, top_k=K, top_p=P, seed=9, logprobs=5)
                ok = bool(torch.equal(ids[:, 0].long(), tok)) and bool((lp[:, 1:-1] >= lp[:, 2:]).all())
                chk.report(f"logprobs: column 0 the token, values descending, {tag}", ok)

            chk.run(f"greedy {tag}", greedy)
            chk.run(f"filtered {tag}", filtered)
            chk.run(f"logprobs {tag}", logprobs)


# ---- timed rows ---------------------------------------------------------------------

def bench(ms, l2, runs, warmup, budget_rows):
    bin_bytes = V * H // 8 + V * (H // G) * 2
    dense_bytes = V * H * 2
    n = rotation_copies(bin_bytes, l2)
    print(f"\nweights: binary {bin_bytes / 1e6:.1f} MB, dense bf16 {dense_bytes / 1e6:.1f} MB, "
          f"{n} copies rotated", flush=True)
    gen = rng(1234)
    weight, wq, wscale, deq = w1_w2_heads(n, V, H, G, gen)
    rows = []
    for m in ms:
        x = [torch.randn(m, H, generator=gen, device="cuda") for _ in range(n)]
        xb = [v.to(bf16) for v in x]
        act = [nexttok.quantize_activations(v) for v in x]
        masks = [random_bitmask(m, V, gen) for _ in range(n)]
        allowed = [unpack(b, V) for b in masks]
        for head in ("binary", "dense"):
            w_twin = deq if head == "binary" else weight
            for mode, opts in MODES.items():
                name = f"W5 {head} M={m} {mode}"
                if not budget_rows(name):
                    continue
                kw = {k: v for k, v in opts.items() if k != "mask"}
                bm = masks if opts["mask"] else [None] * n

                def ours(i, kw=kw, bm=bm):
                    if head == "binary":
                        return nexttok.lm_head_sample_binary(act[i][0], act[i][1], wq[i], wscale[i], group_size=G,
                                                             bitmask=bm[i], seed=i, **kw)
                    return nexttok.lm_head_sample_dense(xb[i], weight[i], bitmask=bm[i], seed=i, **kw)

                def two_step(i, kw=kw, bm=bm):
                    z = xb[i] @ w_twin[i].T
                    if bm[i] is not None:
                        nexttok.apply_token_bitmask(z, bm[i])
                    return nexttok.sample(z, seed=i, **kw)

                def chain(i, kw=kw, opts=opts):
                    return torch_chain(xb[i] @ w_twin[i].T, allowed[i] if opts["mask"] else None, **kw)

                try:
                    o = time_calls(ours, n, runs, warmup)
                    g = time_graph(ours, n)
                    a = time_calls(two_step, n, runs, warmup)
                    b = time_calls(chain, n, runs, warmup)
                except Exception as e:  # noqa: BLE001 - report the row and go on
                    print(f"{name:<40} ERROR {e!r}", flush=True)
                    rows.append(dict(row=name, error=repr(e)))
                    continue
                moved = (bin_bytes if head == "binary" else dense_bytes) + m * H * 2
                target = TARGETS.get((head, m)) if mode == "mask+k50+p0.9" else None
                rows.append(dict(row=name, ours_us=o[0], ours_p10=o[1], ours_p90=o[2], graph_us=g,
                                 two_step_us=a[0], chain_us=b[0], bytes=moved, target_us=target))
                print(f"{name:<40} ours {o[0]:8.1f} us (graph {g:7.1f})  two-step {a[0]:8.1f}  "
                      f"torch chain {b[0]:8.1f}", flush=True)
    return rows


def print_table(rows):
    print("| row | ours us | graph us | GB/s | two-step us | torch chain us | vs two-step | target us |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['row']} | ERROR | | | | | | |")
            continue
        target = f"{r['target_us']}" if r["target_us"] else ""
        print(f"| {r['row']} | {r['ours_us']:.1f} | {r['graph_us']:.1f} | {r['bytes'] / (r['ours_us'] * 1e3):.0f} | "
              f"{r['two_step_us']:.1f} | {r['chain_us']:.1f} | {r['two_step_us'] / r['ours_us']:.2f}x | {target} |")


def main():
    ap = parser(__doc__)
    ap.add_argument("--m", default="1,16,64", help="row counts M of the timed rows")
    ap.add_argument("--no-bench", action="store_true", help="the checks only")
    args = ap.parse_args()
    info = cuda_device()
    chk = Checks()
    if args.check:
        run_checks(chk)
        print(chk.summary(), flush=True)
    rows = []
    if not args.no_bench:
        match, end = re.compile(args.match), time.time() + args.budget
        rows = bench([int(v) for v in args.m.split(",")], info["l2"], args.runs, args.warmup,
                     lambda name: time.time() < end and bool(match.search(name)))
        print()
        print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(info, checks=chk.results, rows=rows), f, indent=1)
    return 1 if chk.failed or any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
