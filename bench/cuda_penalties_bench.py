#!/usr/bin/env python3
"""W7 (penalties + logit bias) on a CUDA GPU: nexttok through its Python package
against vLLM's dense formulation in torch, timed in the same process on the same
inputs.

  python3 bench/cuda_penalties_bench.py [--check] [--runs 100] [--json out.json]
                                        [--dtypes float32,bfloat16] [--match REGEX]

Rows (BENCH.md W7): B = 256, V = 128,256, f32 and bf16 logits.
- penalties: 2,048 prompt + 512 output ids a row (random ids, so repeats are
  rare but present), per-row repetition / presence / frequency tensors. Baseline:
  vLLM's apply_penalties in torch (get_token_bin_counts_and_mask: scatter_add
  into [B, V + 1]; the repetition penalty as its torch fallback; then
  logits -= frequency * counts and logits -= presence * mask), on the padded
  [B, L] token tensors vLLM keeps.
- logit bias: 64 ids a row. Baseline: vLLM v1's LogitBiasLogitsProcessor,
  logits[rows, cols] += bias (index_put_ with accumulate, so repeats add as ours).
- both in a row (bias then penalties), against both baselines in a row.
- penalties against the floor of their memory traffic: torch reading and
  writing back just the touched logits (the distinct ids of each row's prompt
  and output, in ascending order: a gather and an index_copy_).

Timing and output: bench/_common.py (CUDA events, a GPU sleep ahead of every
timed call, median of --runs calls over inputs rotated through more than 4x the
L2, a CUDA-graph figure). The op is in place and is not undone between calls
(values drift; the work does not). GB/s counts the bytes the op must move: the
ids (and values), and each touched logit read and written once (the DRAM sector
traffic is 8x that for f32).

--check first compares, on the first copy, nexttok's result with the dense
formulation computed exactly as docs/SEMANTICS.md says (masked, each step rounded
to the logits' dtype) and with the CPU backend, bit for bit.
"""
import sys

import torch

import nexttok
from _common import Checks, Rows, cuda_device, parser, rotation_copies

B, V = 256, 128256
PROMPT, OUTPUT, BIAS = 2048, 512, 64


# ---- inputs -------------------------------------------------------------------------

class Inputs:
    """One copy of W7's inputs: logits, the CSR lists nexttok takes, the padded
    token tensors vLLM keeps, and the per-row parameters."""

    def __init__(self, dtype, gen, dev):
        self.logits = (torch.randn(B, V, generator=gen, device=dev) * 2).to(dtype)
        self.prompt_ids = torch.randint(0, V, (B, PROMPT), generator=gen, device=dev, dtype=torch.int32)
        self.output_ids = torch.randint(0, V, (B, OUTPUT), generator=gen, device=dev, dtype=torch.int32)
        # a few repeats in the output, as decoding produces them
        self.output_ids[:, 1::7] = self.output_ids[:, 0::7][:, : self.output_ids[:, 1::7].shape[1]]
        self.bias_ids = torch.randint(0, V, (B, BIAS), generator=gen, device=dev, dtype=torch.int32)
        self.bias_values = torch.randn(B * BIAS, generator=gen, device=dev)
        ar = torch.arange(B + 1, device=dev, dtype=torch.int32)
        self.prompt = (ar * PROMPT, self.prompt_ids.reshape(-1))
        self.output = (ar * OUTPUT, self.output_ids.reshape(-1))
        self.bias = (ar * BIAS, self.bias_ids.reshape(-1))
        self.repetition = torch.rand(B, generator=gen, device=dev) + 1.0
        self.presence = torch.rand(B, generator=gen, device=dev) * 0.5
        self.frequency = torch.rand(B, generator=gen, device=dev) * 0.5
        # vLLM's forms: padded int64 tokens [B, L], bias as (rows, cols) index lists
        self.prompt_tokens = self.prompt_ids.long()
        self.output_tokens = self.output_ids.long()
        self.bias_rows = torch.arange(B, device=dev).repeat_interleave(BIAS)
        self.bias_cols = self.bias_ids.reshape(-1).long()
        # the distinct (row, id) pairs the penalties touch, as flat ascending positions
        row_start = torch.arange(B, device=dev)[:, None] * V
        self.touched = torch.unique(torch.cat([self.prompt_tokens, self.output_tokens], 1) + row_start)

    def bytes(self, what):
        esize = self.logits.element_size()
        if what == "penalties":
            ids = PROMPT + OUTPUT
            touched = self.touched.numel()
        elif what == "bias":
            ids = 2 * BIAS  # ids and values
            touched = distinct(self.bias_ids)
        else:
            return self.bytes("penalties") + self.bytes("bias")
        return B * ids * 4 + 2 * esize * touched


def distinct(ids):
    return int(sum(torch.unique(row).numel() for row in ids.cpu()))


# ---- the baselines ----------------------------------------------------------------------

def get_token_bin_counts_and_mask(tokens, vocab_size, num_seqs):
    """vLLM (vllm/model_executor/layers/utils.py)."""
    bin_counts = torch.zeros((num_seqs, vocab_size + 1), dtype=torch.long, device=tokens.device)
    bin_counts.scatter_add_(1, tokens, torch.ones_like(tokens))
    bin_counts = bin_counts[:, :vocab_size]
    mask = bin_counts > 0
    return bin_counts, mask


def vllm_apply_penalties(logits, prompt_tokens, output_tokens, presence, frequency, repetition):
    """vLLM's apply_penalties with apply_repetition_penalties_torch, in place."""
    num_seqs, vocab_size = logits.shape
    _, prompt_mask = get_token_bin_counts_and_mask(prompt_tokens, vocab_size, num_seqs)
    output_bin_counts, output_mask = get_token_bin_counts_and_mask(output_tokens, vocab_size, num_seqs)
    penalties = repetition.unsqueeze(dim=1).repeat(1, vocab_size)
    penalties = torch.where(prompt_mask | output_mask, penalties, 1.0)
    scaling = torch.where(logits > 0, 1.0 / penalties, penalties)
    logits *= scaling
    logits -= frequency.unsqueeze(dim=1) * output_bin_counts
    logits -= presence.unsqueeze(dim=1) * output_mask
    return logits


def vllm_logit_bias(logits, rows, cols, values):
    """vLLM v1's LogitBiasLogitsProcessor: logits[rows, cols] += bias."""
    logits.index_put_((rows, cols), values.to(logits.dtype), accumulate=True)
    return logits


def exact_dense_penalties(logits, x):
    """docs/SEMANTICS.md as a dense formulation: masked, every step in fp32 and
    rounded to the logits' dtype (what the check compares bit for bit)."""
    counts, output_mask = get_token_bin_counts_and_mask(x.output_tokens, V, B)
    _, prompt_mask = get_token_bin_counts_and_mask(x.prompt_tokens, V, B)
    r, p, f = x.repetition[:, None], x.presence[:, None], x.frequency[:, None]
    y = logits.clone()
    rep = torch.where(y > 0, y.float() / r, y.float() * r).to(y.dtype)
    y = torch.where((prompt_mask | output_mask) & (r != 1), rep, y)
    y = torch.where(output_mask & (f != 0), (y.float() - f * counts.float()).to(y.dtype), y)
    y = torch.where(output_mask & (p != 0), (y.float() - p).to(y.dtype), y)
    return y


# ---- the calls ----------------------------------------------------------------------------

def ours(what, x):
    if what in ("bias", "both"):
        nexttok.apply_logit_bias(x.logits, x.bias, x.bias_values)
    if what in ("penalties", "both"):
        nexttok.apply_penalties(x.logits, x.prompt, x.output, repetition=x.repetition,
                                presence=x.presence, frequency=x.frequency)


def touched_floor(x):
    """The penalties' memory traffic alone: torch reading the touched logits
    and writing them back, in ascending order."""
    flat = x.logits.view(-1)
    flat.index_copy_(0, x.touched, flat[x.touched])


def baseline(what, x):
    if what in ("bias", "both"):
        vllm_logit_bias(x.logits, x.bias_rows, x.bias_cols, x.bias_values)
    if what in ("penalties", "both"):
        vllm_apply_penalties(x.logits, x.prompt_tokens, x.output_tokens, x.presence, x.frequency,
                             x.repetition)


# ---- checks --------------------------------------------------------------------------------

def run_checks(chk, x):
    name = str(x.logits.dtype).replace("torch.", "")
    pristine = x.logits.clone()
    expected = exact_dense_penalties(pristine, x)
    got = pristine.clone()
    nexttok.apply_penalties(got, x.prompt, x.output, repetition=x.repetition, presence=x.presence,
                            frequency=x.frequency)
    chk.report(f"penalties {name}: equal to the dense formulation", torch.equal(got, expected))
    cpu = pristine.cpu()
    nexttok.apply_penalties(cpu, tuple(a.cpu() for a in x.prompt), tuple(a.cpu() for a in x.output),
                            repetition=x.repetition.cpu(), presence=x.presence.cpu(),
                            frequency=x.frequency.cpu())
    chk.report(f"penalties {name}: equal to the CPU backend", torch.equal(got.cpu(), cpu))
    base = vllm_apply_penalties(pristine.clone(), x.prompt_tokens, x.output_tokens, x.presence,
                                x.frequency, x.repetition)
    close = torch.allclose(got.float(), base.float(), rtol=1e-2, atol=1e-2)
    chk.report(f"penalties {name}: within rounding of vLLM's torch fallback", close)

    got = pristine.clone()
    nexttok.apply_logit_bias(got, x.bias, x.bias_values)
    cpu = pristine.cpu()
    nexttok.apply_logit_bias(cpu, tuple(a.cpu() for a in x.bias), x.bias_values.cpu())
    chk.report(f"logit bias {name}: equal to the CPU backend", torch.equal(got.cpu(), cpu))
    if x.logits.dtype == torch.float32:  # repeats are rare: one fp32 add per entry
        base = vllm_logit_bias(pristine.clone(), x.bias_rows, x.bias_cols, x.bias_values)
        chk.report("logit bias float32: equal to index_put_ (accumulate)", torch.equal(got, base))


# ---- main ----------------------------------------------------------------------------------

def main():
    ap = parser(__doc__)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    args = ap.parse_args()
    info = cuda_device()
    gen = torch.Generator(device="cuda").manual_seed(7)
    chk = Checks()
    rows = Rows(args)
    baselines = {"penalties": "vLLM apply_penalties (torch)", "bias": "index_put_ (accumulate)",
                 "both": "both baselines"}
    for name in args.dtypes.split(","):
        dtype = getattr(torch, name)
        n = rotation_copies(B * V * dtype.itemsize, info["l2"])
        copies = [Inputs(dtype, gen, torch.device("cuda")) for _ in range(n)]
        if args.check:
            chk.run(f"W7 {name}", lambda: run_checks(chk, copies[0]))
        # (row, what ours runs, its baseline, the baseline's name)
        timed = [(f"W7 {what} {name}", what, lambda i, w=what: baseline(w, copies[i]),
                  baselines[what]) for what in ("penalties", "bias", "both")]
        timed.append((f"W7 penalties {name} vs floor", "penalties",
                      lambda i: touched_floor(copies[i]), "touched logits read + written (torch)"))
        for row, what, base, base_name in timed:
            if not rows.wanted(row):
                continue
            rows.time(row, lambda i: ours(what, copies[i]), base, n, copies[0].bytes(what),
                      base_name, dtype=name, B=B, V=V)
        copies = None
        torch.cuda.empty_cache()
    if args.json:
        rows.write_json(args.json, info, chk)
    print()
    if chk.results:
        print(chk.summary())
    rows.print_table()
    return 1 if chk.failed or any("error" in r for r in rows.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
