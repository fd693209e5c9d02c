"""Outputs, workspaces and streams for numpy, cupy and jax arrays.

The extension only reads and writes views; each framework here allocates the
arrays it returns, so callers get their own kind of array back.
"""
import numpy as np

from . import _nexttok as _ext


def _root(x):
    return type(x).__module__.split(".", 1)[0]


class _Numpy:
    name = "numpy"

    def __init__(self, x):
        pass

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def copy(self, x):
        return x

    stream = 0
    alloc = None

    def ready(self, *xs):
        pass

    def done(self):
        pass


class _Cupy:
    name = "cupy"

    def __init__(self, x):
        import cupy

        self.cp = cupy
        self.device = x.device
        with self.device:  # the current stream of the array's GPU, not of the current one
            self.stream = cupy.cuda.get_current_stream().ptr

    def empty(self, shape, dtype):
        with self.device:
            return self.cp.empty(shape, dtype)

    def alloc(self, nbytes):
        with self.device:
            return self.cp.empty(nbytes, self.cp.int8)

    def copy(self, x):
        return x

    def ready(self, *xs):
        pass

    def done(self):
        pass


class _Jax:
    """jax arrays are immutable and jax exposes no stream: outputs are fresh
    arrays written through DLPack on the legacy default stream, which the
    call synchronizes before returning."""

    name = "jax"
    stream = 0

    def __init__(self, x):
        import jax
        import jax.numpy as jnp

        self.jnp = jnp
        self.x64 = bool(jax.config.jax_enable_x64)
        self.device = next(iter(x.devices()))
        self.cuda = self.device.platform not in ("cpu",)
        if self.cuda and not _ext.cuda_compiled:
            raise ValueError("nexttok was built without CUDA: jax GPU arrays are not supported")

    def empty(self, shape, dtype):
        if dtype == "int64" and not self.x64:
            # Without jax_enable_x64 jax has no int64: tokens come back as int32
            # (the C API writes either); top-k indices need x64.
            if len(shape) == 1:
                dtype = "int32"
            else:
                raise TypeError("nexttok: int64 indices from jax arrays need "
                                "jax.config.update('jax_enable_x64', True)")
        return self.jnp.zeros(shape, dtype, device=self.device).block_until_ready()

    def alloc(self, nbytes):
        return self.empty((nbytes,), "int8")

    def copy(self, x):
        return self.jnp.array(x, copy=True).block_until_ready()

    def ready(self, *xs):
        for x in xs:
            if x is not None and hasattr(x, "block_until_ready"):
                x.block_until_ready()

    def done(self):
        if self.cuda:
            _ext.stream_synchronize(0)


_FRAMEWORKS = {"numpy": _Numpy, "cupy": _Cupy, "jax": _Jax, "jaxlib": _Jax}


def framework(x, op, arg):
    """The framework of array `x`; TypeError naming the argument otherwise."""
    kind = _FRAMEWORKS.get(_root(x))
    if kind is None:
        if isinstance(x, np.generic):
            kind = _Numpy
        else:
            raise TypeError(f"{op}: argument '{arg}' must be an array (numpy, cupy, jax or "
                            f"torch), got {type(x).__name__}")
    return kind(x)


def shape2(x, op, arg):
    """(rows, cols) of a 2-D array, or ValueError naming the argument."""
    shape = getattr(x, "shape", None)
    if shape is None:
        raise TypeError(f"{op}: argument '{arg}' must be an array, got {type(x).__name__}")
    if len(shape) != 2:
        raise ValueError(f"{op}: argument '{arg}' must be 2-D, got shape {tuple(shape)}")
    return int(shape[0]), int(shape[1])


def index(v, op, arg):
    """A Python int from an integer argument (k, group_size), TypeError otherwise."""
    try:
        i = v.__index__()
    except AttributeError:
        raise TypeError(f"{op}: argument '{arg}' must be an integer, got {type(v).__name__}") from None
    if not -(2**31) <= i < 2**31:
        raise ValueError(f"{op}: argument '{arg}' is out of range, got {i}")
    return i


MAX_TOP_K = 2048  # kMaxTopK of the C library (src/core/check.h)
MAX_LOGPROBS = 20  # NT_MAX_LOGPROBS of the C library (nexttok.h)
LOGPROBS_MODES = ("raw", "processed")


def logprobs_request(op, logprobs, logprobs_mode):
    """(n, processed) of sample's logprobs arguments, or the error naming them
    (checked here: n decides the outputs' shape [B, n + 1])."""
    n = index(logprobs, op, "logprobs")
    if not 0 <= n <= MAX_LOGPROBS:
        raise ValueError(f"{op}: argument 'logprobs' must be in [0, {MAX_LOGPROBS}], got {n}")
    if not isinstance(logprobs_mode, str) or logprobs_mode not in LOGPROBS_MODES:
        raise ValueError(f"{op}: argument 'logprobs_mode' must be 'raw' or 'processed', "
                         f"got {logprobs_mode!r}")
    return n, logprobs_mode == "processed"


def check_topk(op, k, vocab, vocab_arg):
    """The C library's checks of what decides a top-k head's output shape [M, k]
    (check_lm_head_dense/binary, src/core/check.cpp), with its wording: V >= 1
    rows in `vocab_arg`, 1 <= k <= min(2048, V); ValueError otherwise. The torch
    fake kernels allocate [M, k] without reaching the library, so they raise
    these themselves (torch.compile then refuses what an eager call refuses)."""
    if vocab < 1:
        raise ValueError(f"{op}: argument '{vocab_arg}' must have at least one row (V >= 1)")
    limit = min(vocab, MAX_TOP_K)
    if not 1 <= k <= limit:
        raise ValueError(f"{op}: argument 'k' must be in [1, min(2048, V) = {limit}], got {k}")


def csr(op, arg, lists, required=False):
    """(offsets, ids) of a list-of-ids argument: a pair of arrays (offsets [B+1],
    ids int32 [N]), or None when absent (both None). TypeError naming it otherwise."""
    if lists is None and not required:
        return None, None
    if lists is not None and not hasattr(lists, "shape"):
        try:
            offsets, ids = lists
            return offsets, ids
        except (TypeError, ValueError):
            pass
    raise TypeError(f"{op}: argument '{arg}' must be {'' if required else 'None or '}a pair "
                    f"(offsets, ids) of arrays, got {type(lists).__name__}")
