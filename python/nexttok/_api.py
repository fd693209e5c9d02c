"""The public operations. torch tensors go to nexttok.torch (torch.library ops);
numpy, cupy and jax arrays are handled here, outputs allocated by their own
framework and work queued on its current stream."""
from . import _nexttok as _ext
from ._arrays import csr, framework, index, logprobs_request, shape2

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


class _Call:
    """The numpy, cupy and jax path of one operation, run on array `x` (the
    argument `arg`, whose framework allocates the outputs and gives the stream):
    __init__ checks that `x` is an array (and 2-D unless two_d=False, giving
    rows and cols), each operation checks its own arguments, then run()."""

    def __init__(self, op, arg, x, two_d=True):
        self.op = op
        self.f = framework(x, op, arg)
        if two_d:
            self.rows, self.cols = shape2(x, op, arg)

    def run(self, inputs, outputs, launch, in_place=None):
        """Waits for `inputs`; allocates `outputs` [(shape, dtype)], after a copy
        of `in_place` for an op that writes into its input (jax gets a new
        array); launch(f, *those) calls the extension on f.stream. Returns the
        one output or a tuple."""
        f = self.f
        f.ready(*inputs)
        outs = [] if in_place is None else [f.copy(in_place)]
        outs += [f.empty(shape, dtype) for shape, dtype in outputs]
        launch(f, *outs)
        f.done()
        return outs[0] if len(outs) == 1 else tuple(outs)


def _topk(rows, k):
    """The outputs of a top-k head: values f32 [M, k], indices int64 [M, k] (k < 1
    is left to the extension, whose check names it)."""
    return [((rows, max(k, 0)), "float32"), ((rows, max(k, 0)), "int64")]


def apply_token_bitmask(logits, bitmask, indices=None):
    """Sets logits[r, t] = -inf where bit t of bitmask[r] is 0 (1 = allowed), in place
    for torch, numpy and cupy (the same array is returned); jax gets a new array."""
    if _is_torch(logits) or _load_torch(logits):
        return _torch.apply_token_bitmask(logits, bitmask, indices)
    c = _Call("apply_token_bitmask", "logits", logits, two_d=False)
    return c.run((logits, bitmask, indices), (), lambda f, out: _ext.apply_token_bitmask(
        out, bitmask, indices, f.stream), in_place=logits)


apply_allowed_mask = apply_token_bitmask


def bitmask_from_allowed(allowed):
    """bool [B, V] -> int32 [B, ceil(V/32)], bit t of row r set iff allowed[r, t]."""
    if _is_torch(allowed) or _load_torch(allowed):
        return _torch.bitmask_from_allowed(allowed)
    c = _Call("bitmask_from_allowed", "allowed", allowed)
    return c.run((allowed,), [((c.rows, (c.cols + 31) // 32), "int32")], lambda f, out:
                 _ext.bitmask_from_allowed(allowed, out, f.stream))


def sample(logits, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0,
           uniform=None, joint=False, logprobs=None, logprobs_mode="raw"):
    """One token per row of logits [B, V] (int64 [B]; -1 for a fully masked row).
    Each parameter is a scalar or a length-B array on the logits' device.

    With logprobs=n (0..20) returns (tokens, logprob_ids int32 [B, n+1],
    logprobs float32 [B, n+1], ranks int32 [B]): column 0 is the sampled token,
    columns 1..n the row's n most likely tokens (logits order); logprobs_mode
    "raw" is the log_softmax of the logits as given, "processed" that of the
    distribution the token was drawn from (temperature and filters, -inf outside
    the keep-set). The tokens are those of the call without logprobs."""
    if _is_torch(logits) or _load_torch(logits):
        return _torch.sample(logits, temperature, top_k, top_p, min_p, seed, offset, uniform,
                             joint, logprobs, logprobs_mode)
    c = _Call("sample", "logits", logits)
    inputs = (logits, temperature, top_k, top_p, min_p, seed, offset, uniform)
    if logprobs is None:
        return c.run(inputs, [((c.rows,), "int64")], lambda f, tokens: _ext.sample(
            logits, tokens, temperature, top_k, top_p, min_p, seed, offset, uniform,
            bool(joint), f.stream, f.alloc))
    n, processed = logprobs_request(c.op, logprobs, logprobs_mode)
    outputs = [((c.rows,), "int64"), ((c.rows, n + 1), "int32"), ((c.rows, n + 1), "float32"),
               ((c.rows,), "int32")]
    return c.run(inputs, outputs, lambda f, tokens, ids, values, ranks: _ext.sample_logprobs(
        logits, tokens, temperature, top_k, top_p, min_p, seed, offset, uniform, bool(joint), n,
        processed, ids, values, ranks, f.stream, f.alloc))


def lm_head_topk_dense(hidden, weight, k=50, bias=None):
    """Exact top-k of hidden [M, H] @ weight [V, H]^T (+ bias): (values f32 [M, k],
    indices int64 [M, k]), without materializing the [M, V] logits."""
    if _is_torch(hidden) or _load_torch(hidden):
        return _torch.lm_head_topk_dense(hidden, weight, k, bias)
    c = _Call("lm_head_topk_dense", "hidden", hidden)
    k = index(k, c.op, "k")
    return c.run((hidden, weight, bias), _topk(c.rows, k), lambda f, values, indices:
                 _ext.lm_head_topk_dense(hidden, weight, bias, k, values, indices, f.stream,
                                         f.alloc))


def lm_head_topk_binary(act_q, act_scale, wq, wscale, bias=None, group_size=128, k=50):
    """Exact top-k of the 1-bit head (README, "Binary head layout"): (values f32 [M, k],
    indices int64 [M, k])."""
    if _is_torch(act_q) or _load_torch(act_q):
        return _torch.lm_head_topk_binary(act_q, act_scale, wq, wscale, bias, group_size, k)
    c = _Call("lm_head_topk_binary", "act_q", act_q)
    k, group_size = index(k, c.op, "k"), index(group_size, c.op, "group_size")
    return c.run((act_q, act_scale, wq, wscale, bias), _topk(c.rows, k),
                 lambda f, values, indices: _ext.lm_head_topk_binary(
                     act_q, act_scale, wq, wscale, bias, group_size, k, values, indices,
                     f.stream, f.alloc))


def pack_weights(w):
    """Signs int8 [V, H] (-1/+1) -> int32 [V, H/32], bit j of word i = (w[v, 32i+j] > 0)."""
    if _is_torch(w) or _load_torch(w):
        return _torch.pack_weights(w)
    c = _Call("pack_weights", "w", w)
    if c.cols % 32:
        raise ValueError(f"{c.op}: argument 'w' must have H % 32 == 0, got H = {c.cols}")
    return c.run((w,), [((c.rows, c.cols // 32), "int32")], lambda f, out:
                 _ext.pack_weights(w, out, f.stream))


def quantize_activations(x):
    """x [M, H] -> (act_q int8 [M, H], act_scale f32 [M]), scale = max|x| / 127."""
    if _is_torch(x) or _load_torch(x):
        return _torch.quantize_activations(x)
    c = _Call("quantize_activations", "x", x)
    return c.run((x,), [((c.rows, c.cols), "int8"), ((c.rows,), "float32")],
                 lambda f, act_q, act_scale: _ext.quantize_activations(x, act_q, act_scale,
                                                                         f.stream))


def apply_penalties(logits, prompt=None, output=None, repetition=1.0, presence=0.0, frequency=0.0):
    """vLLM's penalties on logits [B, V], in place (jax gets a new array): repetition on
    every token of the row's prompt or output (x > 0 ? x / r : x * r, once), then
    x -= frequency * count and x -= presence for tokens of the output. `prompt` and
    `output` are (offsets [B+1] int32/int64, ids int32 [N]) or None; each parameter
    is a scalar or a length-B float32 array on the logits' device."""
    if _is_torch(logits) or _load_torch(logits):
        return _torch.apply_penalties(logits, prompt, output, repetition, presence, frequency)
    po, pi = csr("apply_penalties", "prompt", prompt)
    oo, oi = csr("apply_penalties", "output", output)
    c = _Call("apply_penalties", "logits", logits, two_d=False)
    return c.run((logits, po, pi, oo, oi, repetition, presence, frequency), (),
                 lambda f, out: _ext.apply_penalties(out, po, pi, oo, oi, repetition, presence,
                                                     frequency, f.stream, f.alloc),
                 in_place=logits)


def apply_logit_bias(logits, tokens, values):
    """logits[b, ids[i]] += values[i] for the entries of each row, in place (jax gets a
    new array); repeated ids add in entry order. `tokens` is (offsets [B+1], ids int32
    [N]); values float32 [N]."""
    if _is_torch(logits) or _load_torch(logits):
        return _torch.apply_logit_bias(logits, tokens, values)
    offsets, ids = csr("apply_logit_bias", "tokens", tokens, required=True)
    c = _Call("apply_logit_bias", "logits", logits, two_d=False)
    return c.run((logits, offsets, ids, values), (),
                 lambda f, out: _ext.apply_logit_bias(out, offsets, ids, values, f.stream,
                                                      f.alloc),
                 in_place=logits)


def _width(op, arg, v):
    """A positive column count given by the caller (max_draft + 1, num_steps)."""
    v = index(v, op, arg)
    if v < 0:
        raise ValueError(f"{op}: argument '{arg}' must be >= 0, got {v}")
    return v


def _length(op, arg, x):
    shape = getattr(x, "shape", None)
    if shape is None or len(shape) != 1:
        raise ValueError(f"{op}: argument '{arg}' must be a 1-D array, got "
                         f"{None if shape is None else tuple(shape)}")
    return int(shape[0])


def verify_draft(target_logits, draft_ids, cu_num_draft, draft_probs=None, max_draft=None,
                 temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0, joint=False):
    """Speculative verification of chains of drafts (vLLM's layout): request b
    owns drafts cu_num_draft[b] .. cu_num_draft[b+1]-1 (int32 draft_ids [Td]) and
    target rows cu[b]+b .. cu[b+1]+b of target_logits [Td + B, V]; draft_probs
    f32 [Td, V] or None (one-hot drafts). Returns (out_ids int32 [B, max_draft+1],
    emitted tokens then -1; num_emitted int32 [B]). max_draft defaults to Td.
    Parameters are per request: a scalar or a length-B array."""
    if _is_torch(target_logits) or _load_torch(target_logits):
        return _torch.verify_draft(target_logits, draft_ids, cu_num_draft, draft_probs, max_draft,
                                   temperature, top_k, top_p, min_p, seed, offset, joint)
    op = "verify_draft"
    c = _Call(op, "target_logits", target_logits)
    requests = max(_length(op, "cu_num_draft", cu_num_draft) - 1, 0)
    width = _width(op, "max_draft", _length(op, "draft_ids", draft_ids)
                   if max_draft is None else max_draft) + 1
    return c.run((target_logits, draft_ids, cu_num_draft, draft_probs, temperature, top_k, top_p,
                  min_p, seed, offset),
                 [((requests, width), "int32"), ((requests,), "int32")],
                 lambda f, out_ids, num: _ext.verify_draft(
                     target_logits, draft_ids, cu_num_draft, draft_probs, out_ids, num,
                     temperature, top_k, top_p, min_p, seed, offset, bool(joint), f.stream,
                     f.alloc))


def verify_tree(target_logits, candidates, retrieve_next_token, retrieve_next_sibling,
                num_steps=None, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0,
                joint=False):
    """Speculative verification of token trees (EAGLE / SGLang's layout):
    candidates, retrieve_next_token, retrieve_next_sibling int64 [B, D] (node 0
    the root), target_logits [B*D, V] (row b*D + d: the distribution after node
    d). Walks each tree accepting, level by level, the first child that verifies.
    Returns (out_ids int32 [B, S], out_nodes int32 [B, S]: the node of each
    accepted token, else -1; num_emitted int32 [B]); S = num_steps, default D."""
    if _is_torch(target_logits) or _load_torch(target_logits):
        return _torch.verify_tree(target_logits, candidates, retrieve_next_token,
                                  retrieve_next_sibling, num_steps, temperature, top_k, top_p,
                                  min_p, seed, offset, joint)
    op = "verify_tree"
    c = _Call(op, "target_logits", target_logits)
    requests, nodes = shape2(candidates, op, "candidates")
    width = _width(op, "num_steps", nodes if num_steps is None else num_steps)
    return c.run((target_logits, candidates, retrieve_next_token, retrieve_next_sibling,
                  temperature, top_k, top_p, min_p, seed, offset),
                 [((requests, width), "int32"), ((requests, width), "int32"),
                  ((requests,), "int32")],
                 lambda f, out_ids, out_nodes, num: _ext.verify_tree(
                     target_logits, candidates, retrieve_next_token, retrieve_next_sibling,
                     out_ids, out_nodes, num, temperature, top_k, top_p, min_p, seed, offset,
                     bool(joint), f.stream, f.alloc))
def _fused_outputs(rows, n):
    """The fused ops' outputs: tokens, then (with n) logprob_ids, logprobs, ranks."""
    outputs = [((rows,), "int64")]
    if n is not None:
        outputs += [((rows, n + 1), "int32"), ((rows, n + 1), "float32"), ((rows,), "int32")]
    return outputs


def _fused_request(op, logprobs, logprobs_mode):
    """(n, processed) of a logprobs request, or (None, False) without one."""
    if logprobs is None:
        return None, False
    return logprobs_request(op, logprobs, logprobs_mode)


def _fused_logprobs_args(n, processed, outs):
    """The extension's trailing logprobs arguments for the outputs after the tokens."""
    if n is None:
        return (0, False, None, None, None)
    ids, values, ranks = outs
    return (n, processed, ids, values, ranks)


def lm_head_sample_dense(hidden, weight, bias=None, bitmask=None, temperature=1.0, top_k=0,
                         top_p=1.0, min_p=0.0, seed=0, offset=0, joint=False, logprobs=None,
                         logprobs_mode="raw"):
    """Hidden [M, H] -> one token per row (int64 [M]): the token sample() returns on the
    head's own scores hidden @ weight^T (+ bias) after the bitmask (int32 [M, W], 1 =
    allowed), for the same parameters, seed and offset; -1 for a row that allows no
    token. Each parameter is a scalar or a length-M array on the weight's device.

    With logprobs=n (0..20) returns (tokens, logprob_ids, logprobs, ranks) as
    sample(..., logprobs=n, logprobs_mode=...) returns them on those masked scores."""
    if _is_torch(hidden) or _load_torch(hidden):
        return _torch.lm_head_sample_dense(hidden, weight, bias, bitmask, temperature, top_k,
                                           top_p, min_p, seed, offset, joint, logprobs,
                                           logprobs_mode)
    c = _Call("lm_head_sample_dense", "hidden", hidden)
    n, processed = _fused_request(c.op, logprobs, logprobs_mode)
    return c.run((hidden, weight, bias, bitmask, temperature, top_k, top_p, min_p, seed, offset),
                 _fused_outputs(c.rows, n), lambda f, tokens, *outs: _ext.lm_head_sample_dense(
                     hidden, weight, bias, bitmask, tokens, None, 0, 1, 0, temperature, top_k,
                     top_p, min_p, seed, offset, bool(joint), f.stream, f.alloc,
                     *_fused_logprobs_args(n, processed, outs)))


def lm_head_sample_binary(act_q, act_scale, wq, wscale, bias=None, group_size=128, bitmask=None,
                          temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0,
                          joint=False, logprobs=None, logprobs_mode="raw"):
    """lm_head_sample_dense for the 1-bit head of lm_head_topk_binary (logprobs alike)."""
    if _is_torch(act_q) or _load_torch(act_q):
        return _torch.lm_head_sample_binary(act_q, act_scale, wq, wscale, bias, group_size,
                                            bitmask, temperature, top_k, top_p, min_p, seed,
                                            offset, joint, logprobs, logprobs_mode)
    c = _Call("lm_head_sample_binary", "act_q", act_q)
    group_size = index(group_size, c.op, "group_size")
    n, processed = _fused_request(c.op, logprobs, logprobs_mode)
    return c.run((act_q, act_scale, wq, wscale, bias, bitmask, temperature, top_k, top_p, min_p,
                  seed, offset), _fused_outputs(c.rows, n), lambda f, tokens, *outs:
                 _ext.lm_head_sample_binary(act_q, act_scale, wq, wscale, bias, group_size,
                                            bitmask, tokens, None, 0, 1, 0, temperature, top_k,
                                            top_p, min_p, seed, offset, bool(joint), f.stream,
                                            f.alloc, *_fused_logprobs_args(n, processed, outs)))
