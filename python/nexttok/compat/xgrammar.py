"""XGrammar's `apply_token_bitmask_inplace`, computed by nexttok's grammar-mask kernel.

Follows xgrammar 0.2.9 (python/xgrammar/matcher.py and its kernels): a module that
does `from xgrammar import apply_token_bitmask_inplace` can import this one instead.

XGrammar's rule, which differs from nexttok.apply_token_bitmask's on the tokens a
bitmask does not cover:
- the masked width is `vocab_size`, by default min(logits.shape[-1],
  32 * bitmask.shape[-1]); tokens at or past it are left as they are (nexttok's own
  op sets tokens past the bitmask to -inf);
- token t < vocab_size of a selected row becomes -inf iff bit t % 32 of word t / 32
  of that row's bitmask is 0; allowed logits keep their bits;
- `indices` selects rows: row i of logits uses row i of the bitmask, and the two may
  have different numbers of rows as long as every index is a row of both;
- logits and bitmask may be 1-D (one row).

The work is nexttok's kernel on the view logits[:, :vocab_size]; torch only makes
views (and, for `indices` with a bitmask shorter than the logits, a bitmask with one
row per logits row, the rows no index selects left unmasked).
"""
import warnings

import torch

import nexttok

_OP = "apply_token_bitmask_inplace"


def _rows(t, arg):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{_OP}: argument '{arg}' must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() == 1:
        return t.unsqueeze(0)
    if t.dim() == 2:
        return t
    raise ValueError(f"{_OP}: argument '{arg}' must be 1-D or 2-D, got shape {tuple(t.shape)}")


def _index_tensor(indices, rows, device):
    """indices (a list or a 1-D integer tensor) as an int64 tensor on `device`. Host
    values are checked against `rows` (device tensors cannot be without a sync: an
    index outside [0, rows) there selects nothing)."""
    if isinstance(indices, torch.Tensor):
        if indices.dim() != 1 or indices.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"{_OP}: argument 'indices' must be a 1-D int32 or int64 tensor, "
                             f"got {indices.dtype} of shape {tuple(indices.shape)}")
        if indices.device.type == "cpu":
            bad = indices[(indices < 0) | (indices >= rows)]
            if bad.numel():
                raise ValueError(f"{_OP}: argument 'indices' must be in [0, {rows}), "
                                 f"got {int(bad[0])}")
        return indices.to(device)
    try:
        values = [i.__index__() for i in indices]
    except (TypeError, AttributeError):
        raise TypeError(f"{_OP}: argument 'indices' must be a list of ints or a tensor, "
                        f"got {type(indices).__name__}") from None
    for i in values:
        if not 0 <= i < rows:
            raise ValueError(f"{_OP}: argument 'indices' must be in [0, {rows}), got {i}")
    return torch.tensor(values, dtype=torch.int64, device=device)


def apply_token_bitmask_inplace(logits, bitmask, *, vocab_size=None, indices=None):
    """Sets logits[..., t] = -inf for each token t < vocab_size whose bit in `bitmask`
    is 0 (1 = allowed), in place, by XGrammar's rule (module docstring). Returns None,
    as XGrammar's does.

    logits: float32, float16 or bfloat16, [B, V] or [V]; bitmask: int32 [B', W] or
    [W] on the logits' device; vocab_size: None or an int in [0, min(V, 32 * W)];
    indices: None, a list of ints or a 1-D integer tensor of rows to mask."""
    logits2 = _rows(logits, "logits")
    bitmask2 = _rows(bitmask, "bitmask")
    if bitmask.dtype != torch.int32:
        raise ValueError(f"{_OP}: argument 'bitmask' must be int32, got {bitmask.dtype}")
    if bitmask.device != logits.device:
        raise ValueError(f"{_OP}: argument 'bitmask' must be on the logits' device "
                         f"({logits.device}), got {bitmask.device}")
    covered = 32 * bitmask2.shape[1]
    limit = min(logits2.shape[1], covered)
    if vocab_size is None:
        if covered < logits2.shape[1]:
            warnings.warn(f"{_OP}: the bitmask covers {covered} tokens but logits have "
                          f"{logits2.shape[1]}: logits[..., {covered}:] are left unmasked "
                          "(pass vocab_size, or allocate the bitmask for the full vocabulary)",
                          stacklevel=2)
        vocab_size = limit
    else:
        try:
            vocab_size = vocab_size.__index__()
        except AttributeError:
            raise TypeError(f"{_OP}: argument 'vocab_size' must be an int, "
                            f"got {type(vocab_size).__name__}") from None
        if not 0 <= vocab_size <= limit:
            raise ValueError(f"{_OP}: argument 'vocab_size' must be in [0, min(V, 32 * W) = "
                             f"{limit}], got {vocab_size}")
    if vocab_size == 0 or logits2.shape[0] == 0:
        return None
    view = logits2[:, :vocab_size]
    if indices is None:
        if bitmask2.shape[0] != logits2.shape[0]:
            raise ValueError(f"{_OP}: argument 'bitmask' must have one row per logits row "
                             f"({logits2.shape[0]}) when indices is None, got "
                             f"{bitmask2.shape[0]}")
        nexttok.apply_token_bitmask(view, bitmask2)
        return None
    rows = min(logits2.shape[0], bitmask2.shape[0])
    index = _index_tensor(indices, rows, logits.device)
    if bitmask2.shape[0] >= logits2.shape[0]:
        mask = bitmask2[: logits2.shape[0]]
    else:
        # one row per logits row; the rows past the bitmask are never selected
        mask = torch.full((logits2.shape[0], bitmask2.shape[1]), -1, dtype=torch.int32,
                          device=logits.device)
        mask[: bitmask2.shape[0]] = bitmask2
    nexttok.apply_token_bitmask(view, mask, index)
    return None


__all__ = ["apply_token_bitmask_inplace"]
