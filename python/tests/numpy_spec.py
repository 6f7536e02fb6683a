"""What the NumPy formulations of docs/OPERATORS.md in test_ops, test_v32_prims and test_v4 share: the
generator, the bf16 / fp32 conversions, byte views, the Sylvester Hadamard matrix and the rotation of §2.5.1.
Not collected by pytest (no test_ prefix); the test modules import it from their own folder."""
import numpy as np

import dsops

BF16 = dsops.bfloat16


def rng(seed):
    return np.random.default_rng(seed)


def f32(x):
    return np.asarray(x).astype(np.float32)


def bf(x):
    """fp32 -> bf16 array (round to nearest even, NaN kept)."""
    return np.asarray(x, np.float32).astype(BF16)


def rbf(x):
    """The fp32 value of bf16(x)."""
    return f32(bf(x))


def bits(a):
    """The bytes of a (byte-exact comparisons)."""
    return np.ascontiguousarray(a).view(np.uint8)


def sylvester(d):
    """The normalised Sylvester Hadamard matrix [d, d] fp32 (d a power of two)."""
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return (h / np.sqrt(d)).astype(np.float32)


def rot(x, c, s, mode="interleaved", inverse=False):
    """§2.5.1 on the last axis (64 values): two fp32 products and one fp32 add / subtract per output element,
    table index = output index. x, c, s broadcast; unrounded fp32. (tests/io/runcheck.py's np_rope_apply picks
    the same element pairs: those checks run without the dsops package this module imports, so each keeps one.)"""
    x, c, s = f32(x), f32(c), f32(s)
    if inverse:
        s = -s
    j = np.arange(32)
    if mode == "interleaved":
        ia, ib, oa, ob = 2 * j, 2 * j + 1, 2 * j, 2 * j + 1
    elif mode == "half":
        ia, ib, oa, ob = j, j + 32, j, j + 32
    else:
        assert mode == "interleaved_in_half_out"
        ia, ib, oa, ob = 2 * j, 2 * j + 1, j, j + 32
    shape = np.broadcast_shapes(x.shape, c.shape, s.shape)
    x, c, s = (np.broadcast_to(a, shape) for a in (x, c, s))
    y = np.empty(shape, np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        y[..., oa] = x[..., ia] * c[..., oa] - x[..., ib] * s[..., oa]
        y[..., ob] = x[..., ib] * c[..., ob] + x[..., ia] * s[..., ob]
    return y
