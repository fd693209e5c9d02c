"""Wrong shapes, dtypes, strides and ranges raise ValueError or TypeError that
names the argument; nothing crashes."""
import numpy as np
import pytest

import nexttok

F = np.zeros((4, 64), np.float32)
MASK = np.zeros((4, 2), np.int32)
W8 = np.ones((16, 64), np.int8)
WQ = np.zeros((16, 2), np.int32)
WS = np.ones((16, 1), np.float16)
AQ = np.zeros((2, 64), np.int8)
AS = np.ones(2, np.float32)

CASES = [
    # (call, exception, argument named in the message)
    (lambda: nexttok.sample(F.astype(np.float64)), TypeError, "logits"),
    (lambda: nexttok.sample(F.astype(np.int32)), TypeError, "logits"),
    (lambda: nexttok.sample(F[0]), ValueError, "logits"),
    (lambda: nexttok.sample(np.zeros((2, 3, 4), np.float32)), ValueError, "logits"),
    (lambda: nexttok.sample(F[:, ::2]), ValueError, "logits"),
    (lambda: nexttok.sample([[1.0, 2.0]]), TypeError, "logits"),
    (lambda: nexttok.sample(np.zeros((4, 0), np.float32)), ValueError, "logits"),
    (lambda: nexttok.sample(F, temperature=-1.0), ValueError, "temperature"),
    (lambda: nexttok.sample(F, temperature=float("nan")), ValueError, "temperature"),
    (lambda: nexttok.sample(F, temperature="hot"), TypeError, "temperature"),
    (lambda: nexttok.sample(F, temperature=np.ones(3, np.float32)), ValueError, "temperature"),
    (lambda: nexttok.sample(F, temperature=np.ones(4, np.float64)), TypeError, "temperature"),
    (lambda: nexttok.sample(F, temperature=np.ones((4, 1), np.float32)), ValueError, "temperature"),
    (lambda: nexttok.sample(F, top_k=-2), ValueError, "top_k"),
    (lambda: nexttok.sample(F, top_k=2.5), TypeError, "top_k"),
    (lambda: nexttok.sample(F, top_k=np.ones(4, np.int64)), TypeError, "top_k"),
    (lambda: nexttok.sample(F, top_p=0.0), ValueError, "top_p"),
    (lambda: nexttok.sample(F, top_p=1.5), ValueError, "top_p"),
    (lambda: nexttok.sample(F, min_p=-0.1), ValueError, "min_p"),
    (lambda: nexttok.sample(F, min_p=2.0), ValueError, "min_p"),
    (lambda: nexttok.sample(F, seed=-1), ValueError, "seed"),
    (lambda: nexttok.sample(F, seed=2**64), ValueError, "seed"),
    (lambda: nexttok.sample(F, offset=np.ones(4, np.int32)), TypeError, "offset"),
    (lambda: nexttok.sample(F, uniform=np.ones(3, np.float32)), ValueError, "uniform"),
    (lambda: nexttok.sample(F, uniform=np.ones(4, np.float64)), TypeError, "uniform"),
    (lambda: nexttok.apply_token_bitmask(F.copy(), MASK[:3]), ValueError, "bitmask"),
    (lambda: nexttok.apply_token_bitmask(F.copy(), MASK.astype(np.int64)), TypeError, "bitmask"),
    (lambda: nexttok.apply_token_bitmask(F.astype(np.int32), MASK), TypeError, "logits"),
    (lambda: nexttok.apply_token_bitmask(F.copy(), MASK, np.zeros(2, np.float32)), TypeError,
     "indices"),
    (lambda: nexttok.apply_token_bitmask(F, MASK), ValueError, "logits"),  # read-only below
    (lambda: nexttok.bitmask_from_allowed(np.zeros((2, 40), np.int8)), TypeError, "allowed"),
    (lambda: nexttok.pack_weights(np.ones((4, 40), np.int8)), ValueError, "w"),
    (lambda: nexttok.pack_weights(np.ones((4, 64), np.float32)), TypeError, "w"),
    (lambda: nexttok.quantize_activations(np.ones((2, 8), np.int32)), TypeError, "x"),
    (lambda: nexttok.lm_head_topk_dense(F, F, k=0), ValueError, "k"),
    (lambda: nexttok.lm_head_topk_dense(F, F, k=5), ValueError, "k"),
    (lambda: nexttok.lm_head_topk_dense(F, F, k=1.5), TypeError, "k"),
    (lambda: nexttok.lm_head_topk_dense(F, np.zeros((8, 32), np.float32), k=2), ValueError,
     "weight|hidden"),
    (lambda: nexttok.lm_head_topk_dense(F, F.astype(np.float16), k=2), TypeError, "weight|hidden"),
    (lambda: nexttok.lm_head_topk_dense(F, F, k=2, bias=np.ones(3, np.float32)), ValueError, "bias"),
    (lambda: nexttok.lm_head_topk_binary(AQ, AS, WQ, WS, group_size=48, k=2), ValueError,
     "group_size"),
    (lambda: nexttok.lm_head_topk_binary(AQ, AS, WQ, WS, group_size=64, k=17), ValueError, "k"),
    (lambda: nexttok.lm_head_topk_binary(AQ.astype(np.int32), AS, WQ, WS, group_size=64, k=2),
     TypeError, "act_q"),
    (lambda: nexttok.lm_head_topk_binary(AQ, AS[:1], WQ, WS, group_size=64, k=2), ValueError,
     "act_scale"),
    (lambda: nexttok.lm_head_topk_binary(AQ, AS, WQ, WS.astype(np.float32), group_size=64, k=2),
     TypeError, "wscale"),
]

F.setflags(write=False)


@pytest.mark.parametrize("call,exc,arg", CASES, ids=[f"{i}-{c[2]}" for i, c in enumerate(CASES)])
def test_argument_errors(call, exc, arg):
    with pytest.raises(exc) as info:
        call()
    assert any(f"'{a}'" in str(info.value) for a in arg.split("|")), str(info.value)


# The torch fake kernels (nexttok.torch, what torch.compile runs) allocate the
# top-k outputs without reaching the C library, so they refuse k and V through
# nexttok._arrays.check_topk: it must say what the library says, where it says it.
TOPK_CASES = [(k, v) for v in (0, 1, 40, 2048, 3000) for k in (-5, -1, 0, 1, 40, 41, 2048, 2049)]


@pytest.mark.parametrize("k,v", TOPK_CASES)
def test_check_topk_agrees_with_the_library(k, v):
    from nexttok._arrays import check_topk

    hidden, weight = np.zeros((2, 32), np.float32), np.zeros((v, 32), np.float32)
    act_q, act_scale = np.zeros((2, 32), np.int8), np.ones(2, np.float32)
    wq, wscale = np.zeros((v, 1), np.int32), np.ones((v, 1), np.float16)
    calls = [("lm_head_topk_dense", "weight",
              lambda: nexttok.lm_head_topk_dense(hidden, weight, k=k)),
             ("lm_head_topk_binary", "wq",
              lambda: nexttok.lm_head_topk_binary(act_q, act_scale, wq, wscale, group_size=32,
                                                  k=k))]
    for op, vocab_arg, call in calls:
        try:
            check_topk(op, k, v, vocab_arg)
        except ValueError as e:
            with pytest.raises(ValueError) as info:
                call()
            assert str(info.value) == str(e)
        else:
            values, indices = call()
            assert values.shape == indices.shape == (2, k)
