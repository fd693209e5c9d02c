"""The public operations. torch tensors go to nexttok.torch (torch.library ops);
numpy, cupy and jax arrays are handled here, outputs allocated by their own
framework and work queued on its current stream."""
from . import _nexttok as _ext
from ._arrays import framework, index, shape2

_torch = None  # nexttok.torch once loaded (nexttok/__init__.py)


def _is_torch(x):
    return _torch is not None and isinstance(x, _torch.torch.Tensor)


def _load_torch(x):
    """A torch tensor when nexttok.torch was not imported yet."""
    global _torch
    if _torch is None and type(x).__module__.split(".", 1)[0] == "torch":
        from . import torch as t

        _torch = t
    return _is_torch(x)


def apply_token_bitmask(logits, bitmask, indices=None):
    """Sets logits[r, t] = -inf where bit t of bitmask[r] is 0 (1 = allowed), in place
    for torch, numpy and cupy (the same array is returned); jax gets a new array."""
    if _is_torch(logits) or _load_torch(logits):
        return _torch.apply_token_bitmask(logits, bitmask, indices)
    op = "apply_token_bitmask"
    f = framework(logits, op, "logits")
    f.ready(logits, bitmask, indices)
    out = f.copy(logits)
    _ext.apply_token_bitmask(out, bitmask, indices, f.stream)
    f.done()
    return out


apply_allowed_mask = apply_token_bitmask


def bitmask_from_allowed(allowed):
    """bool [B, V] -> int32 [B, ceil(V/32)], bit t of row r set iff allowed[r, t]."""
    if _is_torch(allowed) or _load_torch(allowed):
        return _torch.bitmask_from_allowed(allowed)
    op = "bitmask_from_allowed"
    f = framework(allowed, op, "allowed")
    rows, cols = shape2(allowed, op, "allowed")
    f.ready(allowed)
    out = f.empty((rows, (cols + 31) // 32), "int32")
    _ext.bitmask_from_allowed(allowed, out, f.stream)
    f.done()
    return out


def sample(logits, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0,
           uniform=None, joint=False):
    """One token per row of logits [B, V] (int64 [B]; -1 for a fully masked row).
    Each parameter is a scalar or a length-B array on the logits' device."""
    if _is_torch(logits) or _load_torch(logits):
        return _torch.sample(logits, temperature, top_k, top_p, min_p, seed, offset, uniform,
                             joint)
    op = "sample"
    f = framework(logits, op, "logits")
    rows, _ = shape2(logits, op, "logits")
    f.ready(logits, temperature, top_k, top_p, min_p, seed, offset, uniform)
    tokens = f.empty((rows,), "int64")
    _ext.sample(logits, tokens, temperature, top_k, top_p, min_p, seed, offset, uniform,
                bool(joint), f.stream, f.alloc)
    f.done()
    return tokens


def lm_head_topk_dense(hidden, weight, k=50, bias=None):
    """Exact top-k of hidden [M, H] @ weight [V, H]^T (+ bias): (values f32 [M, k],
    indices int64 [M, k]), without materializing the [M, V] logits."""
    if _is_torch(hidden) or _load_torch(hidden):
        return _torch.lm_head_topk_dense(hidden, weight, k, bias)
    op = "lm_head_topk_dense"
    f = framework(hidden, op, "hidden")
    rows, _ = shape2(hidden, op, "hidden")
    k = index(k, op, "k")
    f.ready(hidden, weight, bias)
    values, indices = f.empty((rows, max(k, 0)), "float32"), f.empty((rows, max(k, 0)), "int64")
    _ext.lm_head_topk_dense(hidden, weight, bias, k, values, indices, f.stream, f.alloc)
    f.done()
    return values, indices


def lm_head_topk_binary(act_q, act_scale, wq, wscale, bias=None, group_size=128, k=50):
    """Exact top-k of the 1-bit head (README, "Binary head layout"): (values f32 [M, k],
    indices int64 [M, k])."""
    if _is_torch(act_q) or _load_torch(act_q):
        return _torch.lm_head_topk_binary(act_q, act_scale, wq, wscale, bias, group_size, k)
    op = "lm_head_topk_binary"
    f = framework(act_q, op, "act_q")
    rows, _ = shape2(act_q, op, "act_q")
    k, group_size = index(k, op, "k"), index(group_size, op, "group_size")
    f.ready(act_q, act_scale, wq, wscale, bias)
    values, indices = f.empty((rows, max(k, 0)), "float32"), f.empty((rows, max(k, 0)), "int64")
    _ext.lm_head_topk_binary(act_q, act_scale, wq, wscale, bias, group_size, k, values, indices,
                             f.stream, f.alloc)
    f.done()
    return values, indices


def pack_weights(w):
    """Signs int8 [V, H] (-1/+1) -> int32 [V, H/32], bit j of word i = (w[v, 32i+j] > 0)."""
    if _is_torch(w) or _load_torch(w):
        return _torch.pack_weights(w)
    op = "pack_weights"
    f = framework(w, op, "w")
    rows, cols = shape2(w, op, "w")
    if cols % 32:
        raise ValueError(f"{op}: argument 'w' must have H % 32 == 0, got H = {cols}")
    f.ready(w)
    out = f.empty((rows, cols // 32), "int32")
    _ext.pack_weights(w, out, f.stream)
    f.done()
    return out


def quantize_activations(x):
    """x [M, H] -> (act_q int8 [M, H], act_scale f32 [M]), scale = max|x| / 127."""
    if _is_torch(x) or _load_torch(x):
        return _torch.quantize_activations(x)
    op = "quantize_activations"
    f = framework(x, op, "x")
    rows, cols = shape2(x, op, "x")
    f.ready(x)
    act_q, act_scale = f.empty((rows, cols), "int8"), f.empty((rows,), "float32")
    _ext.quantize_activations(x, act_q, act_scale, f.stream)
    f.done()
    return act_q, act_scale
