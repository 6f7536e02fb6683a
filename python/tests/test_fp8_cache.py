"""FlashMLA's FP8 KV caches (docs/OPERATORS.md §2.12) through the Python package, against an independent NumPy
formulation that uses ml_dtypes' float8_e4m3fn and float8_e8m0fnu conversions:

- fp8_cache_quantize: V32 (656 bytes per token) and MODEL1 (blocks of 448 e4m3 + 64 bf16 per token, then 7 ue8m0
  scales and a zero byte per token, padded to a multiple of 576) over block sizes 1, 2, 61, 64 and 69, rows of
  random magnitudes, zero, tiny (scale clamped at 2^-13), huge, NaN and Inf tiles; every byte;
- fp8_cache_dequantize: the rows those caches stand for, and caches of random bytes (any e4m3 byte, NaN
  included; V32 scales of any sign and size); the 256 e4m3 bytes against ml_dtypes' values;
- the round trip within half an e4m3 step; errors for a wrong D, a short MODEL1 block and a missing block_size;
- sparse_flash_attention_v32 with kv_layout flashmla_fp8 (scales that are not powers of two) against §4.4 in
  NumPy on the dequantised rows, and byte-equal to the split bf16 call on those rows.
"""
import ml_dtypes
import numpy as np
import pytest

import dsops

BF16 = dsops.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
LAYOUTS = {"v32": (576, 4, 128), "model1": (512, 7, 64)}  # D, tiles, tile width


def np_scales(tiles):
    """Per tile [..., tiles, width] of fp32 values: 2^ceil(log2(max(amax / 448, 1e-4))); NaN stays NaN."""
    amax = np.max(np.abs(tiles), axis=-1)  # NaN propagates
    with np.errstate(invalid="ignore", divide="ignore"):
        inv = (amax / np.float32(448)).astype(np.float32)
        return np.exp2(np.ceil(np.log2(np.maximum(inv, np.float32(1e-4))))).astype(np.float32)


def np_quantize(kv, layout):
    """The cache bytes of kv [NB, BS, D] (bf16), as FlashMLA lays them out."""
    D, tiles, width = LAYOUTS[layout]
    NB, BS, _ = kv.shape
    f = kv.astype(np.float32)
    nope = f[..., : tiles * width].reshape(NB, BS, tiles, width)
    s = np_scales(nope)
    s = np.where(np.isnan(np.max(np.abs(nope), axis=-1)), np.float32(np.nan), s).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = (nope / s[..., None]).astype(E4M3).view(np.uint8).reshape(NB, BS, tiles * width)
    rope = kv[..., tiles * width :].view(np.uint8).reshape(NB, BS, 128)
    if layout == "v32":
        return np.concatenate([q, s.view(np.uint8).reshape(NB, BS, 16), rope], axis=-1)
    BB = (BS * 584 + 575) // 576 * 576
    cache = np.zeros((NB, BB), np.uint8)
    cache[:, : BS * 576] = np.concatenate([q, rope], axis=-1).reshape(NB, BS * 576)
    e8 = s.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)  # exact: powers of two; NaN -> 0xff
    e8 = np.where(np.isinf(s), np.uint8(0xFF), e8)
    scales = np.zeros((NB, BS, 8), np.uint8)
    scales[..., :7] = e8
    cache[:, BS * 576 : BS * 584] = scales.reshape(NB, BS * 8)
    return cache


def np_dequantize(cache, layout, BS):
    D, tiles, width = LAYOUTS[layout]
    NB = cache.shape[0]
    if layout == "v32":
        q = cache[..., :512]
        s = cache[..., 512:528].copy().view(np.float32).reshape(NB, BS, 4)
        rope = cache[..., 528:].copy().view(np.uint16)
    else:
        body = cache[:, : BS * 576].reshape(NB, BS, 576)
        q, rope = body[..., :448], body[..., 448:].copy().view(np.uint16)
        e8 = cache[:, BS * 576 : BS * 584].reshape(NB, BS, 8)[..., :7].copy()
        s = e8.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    v = q.copy().view(E4M3).astype(np.float32).reshape(NB, BS, tiles, width)
    with np.errstate(invalid="ignore", over="ignore"):
        prod = np.where(np.isnan(v), v, v * s[..., None]).astype(np.float32)
    out = np.empty((NB, BS, D), np.uint16)
    out[..., : tiles * width] = prod.reshape(NB, BS, -1).astype(BF16).view(np.uint16)
    out[..., tiles * width :] = rope
    return out


def rows(rng, NB, BS, D, kind):
    mag = {"random": np.exp(rng.uniform(-10, 10, (NB, BS, 1))), "tiny": 1e-7, "huge": 1e35, "zero": 0.0}
    x = (rng.standard_normal((NB, BS, D)) * mag.get(kind, 1.0)).astype(np.float32)
    if kind == "nan":
        x[:, :, 3] = np.nan
        x[:, ::2, 70] = -np.nan
    if kind == "inf":
        x[:, :, 5] = np.inf
        x[:, 1::2, 200] = -np.inf
    return x.astype(BF16)


@pytest.mark.parametrize("layout", ["v32", "model1"])
@pytest.mark.parametrize("BS", [1, 2, 61, 64, 69])
@pytest.mark.parametrize("kind", ["random", "tiny", "huge", "zero", "nan", "inf"])
def test_quantize_and_back(layout, BS, kind):
    rng = np.random.default_rng(BS * 7 + len(kind))
    D = LAYOUTS[layout][0]
    kv = rows(rng, 3, BS, D, kind)
    cache = dsops.fp8_cache_quantize(kv=kv, layout=layout)["cache"]
    want = np_quantize(kv, layout)
    assert cache.shape == want.shape and np.array_equal(cache, want)
    back = dsops.fp8_cache_dequantize(cache=cache, layout=layout, block_size=BS)["kv"]
    assert np.array_equal(back.view(np.uint16), np_dequantize(want, layout, BS))
    if kind in ("random", "tiny", "huge", "zero"):
        x, y = kv.astype(np.float32), back.astype(np.float32)
        nope = D - 64
        s = np.repeat(np_scales(x[..., :nope].reshape(3, BS, -1, 64 if layout == "model1" else 128)),
                      64 if layout == "model1" else 128, axis=-1)
        assert np.all(np.abs(x[..., :nope] - y[..., :nope]) <= np.abs(x[..., :nope]) * (2.0**-4 + 2.0**-8) + s * 2.0**-10)
        assert np.array_equal(kv[..., nope:].view(np.uint16), back[..., nope:].view(np.uint16))


@pytest.mark.parametrize("layout", ["v32", "model1"])
def test_dequantize_random_bytes(layout):
    rng = np.random.default_rng(3)
    BS = 7
    D = LAYOUTS[layout][0]
    kv = rows(rng, 2, BS, D, "random")
    cache = np_quantize(kv, layout)
    cache[:] = rng.integers(0, 256, cache.shape, dtype=np.uint8)
    if layout == "v32":  # fp32 scales of any sign and size, not only powers of two
        s = (rng.standard_normal((2, BS, 4)) * np.exp(rng.uniform(-20, 20, (2, BS, 4)))).astype(np.float32)
        cache[..., 512:528] = s.view(np.uint8).reshape(2, BS, 16)
    got = dsops.fp8_cache_dequantize(cache=cache, layout=layout, block_size=BS)["kv"]
    assert np.array_equal(got.view(np.uint16), np_dequantize(cache, layout, BS))


def test_every_e4m3_byte():
    # one MODEL1 block of 2 tokens whose scales are 2^0 (ue8m0 127): the rows hold the bytes' values
    BS = 2
    cache = np.zeros((1, (BS * 584 + 575) // 576 * 576), np.uint8)
    body = cache[0, : BS * 576].reshape(BS, 576)
    body[:, :448] = (np.arange(BS * 448) % 256).reshape(BS, 448)
    cache[0, BS * 576 : BS * 584] = np.tile(np.array([127] * 7 + [0], np.uint8), BS)
    got = dsops.fp8_cache_dequantize(cache=cache, layout="model1", block_size=BS)["kv"].astype(np.float32)
    want = body[:, :448].copy().view(E4M3).astype(np.float32)
    nan = np.isnan(want)
    assert nan.sum() == 7  # 0x7f four times and 0xff three times among 896 bytes
    assert np.array_equal(np.isnan(got[0, :, :448]), nan) and np.all(got[0, :, :448][~nan] == want[~nan])


def test_errors():
    kv = np.zeros((2, 4, 512), BF16)
    with pytest.raises(dsops.Error) as e:
        dsops.fp8_cache_quantize(kv=kv, layout="v32")
    assert e.value.status == "DSOPS_ERR_SHAPE" and "kv.shape[2]" in str(e.value)
    with pytest.raises(dsops.Error) as e:
        dsops.fp8_cache_dequantize(cache=np.zeros((2, 100), np.uint8), layout="model1", block_size=4)
    assert e.value.status == "DSOPS_ERR_SHAPE" and "584" in str(e.value)
    with pytest.raises(dsops.Error) as e:
        dsops.fp8_cache_dequantize(cache=np.zeros((2, 2880), np.uint8), layout="model1")
    assert "block_size" in str(e.value)


def test_sfa_reads_flashmla_fp8_rows():
    """sparse_flash_attention_v32 on FlashMLA's V32 rows (kv_layout flashmla_fp8) against §4.4 in NumPy on the rows
    those bytes stand for (this file's dequantisation), and byte-equal to the split bf16 call on those rows."""
    from test_ops import close_ratio, np_sfa, sfa_case

    a = sfa_case(5, False)  # bf16 latent rows [NB, BS, 512], rope [NB, BS, 64]
    kv = np.concatenate([a.pop("key_nope"), a.pop("key_rope")], axis=-1)
    NB, BS, _ = kv.shape
    cache = np_quantize(kv, "v32")
    cache[..., 512:528] = (cache[..., 512:528].copy().view(np.float32) * np.float32(1.3)).view(np.uint8)  # not 2^k
    rows_ = np_dequantize(cache, "v32", BS).view(BF16)
    got = dsops.sparse_flash_attention_v32(**a, kv_packed=cache, kv_layout="flashmla_fp8")
    split = dict(a, key_nope=rows_[..., :512].copy(), key_rope=rows_[..., 512:].copy())
    want = dsops.sparse_flash_attention_v32(**split)
    assert np.array_equal(got["out"].view(np.uint16), want["out"].view(np.uint16))
    assert np.array_equal(got["lse"], want["lse"])
    scale = np.float32(192 ** -0.5 * (0.1 * np.log(40) + 1) ** 2)
    ok, bad = close_ratio(got["out"].astype(np.float32), np_sfa(split, scale), 1e-4, 0.005, 0.005)
    assert ok, f"{bad} elements outside 1e-4 / 0.005"
    with pytest.raises(dsops.Error):  # rows of another size than 656 bytes are refused
        dsops.sparse_flash_attention_v32(**a, kv_packed=cache[..., :600], kv_layout="flashmla_fp8")


def model1_view(rows):
    """FlashMLA's MODEL1 blocks of bf16 rows [NB, BS, 512] (this file's quantisation) as FlashMLA views them:
    [NB, BS, 584] uint8 with the padded block length as stride[0]; and the bf16 rows the blocks stand for."""
    NB, BS, _ = rows.shape
    blocks = np_quantize(rows, "model1")
    view = np.lib.stride_tricks.as_strided(blocks, (NB, BS, 584), (blocks.shape[1], 584, 1))
    return view, np_dequantize(blocks, "model1", BS).view(BF16)


@pytest.mark.parametrize("variant,S,seqused,extra", [
    ("swa", [3, 2, 1], [140, 1, 50], dict(BSW=16, sinks="finite")),
    ("cfa", [2, 1], [300, 129], dict(BSW=16, BSC=3, sinks="finite")),
    ("scfa", [4, 2, 1], [50, 3, 200], dict(BSW=16, BSC=4, K=16, topk_length=True)),
])
def test_sas_reads_model1_blocks(variant, S, seqused, extra):
    """swa / cfa / scfa on pools of MODEL1 FP8 blocks (pool_layout inferred from the uint8 pools) give the bytes of
    the bf16 call on the rows the blocks stand for, which NumPy's §3.7 confirms."""
    from test_v4 import TOL_BF16, TOL_LSE, TOL_TILED, compare_close, np_sas, sas_case

    a, p = sas_case(90 + len(variant), variant, {}, S, seqused, 4, 512, **extra)
    fp8, dequantised = dict(a), dict(a)
    for pool in ("ori_kv", "cmp_kv"):
        if pool in a:
            fp8[pool], dequantised[pool] = model1_view(a[pool])
    got = getattr(dsops, variant)(**fp8)
    want = getattr(dsops, variant)(**dequantised)
    assert np.array_equal(got["out"].view(np.uint16), want["out"].view(np.uint16))
    assert np.array_equal(got["lse"].view(np.uint32), want["lse"].view(np.uint32))
    ref, rlse, _ = np_sas(dequantised, p)
    compare_close(got["out"], ref, TOL_TILED if p["p_mode"] == "tiled" else TOL_BF16, "out")
    compare_close(got["lse"], rlse, TOL_LSE, "lse")
    # MODEL1 pools whose rows are not 584 bytes, or whose blocks overlap, are refused, naming the pool
    pool = fp8["ori_kv"]
    overlapping = np.lib.stride_tricks.as_strided(pool, pool.shape, (pool.shape[1] * 584 - 8, 584, 1))
    for bad_pool, frag in ((np.ascontiguousarray(pool[:, :, :583]), "584"), (overlapping, "strides")):
        with pytest.raises(dsops.Error) as e:
            getattr(dsops, variant)(**dict(fp8, ori_kv=bad_pool))
        assert "ori_kv" in str(e.value) and frag in str(e.value)


@pytest.mark.parametrize("layout", ["v32", "model1"])
def test_cache_store_writes_fp8_rows(layout):
    """cache_store into a uint8 cache writes FlashMLA's FP8 row of each addressed token (V32 [NB, BS, 656]; MODEL1
    blocks in FlashMLA's view), the bytes NumPy's quantisation gives; other rows and padding stay as they were."""
    rng = np.random.default_rng(12)
    D = LAYOUTS[layout][0]
    NB, BS = 3, 4
    src = rows(rng, 1, 6, D, "random")[0]                      # [T, D] bf16
    slots = np.array([5, -1, 0, 11, 2, -1], np.int64)
    if layout == "v32":
        backing = np.full((NB, BS, 656), 0xA5, np.uint8)
        cache = backing
    else:
        BB = (BS * 584 + 575) // 576 * 576
        backing = np.full((NB, BB), 0xA5, np.uint8)
        cache = np.lib.stride_tricks.as_strided(backing, (NB, BS, 584), (BB, 584, 1))
    before = backing.copy()
    dsops.cache_store(src=src, cache_index=slots, cache=cache)
    want = before.copy()
    for t, r in enumerate(slots):
        if r < 0:
            continue
        one = np_quantize(src[t][None, None], layout)
        if layout == "v32":
            want[r // BS, r % BS] = one[0, 0]
        else:
            blk, off = r // BS, r % BS
            want[blk, 576 * off : 576 * off + 576] = one[0, :576]
            want[blk, 576 * BS + 8 * off : 576 * BS + 8 * off + 8] = one[0, 576:584]
    assert np.array_equal(backing, want)
