#!/usr/bin/env python3
"""W6 (speculative verification) on a CUDA GPU: nexttok.verify_draft through its
Python package against vLLM's rejection-sampling algorithm written in torch
(sort-based top-k / top-p filters), and beside nexttok's own sample() over the
same target rows, all timed in the same process on the same inputs.

  python3 bench/cuda_verify_bench.py [--check] [--runs 100] [--json out.json] [--match REGEX]

Rows (BENCH.md W6): B x drafts = 64 x 4 and 256 x 2, V = 128,256 and 32,000,
with and without draft probs, k50+p0.9 (T = 1) and greedy; f32 "peaked" target
logits [B * (drafts + 1), V]. Drafts are the target row's argmax with
probability 0.7, else a random token; draft probs are the softmax of the target
row plus N(0, 1) noise. Every request has the same number of drafts.

Baseline (the torch form of vLLM's rejection sampler): temperature, then
top-k / top-p by one ascending sort of each row (the top-k threshold gathered
from the sorted row, the top-p cut from the cumulative softmax), softmax; a
draft is accepted where q(x) = 0 or p(x) / q(x) >= u (u uniform); the accepted
length is the first rejection; recovered tokens by an exponential race over
max(p - q, 0) (p without the draft token for one-hot drafts), the bonus token
by one over p. Greedy: argmax of every row and the first mismatch.

The W6 target is <= 1.5x the time of nexttok.sample() over the same target
rows (same parameters): the table's last column.

Timing and output: bench/_common.py. GB/s counts the target logits read once
(and the draft probs with them).

--check compares nexttok's tokens on the first copy with the CPU backend's (bit
for bit), greedy rows with the torch baseline's (equal), and checks that every
sampled token lies in its row's top-k.
"""
import sys

import torch

import nexttok
from _common import Checks, Rows, cuda_device, make_logits, parser, rotation_copies, time_calls

SHAPES = [(64, 4), (256, 2)]
VOCABS = [128256, 32000]
TOP_K, TOP_P = 50, 0.9


class Inputs:
    def __init__(self, batch, drafts, vocab, with_probs, gen):
        rows = batch * (drafts + 1)
        self.batch, self.drafts, self.vocab = batch, drafts, vocab
        self.logits = make_logits(rows, vocab, "peaked", torch.float32, gen)
        by_request = self.logits.view(batch, drafts + 1, vocab)[:, :drafts]
        best = by_request.argmax(-1)
        noise = torch.randint(0, vocab, best.shape, device="cuda", generator=gen)
        keep = torch.rand(best.shape, device="cuda", generator=gen) < 0.7
        self.draft_ids = torch.where(keep, best, noise).to(torch.int32).reshape(-1)
        self.cu = torch.arange(batch + 1, device="cuda", dtype=torch.int32) * drafts
        self.draft_probs = None
        if with_probs:
            q = by_request + torch.randn(by_request.shape, device="cuda", generator=gen)
            self.draft_probs = q.softmax(-1).reshape(batch * drafts, vocab).contiguous()
        self.seed = torch.randint(0, 2**62, (batch,), device="cuda", generator=gen)
        self.offset = torch.zeros(batch, dtype=torch.int64, device="cuda")
        self.row_seed = self.seed.repeat_interleave(drafts + 1)

    def bytes(self):
        n = self.logits.numel() * 4
        return n + (0 if self.draft_probs is None else self.draft_probs.numel() * 4)


# ---- the baseline: vLLM's algorithm in torch ----------------------------------------

def sort_filter(logits, k, p):
    """Top-k then top-p by one ascending sort per row; dropped scores become -inf."""
    ascending, order = logits.sort(dim=-1)
    vocab = logits.shape[-1]
    kth = ascending[:, vocab - k].unsqueeze(1)  # the k-th largest score
    ascending = ascending.masked_fill(ascending < kth, float("-inf"))
    mass_below = ascending.softmax(-1).cumsum(-1)
    drop = mass_below <= 1.0 - p
    drop[:, -1] = False  # the largest score always stays
    ascending = ascending.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, order, ascending)


def torch_verify(x, greedy):
    b, d, v = x.batch, x.drafts, x.vocab
    positions = torch.arange(d + 1, device="cuda")
    drafts = x.draft_ids.view(b, d).long()
    if greedy:
        best = x.logits.argmax(-1).view(b, d + 1)
        accepted = (drafts == best[:, :d]).int().cumprod(1).sum(1)
        return torch.where(positions[None] <= accepted[:, None], best, -1)
    probs = sort_filter(x.logits, TOP_K, TOP_P).softmax(-1).view(b, d + 1, v)
    target = probs[:, :d]
    p_x = target.gather(2, drafts.unsqueeze(-1)).squeeze(-1)
    if x.draft_probs is None:
        q_x = torch.ones_like(p_x)
        residual = target.scatter(2, drafts.unsqueeze(-1), 0.0)
    else:
        q = x.draft_probs.view(b, d, v)
        q_x = q.gather(2, drafts.unsqueeze(-1)).squeeze(-1)
        residual = (target - q).clamp_min_(0.0)
    u = torch.rand(b, d, device="cuda")
    accept = (q_x == 0) | (p_x / q_x >= u)
    accepted = accept.int().cumprod(1).sum(1)
    recovered = (residual / torch.empty_like(residual).exponential_()).argmax(-1)
    bonus = (probs[:, d] / torch.empty_like(probs[:, d]).exponential_()).argmax(-1)
    tokens = torch.cat([torch.where(accept, drafts, recovered), bonus[:, None]], 1)
    return torch.where(positions[None] <= accepted[:, None], tokens, -1)


# ---- nexttok --------------------------------------------------------------------------

def params(greedy):
    return dict(temperature=0.0) if greedy else dict(temperature=1.0, top_k=TOP_K, top_p=TOP_P)


def ours(x, greedy):
    return nexttok.verify_draft(x.logits, x.draft_ids, x.cu, x.draft_probs, x.drafts,
                                seed=x.seed, offset=x.offset, **params(greedy))


def sample_rows(x, greedy):
    return nexttok.sample(x.logits, seed=x.row_seed, offset=0, **params(greedy))


def run_checks(chk, name, x, greedy):
    out_ids, num = ours(x, greedy)
    cpu = nexttok.verify_draft(x.logits.cpu(), x.draft_ids.cpu(), x.cu.cpu(),
                               None if x.draft_probs is None else x.draft_probs.cpu(), x.drafts,
                               seed=x.seed.cpu(), offset=x.offset.cpu(), **params(greedy))
    chk.report(f"{name}: equal to the CPU backend",
               torch.equal(out_ids.cpu(), cpu[0]) and torch.equal(num.cpu(), cpu[1]))
    width = x.drafts + 1
    valid = torch.arange(width, device="cuda")[None] < num[:, None].long()
    chk.report(f"{name}: -1 after the last token", bool((out_ids[~valid] == -1).all()))
    if greedy:
        chk.report(f"{name}: equal to the torch baseline",
                   torch.equal(out_ids.long(), torch_verify(x, True)))
        return
    rows = x.logits.view(x.batch, width, x.vocab)
    kth = rows.topk(TOP_K, dim=-1).values[..., -1]
    chosen = rows.gather(2, out_ids.clamp_min(0).long().unsqueeze(-1)).squeeze(-1)
    chk.report(f"{name}: every token in its row's top-{TOP_K}", bool((chosen[valid] >= kth[valid]).all()))


def main():
    ap = parser(__doc__)
    args = ap.parse_args()
    info = cuda_device()
    gen = torch.Generator(device="cuda").manual_seed(11)
    chk = Checks()
    rows = Rows(args)
    for batch, drafts in SHAPES:
        for vocab in VOCABS:
            for with_probs in (False, True):
                one = Inputs(batch, drafts, vocab, with_probs, gen)
                n = rotation_copies(one.bytes(), info["l2"])
                copies = [one] + [Inputs(batch, drafts, vocab, with_probs, gen) for _ in range(n - 1)]
                for greedy in (False, True):
                    name = (f"W6 B={batch}x{drafts} V={vocab} {'probs' if with_probs else 'ngram'} "
                            f"{'greedy' if greedy else 'k50+p0.9'}")
                    if args.check:
                        chk.run(name, lambda: run_checks(chk, name, copies[0], greedy))
                    if not rows.wanted(name):
                        continue
                    rows.time(name, lambda i: ours(copies[i], greedy),
                              lambda i: torch_verify(copies[i], greedy), n, one.bytes(),
                              "vLLM algorithm (torch, sort)", B=batch, drafts=drafts, V=vocab,
                              draft_probs=with_probs, greedy=greedy)
                    if rows.rows and rows.rows[-1].get("row") == name and "error" not in rows.rows[-1]:
                        s = time_calls(lambda i: sample_rows(copies[i], greedy), n, rows.runs,
                                       rows.warmup)
                        rows.rows[-1]["sample_us"] = s[0]
                        print(f"{'':<55} sample() over the same rows {s[0]:8.1f} us, "
                              f"verify / sample = {rows.rows[-1]['ours_us'] / s[0]:.2f}", flush=True)
                copies = one = None
                torch.cuda.empty_cache()
    if args.json:
        rows.write_json(args.json, info, chk)
    print()
    if chk.results:
        print(chk.summary())
    rows.print_table()
    print()
    print("| row | verify_draft us | sample() us, same rows | ratio (target <= 1.5) |")
    print("|---|---:|---:|---:|")
    for r in rows.rows:
        if "sample_us" in r:
            print(f"| {r['row']} | {r['ours_us']:.1f} | {r['sample_us']:.1f} | "
                  f"{r['ours_us'] / r['sample_us']:.2f} |")
    return 1 if chk.failed or any("error" in r for r in rows.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
