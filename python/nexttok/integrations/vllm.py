"""A vLLM general plugin that routes vLLM's FlashInfer sampling call to nexttok.

Follows vLLM's vllm/v1/sample/ops/topk_topp_sampler.py of its 0.1x line: on CUDA,
TopKTopPSampler.forward_cuda calls the module function
`flashinfer_sample(logits, k, p, generators)` when FlashInfer is usable and the
batch has a top-k or top-p filter (it uses torch for the rest). The plugin
replaces that function with `flashinfer_sample` below and makes
`flashinfer_sampler_supported` true on CUDA (nexttok does not need FlashInfer),
so vLLM's filtered sampling runs on nexttok.

Installed with nexttok, the plugin is found through the entry point group
`vllm.general_plugins` (name "nexttok", pyproject.toml) and vLLM calls
`register()` in every process it starts; VLLM_PLUGINS selects plugins by name.

`flashinfer_sample` draws by nexttok.sample at temperature 1 (vLLM has already
divided the logits by the temperatures): top-k, then top-p on the distribution
renormalized on the top-k set, as vLLM's torch path and FlashInfer's
"top_k_first" order define it. k (int, >= V or None: off) and p (float, None:
off) are per-row tensors. A request's torch.Generator in `generators` gives that
row a seed drawn from it (vLLM's per-request seeds); the other rows draw with a
seed taken from torch's default CPU generator.
"""
import torch

import nexttok

_U63 = (1 << 63) - 1
_TARGET = "vllm.v1.sample.ops.topk_topp_sampler"


def flashinfer_sample(logits, k, p, generators={}):  # noqa: B006 (vLLM's signature)
    """int64 [B] tokens of logits [B, V] under per-row top-k `k` and top-p `p`."""
    if k is None and p is None:
        raise ValueError("flashinfer_sample: arguments 'k' and 'p' are both None "
                         "(vLLM calls it only with a filter)")
    rows = logits.shape[0]
    if generators:
        seeds = torch.randint(0, _U63, (rows,), dtype=torch.int64)
        for row, g in generators.items():
            seeds[row] = int(torch.randint(0, _U63, (1,), dtype=torch.int64, generator=g,
                                           device=g.device))
        seed, offset = seeds.to(logits.device), torch.zeros_like(seeds, device=logits.device)
    else:
        seed, offset = int(torch.randint(0, _U63, (1,))), 0
    tokens = nexttok.sample(
        logits.contiguous(), temperature=1.0,
        top_k=0 if k is None else k.to(logits.device, torch.int32),
        top_p=1.0 if p is None else p.to(logits.device, torch.float32),
        seed=seed, offset=offset)
    return tokens.view(-1)


def register():
    """vLLM's general-plugin hook: installs flashinfer_sample into vLLM's sampler."""
    import importlib

    module = importlib.import_module(_TARGET)
    from vllm.platforms import current_platform

    module.flashinfer_sample = flashinfer_sample
    module.flashinfer_sampler_supported = lambda: bool(current_platform.is_cuda())
    return module


__all__ = ["flashinfer_sample", "register"]
