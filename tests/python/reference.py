"""Independent numpy references of docs/SEMANTICS.md, written from the text
(sorts and float64 sums; no code shared with the library)."""
import numpy as np


def bitmask_from_allowed(allowed):
    b, v = allowed.shape
    w = (v + 31) // 32
    bits = np.zeros((b, w * 32), dtype=np.uint64)
    bits[:, :v] = allowed
    weights = np.uint64(1) << np.arange(32, dtype=np.uint64)
    words = (bits.reshape(b, w, 32) * weights).sum(axis=2)
    return np.ascontiguousarray(words.astype(np.uint32)).view(np.int32).reshape(b, w)


def allowed_from_bitmask(bitmask, v):
    words = bitmask.view(np.uint32).astype(np.uint64)
    bits = (words[:, :, None] >> np.arange(32, dtype=np.uint64)) & np.uint64(1)
    flat = bits.reshape(bitmask.shape[0], bitmask.shape[1] * 32).astype(bool)
    out = np.zeros((bitmask.shape[0], v), dtype=bool)
    n = min(v, flat.shape[1])
    out[:, :n] = flat[:, :n]
    return out


def apply_token_bitmask(logits, bitmask, indices=None):
    out = logits.copy()
    allowed = allowed_from_bitmask(bitmask, logits.shape[1])
    rows = range(logits.shape[0]) if indices is None else [int(i) for i in indices]
    for r in rows:
        if 0 <= r < logits.shape[0]:
            out[r, ~allowed[r]] = -np.inf
    return out


def pack_weights(w):
    return bitmask_from_allowed(w > 0)


def quantize_activations(x):
    x = x.astype(np.float32)
    amax = np.max(np.abs(np.where(np.isnan(x), 0, x)), axis=1)
    scale = (amax / np.float32(127)).astype(np.float32)
    scale[amax == 0] = 1
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.rint(x / scale[:, None])
    q = np.nan_to_num(q, nan=0.0)
    return np.clip(q, -127, 127).astype(np.int8), scale


def order(scores):
    """Indices by (score desc, index asc); NaN as -inf."""
    s = np.where(np.isnan(scores), -np.inf, scores)
    return np.lexsort((np.arange(s.shape[0]), -s))


def topk(scores, k):
    """(values, indices) of one row, SEMANTICS order."""
    idx = order(scores)[:k]
    return scores[idx], idx


def dense_logits(hidden, weight, bias=None):
    out = hidden.astype(np.float64) @ weight.astype(np.float64).T
    return out if bias is None else out + bias.astype(np.float64)


def binary_logits(act_q, act_scale, wq, wscale, group_size, bias=None):
    """logit[m,v] = act_scale[m] * sum_g wscale[v,g] * D[m,v,g] + bias[v] in float64."""
    h = act_q.shape[1]
    signs = np.where(allowed_from_bitmask(wq, h), 1, -1).astype(np.int64)
    d = act_q.astype(np.int64)[:, None, :] * signs[None, :, :]
    groups = d.reshape(act_q.shape[0], signs.shape[0], h // group_size, group_size).sum(axis=3)
    out = act_scale.astype(np.float64)[:, None] * (groups * wscale.astype(np.float64)[None]).sum(2)
    return out if bias is None else out + bias.astype(np.float64)


def keep_set(row, temperature, top_k, top_p, min_p, joint=False, margin=1e-6):
    """(kept token ids, degenerate): the keep-set of one row and whether a cut
    lies within `margin` (relative) of a boundary, where backends may differ."""
    x = np.where(np.isnan(row), -np.inf, row.astype(np.float32))
    if temperature <= 0 or top_k == 1:
        if np.all(np.isneginf(x)):
            return np.array([], dtype=np.int64), False
        return np.array([int(np.argmax(x))]), False
    s = (x / np.float32(temperature)).astype(np.float32)
    if np.any(np.isposinf(s)):
        return np.flatnonzero(np.isposinf(s)), False
    finite = np.flatnonzero(np.isfinite(s))
    if finite.size == 0:
        return finite, False
    idx = order(s)[: finite.size]
    p = np.exp(s[idx].astype(np.float64) - float(s[idx[0]]))
    n_k = top_k if 0 < top_k < idx.size else idx.size
    degenerate = False
    n_p = n_k
    if top_p < 1:
        z = p.sum() if joint else p[:n_k].sum()
        cum = np.cumsum(p[:n_k])
        n_p = int(np.searchsorted(cum, top_p * z, side="left")) + 1
        n_p = min(max(n_p, 1), n_k)
        degenerate |= bool(np.any(np.abs(cum - top_p * z) <= margin * z))
    n_m = idx.size
    if min_p > 0:
        n_m = int(np.sum(p >= min_p))
        degenerate |= bool(np.any(np.abs(p - min_p) <= margin))
    return idx[: max(1, min(n_k, n_p, n_m))], degenerate


def softmax_on(row, temperature, kept):
    s = (row.astype(np.float32) / np.float32(temperature)).astype(np.float64)[kept]
    p = np.exp(s - s.max())
    return p / p.sum()


def logprobs(row, temperature, top_k, top_p, min_p, token, n, processed, joint=False):
    """(ids [n+1], values [n+1] float64, rank) of sample with logprobs for one row
    whose sampled token is `token` (docs/SEMANTICS.md, "Logprobs with sample")."""
    x = np.where(np.isnan(row), -np.inf, row.astype(np.float32)).astype(np.float64)
    ids = np.full(n + 1, -1, dtype=np.int64)
    listed = order(x)[:n]
    ids[1:1 + listed.size] = listed
    values = np.full(n + 1, -np.inf)
    if token < 0:
        return ids, values, 0
    ids[0] = token
    v = np.full(x.shape[0], -np.inf)
    if not processed:
        v[:] = x
    elif temperature <= 0 or top_k == 1 or x.shape[0] == 1:
        v[token] = 0.0
    else:
        kept, _ = keep_set(row, temperature, top_k, top_p, min_p, joint)
        v[kept] = (row.astype(np.float32)[kept] / np.float32(temperature)).astype(np.float64)
    lp = np.full(x.shape[0], -np.inf)
    if np.any(np.isposinf(v)):
        lp[np.isposinf(v)] = -np.log(np.count_nonzero(np.isposinf(v)))
    else:
        finite = np.isfinite(v)
        m = v[finite].max()
        lp[finite] = (v[finite] - m) - np.log(np.exp(v[finite] - m).sum())
    present = ids >= 0
    values[present] = lp[ids[present]]
    rank = int(np.count_nonzero((v != -np.inf) & (v >= v[token])))
    return ids, values, rank
