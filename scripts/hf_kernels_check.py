#!/usr/bin/env python3
"""Loads the nexttok kernel directory with the real `kernels` package, both
ways it offers for local kernels (get_local_kernel(path) and LOCAL_KERNELS
with get_kernel), checks that the published names are there, and checks their
results against torch on materialized logits. Exit 1 on any failure.

  python3 scripts/hf_kernels_check.py <build>/hf-kernel [--device cuda]
"""
import argparse
import os
import sys
from pathlib import Path

NAMES = ("lm_head_topk_binary", "lm_head_topk_dense", "pack_weights", "quantize_activations",
         "apply_token_bitmask", "apply_allowed_mask", "bitmask_from_allowed", "sample")
failures = []


def check(what, ok):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def verify(k, torch, device):
    g = torch.Generator().manual_seed(0)
    check("published names: " + ", ".join(NAMES), all(callable(getattr(k, n, None)) for n in NAMES))

    # Dense head: one-hot rows pick one weight column, a permutation, so the
    # logits are exact and distinct and torch.topk has a single answer.
    m, h = 4, 64
    for v, dtype in ((6000, torch.float32), (256, torch.bfloat16)):  # exact in the dtype
        weight = torch.stack([torch.randperm(v, generator=g).float() for _ in range(h)], 1)
        hidden = torch.zeros(m, h)
        hidden[torch.arange(m), torch.tensor([3, 17, 40, 63])] = 1
        hidden, weight = hidden.to(device, dtype), weight.to(device, dtype)
        values, indices = k.lm_head_topk_dense(hidden, weight, k=50)
        ref = torch.topk(hidden.float() @ weight.float().T, 50)
        check(f"lm_head_topk_dense {dtype} == torch.topk(logits)",
              torch.equal(indices, ref.indices) and torch.equal(values, ref.values))

    # Binary head with power-of-two scales: every score exact, compared in order.
    gs, v = 128, 6000
    signs = (torch.randint(0, 2, (v, 256), generator=g, dtype=torch.int8) * 2 - 1).to(device)
    wq = k.pack_weights(signs)
    bits = ((signs > 0).view(v, 8, 32).long() << torch.arange(32, device=device)).sum(2)
    check("pack_weights == reference packing", torch.equal(wq, _to_i32(torch, bits)))
    x = torch.randn(m, 256, generator=g).to(device)
    act_q, act_scale = k.quantize_activations(x)
    scale = x.abs().amax(1) / 127
    check("quantize_activations == reference", torch.equal(act_scale, scale) and torch.equal(
        act_q, torch.round(x / scale[:, None]).clamp(-127, 127).to(torch.int8)))
    wscale = (2.0 ** torch.randint(-2, 3, (v, 256 // gs), generator=g)).half().to(device)
    values, indices = k.lm_head_topk_binary(act_q, act_scale, wq, wscale, group_size=gs, k=50)
    d = (act_q.double()[:, None, :] * signs.double()[None]).view(m, v, 256 // gs, gs).sum(3)
    exact = (d * wscale.double()[None]).sum(2)  # then one rounding: * act_scale in float32
    ref_i = torch.sort(-exact, dim=1, stable=True).indices[:, :50]
    check("lm_head_topk_binary == stable sort of the exact dequantized scores",
          torch.equal(indices, ref_i))

    # Mask and sampling against torch's own ops.
    allowed = (torch.rand(8, v, generator=g) < 0.2).to(device)
    mask = k.bitmask_from_allowed(allowed)
    logits = torch.randn(8, v, generator=g).to(device)
    expected = logits.masked_fill(~allowed, float("-inf"))
    out = k.apply_token_bitmask(logits, mask)
    check("apply_token_bitmask == masked_fill", out is logits and torch.equal(logits, expected))
    check("sample(temperature=0) == argmax", torch.equal(k.sample(logits, temperature=0.0),
                                                         torch.argmax(logits, 1)))
    tokens = k.sample(logits, temperature=0.8, top_k=20, seed=torch.arange(8, device=device),
                      offset=3)
    check("sampled tokens are allowed and within the top 20",
          bool(allowed.gather(1, tokens[:, None]).all()) and
          bool((torch.topk(logits, 20).indices == tokens[:, None]).any(1).all()))


def _to_i32(torch, words):
    words = words & 0xFFFFFFFF
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernel_dir", type=Path)
    p.add_argument("--device", default=None)
    a = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    repo = "nexttok-local/nexttok"
    os.environ["LOCAL_KERNELS"] = f"{repo}={a.kernel_dir.resolve()}"
    import torch
    import kernels

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    backend = None if device == "cuda" else "cpu"
    print(f"kernels {kernels.__version__} from {Path(kernels.__file__).parent}; torch "
          f"{torch.__version__}; device {device}; variants: "
          f"{sorted(q.name for q in (a.kernel_dir / 'build').iterdir())}")
    local = kernels.get_local_kernel(a.kernel_dir.resolve(), backend=backend)
    print(f"get_local_kernel -> module {local.__name__} ({Path(local.__file__).parent.name})")
    verify(local, torch, device)
    hub = kernels.get_kernel(repo, version=1, backend=backend)
    print(f"LOCAL_KERNELS + get_kernel({repo!r}) -> module {hub.__name__}")
    check("LOCAL_KERNELS resolves to the same variant", Path(hub.__file__) == Path(local.__file__))
    verify(hub, torch, device)
    print(f"{len(failures)} failed" if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
