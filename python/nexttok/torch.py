"""nexttok's operations as torch.library ops, with fake implementations, so that
torch.compile(fullgraph=True) traces them without graph breaks and CUDA graphs
capture them (per-row seeds and offsets in device tensors are read at replay).

Ops live in torch.ops.nexttok (a kernel directory loaded by `kernels` gets a
namespace of its own). They are registered with Library.define/impl directly:
the torch.library.custom_op decorator adds tens of microseconds to every call.
Outputs and device workspaces come from torch's caching allocator on the
current stream, which also serves graph capture.

Eager calls on plain tensors skip the dispatcher hop to the Python kernel
(about 4 us plus 0.5 us an argument); under torch.compile, a dispatch mode
(FakeTensorMode, ...) or a tensor subclass the public functions call the op.
"""
import torch

from . import _nexttok as _ext
from ._arrays import check_topk, csr, logprobs_request

NAMESPACE = (__package__ or "nexttok").replace(".", "_")
_lib = torch.library.Library(NAMESPACE, "DEF")

_SCHEMAS = {
    "apply_token_bitmask": "(Tensor(a!) logits, Tensor bitmask, Tensor? indices) -> ()",
    "bitmask_from_allowed": "(Tensor allowed) -> Tensor",
    "sample": "(Tensor logits, Tensor? temperature_t, float temperature, Tensor? top_k_t, "
              "int top_k, Tensor? top_p_t, float top_p, Tensor? min_p_t, float min_p, "
              "Tensor? seed_t, int seed, Tensor? offset_t, int offset, Tensor? uniform, "
              "bool joint) -> Tensor",
    "sample_logprobs": "(Tensor logits, Tensor? temperature_t, float temperature, Tensor? top_k_t, "
                       "int top_k, Tensor? top_p_t, float top_p, Tensor? min_p_t, float min_p, "
                       "Tensor? seed_t, int seed, Tensor? offset_t, int offset, Tensor? uniform, "
                       "bool joint, int num_logprobs, bool processed) "
                       "-> (Tensor, Tensor, Tensor, Tensor)",
    "lm_head_topk_dense": "(Tensor hidden, Tensor weight, Tensor? bias, int k) -> (Tensor, Tensor)",
    "lm_head_topk_binary": "(Tensor act_q, Tensor act_scale, Tensor wq, Tensor wscale, "
                           "Tensor? bias, int group_size, int k) -> (Tensor, Tensor)",
    "pack_weights": "(Tensor w) -> Tensor",
    "quantize_activations": "(Tensor x) -> (Tensor, Tensor)",
    "apply_penalties": "(Tensor(a!) logits, Tensor? prompt_offsets, Tensor? prompt_ids, "
                       "Tensor? output_offsets, Tensor? output_ids, Tensor? repetition_t, "
                       "float repetition, Tensor? presence_t, float presence, "
                       "Tensor? frequency_t, float frequency) -> ()",
    "apply_logit_bias": "(Tensor(a!) logits, Tensor offsets, Tensor ids, Tensor values) -> ()",
    "verify_draft": "(Tensor target_logits, Tensor draft_ids, Tensor cu_num_draft, "
                    "Tensor? draft_probs, int width, Tensor? temperature_t, float temperature, "
                    "Tensor? top_k_t, int top_k, Tensor? top_p_t, float top_p, Tensor? min_p_t, "
                    "float min_p, Tensor? seed_t, int seed, Tensor? offset_t, int offset, "
                    "bool joint) -> (Tensor, Tensor)",
    "verify_tree": "(Tensor target_logits, Tensor candidates, Tensor retrieve_next_token, "
                   "Tensor retrieve_next_sibling, int width, Tensor? temperature_t, "
                   "float temperature, Tensor? top_k_t, int top_k, Tensor? top_p_t, float top_p, "
                   "Tensor? min_p_t, float min_p, Tensor? seed_t, int seed, Tensor? offset_t, "
                   "int offset, bool joint) -> (Tensor, Tensor, Tensor)",
    "lm_head_sample_dense": "(Tensor hidden, Tensor weight, Tensor? bias, Tensor? bitmask, "
                            "Tensor? temperature_t, float temperature, Tensor? top_k_t, int top_k, "
                            "Tensor? top_p_t, float top_p, Tensor? min_p_t, float min_p, "
                            "Tensor? seed_t, int seed, Tensor? offset_t, int offset, "
                            "bool joint) -> Tensor",
    "lm_head_sample_binary": "(Tensor act_q, Tensor act_scale, Tensor wq, Tensor wscale, "
                             "Tensor? bias, int group_size, Tensor? bitmask, "
                             "Tensor? temperature_t, float temperature, Tensor? top_k_t, "
                             "int top_k, Tensor? top_p_t, float top_p, Tensor? min_p_t, "
                             "float min_p, Tensor? seed_t, int seed, Tensor? offset_t, "
                             "int offset, bool joint) -> Tensor",
}
# The fused ops with a logprobs request: their schema plus (n, mode), returning
# (tokens, logprob_ids, logprobs, ranks) as sample_logprobs does.
for _name in ("lm_head_sample_dense", "lm_head_sample_binary"):
    _SCHEMAS[_name + "_logprobs"] = (_SCHEMAS[_name][:-len(") -> Tensor")] +
                                     ", int num_logprobs, bool processed) "
                                     "-> (Tensor, Tensor, Tensor, Tensor)")
_U64 = (1 << 64) - 1

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
_is_compiling = torch.compiler.is_compiling
_dispatch_depth = torch._C._len_torch_dispatch_stack
_scratch = {}


def _stream(t):
    return _raw_stream(t.get_device()) if t.is_cuda else 0


class _DeviceScratch:
    """Device workspaces of one GPU. Eager calls reuse one buffer per stream
    (work on a stream is ordered, and the allocator reuses freed memory in
    stream order too); during CUDA-graph capture every call takes a fresh
    buffer from the graph's pool, so a graph never points at memory that a
    later call may free."""

    def __init__(self, device):
        self.index = device
        self.device = torch.device("cuda", device)
        self.by_stream = {}

    def __call__(self, nbytes):
        if _capturing():
            return torch.empty(nbytes, dtype=torch.int8, device=self.device)
        s = _raw_stream(self.index)
        buf = self.by_stream.get(s)
        if buf is None or buf.numel() < nbytes:
            buf = self.by_stream[s] = torch.empty(nbytes, dtype=torch.int8, device=self.device)
        return buf


def _alloc(t):
    if not t.is_cuda:
        return None
    d = t.get_device()
    a = _scratch.get(d)
    if a is None:
        a = _scratch[d] = _DeviceScratch(d)
    return a


def _eager(*args):
    # is_compiling first: dynamo folds it to True and traces nothing after it.
    # Every tensor argument must be a plain tensor (a FakeTensor or subclass
    # among them needs the dispatcher); non-tensors pass.
    return (not _is_compiling() and _dispatch_depth() == 0 and
            all(type(t) is torch.Tensor or not isinstance(t, torch.Tensor) for t in args))


# ---- kernels (CPU and CUDA) and fake implementations --------------------------
# Each op's outputs come from one function, used by its kernel and its fake
# implementation alike: it checks the arguments that decide the output shapes
# as the eager call does before launch, so torch.compile (which runs only the
# fake) refuses at trace time what an eager call refuses, with the same error.
def _apply_token_bitmask(logits, bitmask, indices):
    _ext.apply_token_bitmask(logits, bitmask, indices, _stream(logits))


def _bitmask_from_allowed(allowed):
    out = _mask_out(allowed)
    _ext.bitmask_from_allowed(allowed, out, _stream(allowed))
    return out


def _params(tt, tv, kt, kv, pt, pv, mt, mv, st, sv, ot, ov):
    """The six sampling parameters, each its tensor or its scalar."""
    return (tv if tt is None else tt, kv if kt is None else kt, pv if pt is None else pt,
            mv if mt is None else mt, sv & _U64 if st is None else st,
            ov & _U64 if ot is None else ot)


def _sample(logits, temperature_t, temperature, top_k_t, top_k, top_p_t, top_p, min_p_t, min_p,
            seed_t, seed, offset_t, offset, uniform, joint):
    tokens = _tokens_out(logits)
    _ext.sample(logits, tokens,
                *_params(temperature_t, temperature, top_k_t, top_k, top_p_t, top_p, min_p_t,
                         min_p, seed_t, seed, offset_t, offset),
                uniform, joint, _stream(logits), _alloc(logits))
    return tokens


def _sample_logprobs(logits, temperature_t, temperature, top_k_t, top_k, top_p_t, top_p, min_p_t,
                     min_p, seed_t, seed, offset_t, offset, uniform, joint, num_logprobs,
                     processed):
    outs = _logprobs_out(logits, num_logprobs)
    _ext.sample_logprobs(logits, outs[0],
                         *_params(temperature_t, temperature, top_k_t, top_k, top_p_t, top_p,
                                  min_p_t, min_p, seed_t, seed, offset_t, offset),
                         uniform, joint, num_logprobs, processed, outs[1], outs[2], outs[3],
                         _stream(logits), _alloc(logits))
    return outs


def _lm_head_topk_dense(hidden, weight, bias, k):
    values, indices = _topk_out("lm_head_topk_dense", hidden, "hidden", weight, "weight", k)
    _ext.lm_head_topk_dense(hidden, weight, bias, k, values, indices, _stream(weight),
                            _alloc(weight))
    return values, indices


def _lm_head_topk_binary(act_q, act_scale, wq, wscale, bias, group_size, k):
    values, indices = _topk_out("lm_head_topk_binary", act_q, "act_q", wq, "wq", k)
    _ext.lm_head_topk_binary(act_q, act_scale, wq, wscale, bias, group_size, k, values, indices,
                             _stream(wq), _alloc(wq))
    return values, indices


def _pack_weights(w):
    out = _packed_out(w)
    _ext.pack_weights(w, out, _stream(w))
    return out


def _quantize_activations(x):
    act_q, act_scale = _quantized_out(x)
    _ext.quantize_activations(x, act_q, act_scale, _stream(x))
    return act_q, act_scale


def _apply_penalties(logits, prompt_offsets, prompt_ids, output_offsets, output_ids,
                     repetition_t, repetition, presence_t, presence, frequency_t, frequency):
    _ext.apply_penalties(logits, prompt_offsets, prompt_ids, output_offsets, output_ids,
                         repetition if repetition_t is None else repetition_t,
                         presence if presence_t is None else presence_t,
                         frequency if frequency_t is None else frequency_t,
                         _stream(logits), _alloc(logits))


def _apply_logit_bias(logits, offsets, ids, values):
    _ext.apply_logit_bias(logits, offsets, ids, values, _stream(logits), _alloc(logits))


def _verify_draft(target_logits, draft_ids, cu_num_draft, draft_probs, width, temperature_t,
                  temperature, top_k_t, top_k, top_p_t, top_p, min_p_t, min_p, seed_t, seed,
                  offset_t, offset, joint):
    out_ids, num = _verify_draft_out(target_logits, draft_ids, cu_num_draft, width)
    _ext.verify_draft(target_logits, draft_ids, cu_num_draft, draft_probs, out_ids, num,
                      *_params(temperature_t, temperature, top_k_t, top_k, top_p_t, top_p, min_p_t,
                               min_p, seed_t, seed, offset_t, offset),
                      joint, _stream(target_logits), _alloc(target_logits))
    return out_ids, num


def _verify_tree(target_logits, candidates, retrieve_next_token, retrieve_next_sibling, width,
                 temperature_t, temperature, top_k_t, top_k, top_p_t, top_p, min_p_t, min_p,
                 seed_t, seed, offset_t, offset, joint):
    out_ids, out_nodes, num = _verify_tree_out(target_logits, candidates, width)
    _ext.verify_tree(target_logits, candidates, retrieve_next_token, retrieve_next_sibling,
                     out_ids, out_nodes, num,
                     *_params(temperature_t, temperature, top_k_t, top_k, top_p_t, top_p, min_p_t,
                              min_p, seed_t, seed, offset_t, offset),
                     joint, _stream(target_logits), _alloc(target_logits))
    return out_ids, out_nodes, num


def _check_1d(op, arg, t):
    shape = getattr(t, "shape", None)
    if shape is None or len(shape) != 1:
        raise ValueError(f"{op}: argument '{arg}' must be 1-D, got "
                         f"{None if shape is None else tuple(shape)}")
    return shape[0]


def _check_width(op, arg, width):
    if width < 1:
        raise ValueError(f"{op}: argument '{arg}' must give at least one output column, "
                         f"got {width} columns")


def _verify_draft_out(target_logits, draft_ids, cu_num_draft, width):
    op = "verify_draft"
    _check_2d(op, "target_logits", target_logits)
    _check_1d(op, "draft_ids", draft_ids)
    requests = max(_check_1d(op, "cu_num_draft", cu_num_draft) - 1, 0)
    _check_width(op, "max_draft", width)
    return (target_logits.new_empty((requests, width), dtype=torch.int32),
            target_logits.new_empty((requests,), dtype=torch.int32))


def _verify_tree_out(target_logits, candidates, width):
    op = "verify_tree"
    _check_2d(op, "target_logits", target_logits)
    requests, _ = _check_2d(op, "candidates", candidates)
    _check_width(op, "num_steps", width)
    return (target_logits.new_empty((requests, width), dtype=torch.int32),
            target_logits.new_empty((requests, width), dtype=torch.int32),
            target_logits.new_empty((requests,), dtype=torch.int32))


def _lm_head_sample_dense(hidden, weight, bias, bitmask, tt, tv, kt, kv, pt, pv, mt, mv, st, sv,
                          ot, ov, joint):
    tokens = _tokens_out(hidden, "lm_head_sample_dense", "hidden")
    _ext.lm_head_sample_dense(hidden, weight, bias, bitmask, tokens, None, 0, 1, 0,
                              *_params(tt, tv, kt, kv, pt, pv, mt, mv, st, sv, ot, ov), joint,
                              _stream(weight), _alloc(weight))
    return tokens


def _lm_head_sample_binary(act_q, act_scale, wq, wscale, bias, group_size, bitmask, tt, tv, kt,
                           kv, pt, pv, mt, mv, st, sv, ot, ov, joint):
    tokens = _tokens_out(act_q, "lm_head_sample_binary", "act_q")
    _ext.lm_head_sample_binary(act_q, act_scale, wq, wscale, bias, group_size, bitmask, tokens,
                               None, 0, 1, 0,
                               *_params(tt, tv, kt, kv, pt, pv, mt, mv, st, sv, ot, ov), joint,
                               _stream(wq), _alloc(wq))
    return tokens


def _lm_head_sample_dense_logprobs(hidden, weight, bias, bitmask, tt, tv, kt, kv, pt, pv, mt, mv,
                                   st, sv, ot, ov, joint, num_logprobs, processed):
    outs = _logprobs_out(hidden, num_logprobs, "lm_head_sample_dense", "hidden")
    _ext.lm_head_sample_dense(hidden, weight, bias, bitmask, outs[0], None, 0, 1, 0,
                              *_params(tt, tv, kt, kv, pt, pv, mt, mv, st, sv, ot, ov), joint,
                              _stream(weight), _alloc(weight), num_logprobs, processed, *outs[1:])
    return outs


def _lm_head_sample_binary_logprobs(act_q, act_scale, wq, wscale, bias, group_size, bitmask, tt,
                                    tv, kt, kv, pt, pv, mt, mv, st, sv, ot, ov, joint,
                                    num_logprobs, processed):
    outs = _logprobs_out(act_q, num_logprobs, "lm_head_sample_binary", "act_q")
    _ext.lm_head_sample_binary(act_q, act_scale, wq, wscale, bias, group_size, bitmask, outs[0],
                               None, 0, 1, 0,
                               *_params(tt, tv, kt, kv, pt, pv, mt, mv, st, sv, ot, ov), joint,
                               _stream(wq), _alloc(wq), num_logprobs, processed, *outs[1:])
    return outs


def _mask_out(allowed):
    rows, cols = _check_2d("bitmask_from_allowed", "allowed", allowed)
    return allowed.new_empty((rows, (cols + 31) // 32), dtype=torch.int32)


def _tokens_out(x, op="sample", arg="logits"):
    """tokens int64 [rows] for the rows of x (sample's logits, a fused head's input)."""
    rows, _ = _check_2d(op, arg, x)
    return x.new_empty((rows,), dtype=torch.int64)


def _logprobs_out(x, n, op="sample", arg="logits"):
    """tokens int64 [B], logprob_ids int32 [B, n+1], logprobs f32 [B, n+1], ranks int32 [B]."""
    rows, _ = _check_2d(op, arg, x)
    columns = max(n, 0) + 1  # n outside 0..20 is left to the extension, whose check names it
    return (x.new_empty((rows,), dtype=torch.int64),
            x.new_empty((rows, columns), dtype=torch.int32),
            x.new_empty((rows, columns), dtype=torch.float32),
            x.new_empty((rows,), dtype=torch.int32))


def _topk_out(op, x, x_arg, w, w_arg, k):
    """values f32 [M, k] and indices int64 [M, k] for rows x [M, H], weights w [V, ...]."""
    rows, _ = _check_2d(op, x_arg, x)
    vocab, _ = _check_2d(op, w_arg, w)
    check_topk(op, k, vocab, w_arg)
    return (x.new_empty((rows, k), dtype=torch.float32),
            x.new_empty((rows, k), dtype=torch.int64))


def _packed_out(w):
    rows, cols = _check_2d("pack_weights", "w", w)
    if cols % 32:
        raise ValueError(f"pack_weights: argument 'w' must have H % 32 == 0, got H = {cols}")
    return w.new_empty((rows, cols // 32), dtype=torch.int32)


def _quantized_out(x):
    rows, cols = _check_2d("quantize_activations", "x", x)
    return x.new_empty((rows, cols), dtype=torch.int8), x.new_empty((rows,), dtype=torch.float32)


def _check_2d(op, arg, t):
    """(rows, cols) of a 2-D tensor (or array: a weight may come from another
    framework), else the error that names the argument."""
    shape = getattr(t, "shape", None)
    if shape is None:
        raise TypeError(f"{op}: argument '{arg}' must be an array, got {type(t).__name__}")
    if len(shape) != 2:
        raise ValueError(f"{op}: argument '{arg}' must be 2-D, got shape {tuple(shape)}")
    return shape[0], shape[1]


_FAKES = {
    "apply_token_bitmask": lambda logits, bitmask, indices: None,
    "bitmask_from_allowed": _mask_out,
    "sample": lambda logits, *rest: _tokens_out(logits),
    "sample_logprobs": lambda logits, *rest: _logprobs_out(logits, rest[-2]),
    "lm_head_topk_dense": lambda h, w, b, k: _topk_out("lm_head_topk_dense", h, "hidden", w,
                                                       "weight", k),
    "lm_head_topk_binary": lambda q, s, wq, ws, b, g, k: _topk_out("lm_head_topk_binary", q,
                                                                   "act_q", wq, "wq", k),
    "pack_weights": _packed_out,
    "quantize_activations": _quantized_out,
    "apply_penalties": lambda logits, *rest: None,
    "apply_logit_bias": lambda logits, offsets, ids, values: None,
    "verify_draft": lambda target, drafts, cu, probs, width, *rest: _verify_draft_out(
        target, drafts, cu, width),
    "verify_tree": lambda target, cand, nxt, sib, width, *rest: _verify_tree_out(
        target, cand, width),
    "lm_head_sample_dense": lambda hidden, *rest: _tokens_out(
        hidden, "lm_head_sample_dense", "hidden"),
    "lm_head_sample_binary": lambda act_q, *rest: _tokens_out(
        act_q, "lm_head_sample_binary", "act_q"),
    "lm_head_sample_dense_logprobs": lambda hidden, *rest: _logprobs_out(
        hidden, rest[-2], "lm_head_sample_dense", "hidden"),
    "lm_head_sample_binary_logprobs": lambda act_q, *rest: _logprobs_out(
        act_q, rest[-2], "lm_head_sample_binary", "act_q"),
}

for _name, _schema in _SCHEMAS.items():
    _lib.define(_name + _schema)
    for _key in ("CPU", "CUDA"):
        _lib.impl(_name, globals()["_" + _name], _key)
    torch.library.register_fake(f"{NAMESPACE}::{_name}", _FAKES[_name], lib=_lib)

ops = getattr(torch.ops, NAMESPACE)
_op = {name: getattr(ops, name).default for name in _SCHEMAS}


# ---- the public functions for torch tensors ----------------------------------
def _split(op, arg, v, convert):
    """(tensor, scalar) for the op schema: a per-row tensor, or a Python scalar."""
    if isinstance(v, torch.Tensor):
        return v, convert(0)
    try:
        return None, convert(v)
    except TypeError:
        raise TypeError(f"{op}: argument '{arg}' must be a scalar or a 1-D tensor, "
                        f"got {type(v).__name__}") from None
    except ValueError as e:
        raise ValueError(f"{op}: argument '{arg}' {e}") from None


def _i64(v):
    """A u64 Python int as the int64 the schema carries (same bits)."""
    v = int(v)
    if not 0 <= v <= _U64:
        raise ValueError(f"must be in [0, 2^64), got {v}")
    return v - (1 << 64) if v >= 1 << 63 else v


def _index(v):
    return max(-(2**31), min(2**31 - 1, v.__index__()))


def apply_token_bitmask(logits, bitmask, indices=None):
    f = _apply_token_bitmask if _eager(logits, bitmask, indices) else _op["apply_token_bitmask"]
    f(logits, bitmask, indices)
    return logits


apply_allowed_mask = apply_token_bitmask


def bitmask_from_allowed(allowed):
    return (_bitmask_from_allowed if _eager(allowed) else _op["bitmask_from_allowed"])(allowed)


def sample(logits, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0,
           uniform=None, joint=False, logprobs=None, logprobs_mode="raw"):
    op = "sample"
    request = None if logprobs is None else logprobs_request(op, logprobs, logprobs_mode)
    if _eager(logits, temperature, top_k, top_p, min_p, seed, offset, uniform):
        # the extension takes scalars and tensors as they are
        if logits.dim() != 2:
            _check_2d(op, "logits", logits)
        if request is not None:
            outs = _logprobs_out(logits, request[0])
            _ext.sample_logprobs(logits, outs[0], temperature, top_k, top_p, min_p, seed, offset,
                                 uniform, bool(joint), request[0], request[1], outs[1], outs[2],
                                 outs[3], _stream(logits), _alloc(logits))
            return outs
        tokens = _tokens_out(logits)
        _ext.sample(logits, tokens, temperature, top_k, top_p, min_p, seed, offset, uniform,
                    bool(joint), _stream(logits), _alloc(logits))
        return tokens
    params = _split_params(op, temperature, top_k, top_p, min_p, seed, offset)
    if request is not None:
        return _op["sample_logprobs"](logits, *params, uniform, bool(joint), request[0], request[1])
    return _op["sample"](logits, *params, uniform, bool(joint))


def lm_head_topk_dense(hidden, weight, k=50, bias=None):
    f = _lm_head_topk_dense if _eager(hidden, weight, bias) else _op["lm_head_topk_dense"]
    return f(hidden, weight, bias, k)


def lm_head_topk_binary(act_q, act_scale, wq, wscale, bias=None, group_size=128, k=50):
    eager = _eager(act_q, act_scale, wq, wscale, bias)
    f = _lm_head_topk_binary if eager else _op["lm_head_topk_binary"]
    return f(act_q, act_scale, wq, wscale, bias, group_size, k)


def pack_weights(w):
    return (_pack_weights if _eager(w) else _op["pack_weights"])(w)


def quantize_activations(x):
    return (_quantize_activations if _eager(x) else _op["quantize_activations"])(x)


def apply_penalties(logits, prompt=None, output=None, repetition=1.0, presence=0.0, frequency=0.0):
    op = "apply_penalties"
    po, pi = csr(op, "prompt", prompt)
    oo, oi = csr(op, "output", output)
    if _eager(logits, po, pi, oo, oi, repetition, presence, frequency):
        # the extension takes scalars and tensors as they are
        _ext.apply_penalties(logits, po, pi, oo, oi, repetition, presence, frequency,
                             _stream(logits), _alloc(logits))
        return logits
    rt, rv = _split(op, "repetition", repetition, float)
    pt, pv = _split(op, "presence", presence, float)
    ft, fv = _split(op, "frequency", frequency, float)
    _op[op](logits, po, pi, oo, oi, rt, rv, pt, pv, ft, fv)
    return logits


def apply_logit_bias(logits, tokens, values):
    offsets, ids = csr("apply_logit_bias", "tokens", tokens, required=True)
    eager = _eager(logits, offsets, ids, values)
    (_apply_logit_bias if eager else _op["apply_logit_bias"])(logits, offsets, ids, values)
    return logits


def _split_params(op, temperature, top_k, top_p, min_p, seed, offset):
    """The schema's (tensor, scalar) pairs of the six sampling parameters, in order."""
    return (*_split(op, "temperature", temperature, float), *_split(op, "top_k", top_k, _index),
            *_split(op, "top_p", top_p, float), *_split(op, "min_p", min_p, float),
            *_split(op, "seed", seed, _i64), *_split(op, "offset", offset, _i64))


def lm_head_sample_dense(hidden, weight, bias=None, bitmask=None, temperature=1.0, top_k=0,
                         top_p=1.0, min_p=0.0, seed=0, offset=0, joint=False, logprobs=None,
                         logprobs_mode="raw"):
    op = "lm_head_sample_dense"
    request = None if logprobs is None else logprobs_request(op, logprobs, logprobs_mode)
    if _eager(hidden, weight, bias, bitmask, temperature, top_k, top_p, min_p, seed, offset):
        if request is not None:
            outs = _logprobs_out(hidden, request[0], op, "hidden")
            _ext.lm_head_sample_dense(hidden, weight, bias, bitmask, outs[0], None, 0, 1, 0,
                                      temperature, top_k, top_p, min_p, seed, offset, bool(joint),
                                      _stream(weight), _alloc(weight), request[0], request[1],
                                      *outs[1:])
            return outs
        tokens = _tokens_out(hidden, op, "hidden")
        _ext.lm_head_sample_dense(hidden, weight, bias, bitmask, tokens, None, 0, 1, 0,
                                  temperature, top_k, top_p, min_p, seed, offset, bool(joint),
                                  _stream(weight), _alloc(weight))
        return tokens
    params = _split_params(op, temperature, top_k, top_p, min_p, seed, offset)
    if request is not None:
        return _op["lm_head_sample_dense_logprobs"](hidden, weight, bias, bitmask, *params,
                                                    bool(joint), request[0], request[1])
    return _op["lm_head_sample_dense"](hidden, weight, bias, bitmask, *params, bool(joint))


def lm_head_sample_binary(act_q, act_scale, wq, wscale, bias=None, group_size=128, bitmask=None,
                          temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0,
                          joint=False, logprobs=None, logprobs_mode="raw"):
    op = "lm_head_sample_binary"
    request = None if logprobs is None else logprobs_request(op, logprobs, logprobs_mode)
    if _eager(act_q, act_scale, wq, wscale, bias, bitmask, temperature, top_k, top_p, min_p,
              seed, offset):
        if request is not None:
            outs = _logprobs_out(act_q, request[0], op, "act_q")
            _ext.lm_head_sample_binary(act_q, act_scale, wq, wscale, bias, group_size, bitmask,
                                       outs[0], None, 0, 1, 0, temperature, top_k, top_p, min_p,
                                       seed, offset, bool(joint), _stream(wq), _alloc(wq),
                                       request[0], request[1], *outs[1:])
            return outs
        tokens = _tokens_out(act_q, op, "act_q")
        _ext.lm_head_sample_binary(act_q, act_scale, wq, wscale, bias, group_size, bitmask,
                                   tokens, None, 0, 1, 0, temperature, top_k, top_p, min_p, seed,
                                   offset, bool(joint), _stream(wq), _alloc(wq))
        return tokens
    params = _split_params(op, temperature, top_k, top_p, min_p, seed, offset)
    if request is not None:
        return _op["lm_head_sample_binary_logprobs"](act_q, act_scale, wq, wscale, bias,
                                                     group_size, bitmask, *params, bool(joint),
                                                     request[0], request[1])
    return _op["lm_head_sample_binary"](act_q, act_scale, wq, wscale, bias, group_size, bitmask,
                                        *params, bool(joint))


def verify_draft(target_logits, draft_ids, cu_num_draft, draft_probs=None, max_draft=None,
                 temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0, joint=False):
    op = "verify_draft"
    if max_draft is None:
        max_draft = _check_1d(op, "draft_ids", draft_ids)
    width = _index(max_draft) + 1
    if _eager(target_logits, draft_ids, cu_num_draft, draft_probs, temperature, top_k, top_p,
              min_p, seed, offset):
        out_ids, num = _verify_draft_out(target_logits, draft_ids, cu_num_draft, width)
        _ext.verify_draft(target_logits, draft_ids, cu_num_draft, draft_probs, out_ids, num,
                          temperature, top_k, top_p, min_p, seed, offset, bool(joint),
                          _stream(target_logits), _alloc(target_logits))
        return out_ids, num
    return _op[op](target_logits, draft_ids, cu_num_draft, draft_probs, width,
                   *_split_params(op, temperature, top_k, top_p, min_p, seed, offset),
                   bool(joint))


def verify_tree(target_logits, candidates, retrieve_next_token, retrieve_next_sibling,
                num_steps=None, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0,
                joint=False):
    op = "verify_tree"
    if num_steps is None:
        num_steps = _check_2d(op, "candidates", candidates)[1]
    width = _index(num_steps)
    if _eager(target_logits, candidates, retrieve_next_token, retrieve_next_sibling, temperature,
              top_k, top_p, min_p, seed, offset):
        out_ids, out_nodes, num = _verify_tree_out(target_logits, candidates, width)
        _ext.verify_tree(target_logits, candidates, retrieve_next_token, retrieve_next_sibling,
                         out_ids, out_nodes, num, temperature, top_k, top_p, min_p, seed, offset,
                         bool(joint), _stream(target_logits), _alloc(target_logits))
        return out_ids, out_nodes, num
    return _op[op](target_logits, candidates, retrieve_next_token, retrieve_next_sibling, width,
                   *_split_params(op, temperature, top_k, top_p, min_p, seed, offset),
                   bool(joint))
