"""nexttok: hidden state -> vocabulary scores -> grammar mask -> next token.

Every operation takes torch, numpy, cupy or jax arrays (DLPack), on the CPU or
a CUDA device, runs on the caller's current stream and returns arrays of the
caller's framework. Semantics: docs/SEMANTICS.md of the repository.
"""
import importlib.util as _util
import os as _os

from . import _api
from . import _nexttok as _ext
from ._api import (
    apply_allowed_mask,
    apply_logit_bias,
    apply_penalties,
    apply_token_bitmask,
    bitmask_from_allowed,
    lm_head_sample_binary,
    lm_head_sample_dense,
    lm_head_topk_binary,
    lm_head_topk_dense,
    pack_weights,
    quantize_activations,
    sample,
    verify_draft,
    verify_tree,
)

__version__ = _ext.version()
cuda_compiled = _ext.cuda_compiled


def backend_available(device):
    """Whether the 'cpu' or 'cuda' backend is compiled in and has a device."""
    return _ext.backend_available({"cpu": 1, "cuda": 2}[device])


def set_cpu_threads(n):
    """Threads of the CPU backend (0 = all cores)."""
    _ext.cpu_set_num_threads(n)


# The torch ops are registered at import when torch is installed, so that
# torch.compile never meets an import inside a traced function.
# NEXTTOK_TORCH=0 skips it (the first torch tensor passed loads it then).
if _os.environ.get("NEXTTOK_TORCH", "1") != "0" and _util.find_spec("torch") is not None:
    from . import torch as _torch_ops

    _api._torch = _torch_ops

__all__ = [
    "apply_allowed_mask", "apply_token_bitmask", "bitmask_from_allowed", "lm_head_topk_binary",
    "lm_head_topk_dense", "pack_weights", "quantize_activations", "sample", "backend_available",
    "set_cpu_threads", "cuda_compiled", "apply_penalties", "apply_logit_bias", "verify_draft",
    "verify_tree",
    "lm_head_sample_dense", "lm_head_sample_binary",
]
