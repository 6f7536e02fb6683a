"""The Python package against independent vectorised NumPy formulations of docs/OPERATORS.md, on small random
cases: rmsnorm (§2.3), sparse_flash_attention_v32 (§4.4, split_int8 and split_bf16, strided query views, the
NaN rows of §2.10 A3), lightning_indexer (§4.3 / §3.6, int8 and bf16, the top-k compared as sets of scores);
in-place caches (cache_store, §2.8); errors; the same bytes through Python and through `dsops run`; torch
tensors."""
import json
import os
import struct
import subprocess
import tempfile

import numpy as np
import pytest

import dsops
from numpy_spec import BF16, bf, f32, rng

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


# ---- rmsnorm ------------------------------------------------------------------------------------------------

def np_rmsnorm(x, w, eps):
    xf = f32(x)
    y = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + np.float32(eps))
    return y * f32(w) if w is not None else y


@pytest.mark.parametrize("W", [64, 7168])
def test_rmsnorm(W):
    x = bf(rng(1).standard_normal((5, W)))
    w = bf(rng(2).uniform(0.5, 1.5, W))
    y = dsops.rmsnorm(x=x, weight=w, eps=1e-6)["y"]
    assert y.dtype == BF16 and y.shape == x.shape
    ref = np_rmsnorm(x, w, 1e-6)
    np.testing.assert_allclose(f32(y), ref, atol=1e-4, rtol=2 ** -7)


# ---- sparse_flash_attention_v32 -----------------------------------------------------------------------------

def sfa_case(seed, int8, T_per=(2, 1), kv=(40, 23), N=4, Dc=512, Dr=64, K=16, BS=16):
    r = rng(seed)
    B = len(T_per)
    MB = max((k + BS - 1) // BS for k in kv)
    NB = B * MB + 1
    perm = r.permutation(NB)
    bt = perm[: B * MB].reshape(B, MB).astype(np.int32)
    cu = np.concatenate([[0], np.cumsum(T_per)]).astype(np.int32)
    T = int(cu[-1])
    a = dict(q_nope=bf(r.uniform(-1, 1, (T, N, Dc))), q_rope=bf(r.uniform(-1, 1, (T, N, Dr))),
             key_rope=bf(r.uniform(-1, 1, (NB, BS, Dr))), block_table=bt, cu_seqlens_q=cu,
             seqused_kv=np.array(kv, np.int32))
    if int8:
        a["key_nope"] = r.integers(-127, 128, (NB, BS, Dc), dtype=np.int8)
        a["key_nope_scale"] = (r.random((NB, BS, Dc // 128)) / 64).astype(np.float32)
    else:
        a["key_nope"] = bf(r.uniform(-1, 1, (NB, BS, Dc)))
    idx = np.full((T, K), -1, np.int32)
    for b in range(B):
        for t in range(cu[b], cu[b + 1]):
            L = kv[b] - (cu[b + 1] - 1 - t)
            n = min(K, L)
            idx[t, :n] = r.permutation(L)[:n]
    a["topk_indices"] = idx
    return a


def np_sfa(a, scale, top=None):
    """§4.4 with the normalised P: per token the used rows, bf16 keys, fp32 scores, softmax, bf16 P, P V; the
    largest score of each row into `top` [T, N] when given (left alone for tokens without keys)."""
    q = np.concatenate([f32(a["q_nope"]), f32(a["q_rope"])], -1)
    T, N, Dc = a["q_nope"].shape
    NB, BS = a["key_rope"].shape[:2]
    if a["key_nope"].dtype == np.int8:
        g = a["key_nope_scale"].shape[-1]
        kn_all = f32(bf((a["key_nope"].astype(np.float32).reshape(NB, BS, g, -1)
                         * a["key_nope_scale"][..., None]).reshape(NB * BS, Dc)))
    else:
        kn_all = f32(a["key_nope"]).reshape(NB * BS, Dc)
    kr_all = f32(a["key_rope"]).reshape(NB * BS, -1)
    cu, used, bt = a["cu_seqlens_q"], a["seqused_kv"], a["block_table"]
    out = np.zeros((T, N, Dc), np.float32)
    for b in range(len(used)):
        for t in range(cu[b], cu[b + 1]):
            L = used[b] - (cu[b + 1] - 1 - t)
            ids = a["topk_indices"][t]
            ids = ids[(ids >= 0) & (ids < L)]
            if len(ids) == 0:
                continue
            rows = bt[b, ids // BS] * BS + ids % BS
            k = np.concatenate([kn_all[rows], kr_all[rows]], -1)
            s = (q[t] @ k.T) * np.float32(scale)
            if top is not None:
                top[t] = s.max(-1)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            out[t] = f32(bf(p)) @ kn_all[rows]
    return out


def close_ratio(got, ref, atol, rtol, ratio):
    bad = np.abs(got - ref) > atol + rtol * np.abs(ref)
    return bad.sum() <= int(np.floor(ratio * bad.size + 0.5)), bad.sum()


@pytest.mark.parametrize("int8", [True, False])
def test_sparse_flash_attention_v32(int8):
    a = sfa_case(3, int8)
    r = dsops.sparse_flash_attention_v32(**a)
    assert set(r) == {"out", "lse", "max_logits"} and r["out"].dtype == BF16
    scale = np.float32(192 ** -0.5 * (0.1 * np.log(40) + 1) ** 2)  # the V3.2 preset's softmax_scale
    top = np.full(r["max_logits"].shape, -np.inf, np.float32)
    ok, bad = close_ratio(f32(r["out"]), np_sfa(a, scale, top), 1e-4, 0.005, 0.005)
    assert ok, f"{bad} elements outside 1e-4 / 0.005"
    assert np.allclose(r["max_logits"], top, rtol=1e-5, atol=1e-5), "max_logits: not the rows' largest scores"


def test_sfa_strided_query_views():
    """q_nope and q_rope as views into one [T, N, 576] buffer give the same bytes as contiguous copies."""
    a = sfa_case(4, True)
    q = np.concatenate([a["q_nope"], a["q_rope"]], -1)
    views = dict(a, q_nope=q[..., :512], q_rope=q[..., 512:])
    assert not views["q_nope"].flags.c_contiguous
    assert np.array_equal(dsops.sparse_flash_attention_v32(**views)["out"].view(np.uint16),
                          dsops.sparse_flash_attention_v32(**a)["out"].view(np.uint16))


def test_sfa_error_names_field_and_writes_nothing():
    a = sfa_case(5, True)
    out = np.full(a["q_nope"].shape, 7, BF16)
    bad = dict(a, block_table=np.where(a["block_table"] >= 0, 10 ** 6, -1).astype(np.int32), out=out)
    with pytest.raises(dsops.IndexError, match="block_table"):
        dsops.sparse_flash_attention_v32(**bad)
    assert np.all(f32(out) == 7)
    with pytest.raises(dsops.DtypeError):
        dsops.sparse_flash_attention_v32(**dict(a, q_nope=f32(a["q_nope"])))
    with pytest.raises(TypeError, match="no argument"):
        dsops.sparse_flash_attention_v32(**dict(a, qnope=a["q_nope"]))


def test_threads_give_the_same_bytes():
    a = sfa_case(6, True)
    one = dsops.sparse_flash_attention_v32(threads=1, **a)["out"].view(np.uint16)
    two = dsops.sparse_flash_attention_v32(threads=2, **a)["out"].view(np.uint16)
    assert np.array_equal(one, two)


def test_sfa_poisoned_rows_are_nan_not_empty():
    """§2.10 A3: NaN or +Inf in a query makes that row NaN (out and lse) instead of the empty-row marker; a token
    without keys keeps out +0, lse +Inf whatever its query holds; NaN in cache rows no used entry addresses
    changes nothing, and every other row keeps its bytes."""
    a = sfa_case(7, False)
    a["topk_indices"][2] = -1  # token 2 (sequence 1) has no used entry
    base = dsops.sparse_flash_attention_v32(**a)
    q = a["q_nope"].copy()
    q[0, 0, 3], q[0, 1, 5], q[2, :, 0] = np.nan, np.inf, np.nan
    NB, BS = a["key_rope"].shape[:2]
    used = np.zeros(NB * BS, bool)
    for b, (t0, t1) in enumerate(zip(a["cu_seqlens_q"][:-1], a["cu_seqlens_q"][1:])):
        ids = a["topk_indices"][t0:t1].ravel()
        ids = ids[(ids >= 0) & (ids < a["seqused_kv"][b])]
        used[a["block_table"][b, ids // BS] * BS + ids % BS] = True
    kn, kr = a["key_nope"].copy(), a["key_rope"].copy()
    kn.reshape(NB * BS, -1)[~used] = np.nan
    kr.reshape(NB * BS, -1)[~used] = np.inf
    r = dsops.sparse_flash_attention_v32(**dict(a, q_nope=q, key_nope=kn, key_rope=kr))
    out, lse = f32(r["out"]), r["lse"]
    assert np.isnan(out[0, :2]).all() and np.isnan(lse[0, :2]).all()
    assert (r["out"][2].view(np.uint16) == 0).all() and np.all(lse[2] == np.inf)
    keep = r["out"].view(np.uint16).copy(), base["out"].view(np.uint16)
    assert np.array_equal(keep[0][0, 2:], keep[1][0, 2:]) and np.array_equal(keep[0][1], keep[1][1])
    assert np.array_equal(lse[0, 2:], base["lse"][0, 2:]) and np.array_equal(lse[1], base["lse"][1])


# ---- lightning_indexer --------------------------------------------------------------------------------------

def li_case(seed, int8, kv=(300, 41), T_per=(2, 1), NI=8, DI=64, BS=16):
    r = rng(seed)
    B = len(kv)
    MB = max((k + BS - 1) // BS for k in kv)
    NB = B * MB
    a = dict(block_table=r.permutation(NB).reshape(B, MB).astype(np.int32),
             cu_seqlens_q=np.concatenate([[0], np.cumsum(T_per)]).astype(np.int32),
             seqused_kv=np.array(kv, np.int32))
    T = sum(T_per)
    if int8:
        a.update(q_idx=r.integers(-127, 128, (T, NI, DI), dtype=np.int8),
                 q_idx_scale=r.uniform(0.01, 0.1, (T, NI)).astype(np.float16),
                 weights=r.standard_normal((T, NI)).astype(np.float16),
                 key_cache=r.integers(-127, 128, (NB, BS, DI), dtype=np.int8),
                 key_scale_cache=r.uniform(0.001, 0.01, (NB, BS)).astype(np.float16))
    else:
        a.update(q_idx=bf(r.standard_normal((T, NI, DI))), weights=bf(r.standard_normal((T, NI))),
                 key_cache=bf(r.standard_normal((NB, BS, DI))))
    return a


def np_li_scores(a, t, b, n):
    """The index score of every visible key of token t (§3.6), vectorised over keys and heads."""
    NB, BS, DI = a["key_cache"].shape
    j = np.arange(n)
    rows = a["block_table"][b, j // BS] * BS + j % BS
    keys = a["key_cache"].reshape(NB * BS, DI)[rows]
    if a["q_idx"].dtype == np.int8:
        dots = a["q_idx"][t].astype(np.int64) @ keys.astype(np.int64).T           # exact
        d = (np.maximum(dots, 0).astype(np.float32) * np.float32(2 ** -11)).astype(np.float16).astype(np.float32)
        ws = (a["q_idx_scale"][t].astype(np.float32) * a["weights"][t].astype(np.float32)).astype(np.float16)
        return (ws.astype(np.float32) @ d) * a["key_scale_cache"].reshape(-1)[rows].astype(np.float32)
    dots = f32(a["q_idx"][t]) @ f32(keys).T
    return f32(a["weights"][t]) @ np.maximum(dots, 0)


@pytest.mark.parametrize("int8", [True, False])
def test_lightning_indexer(int8):
    K = 32
    a = li_case(7, int8)
    r = dsops.lightning_indexer(topk=K, **a)
    idx, sc = r["topk_indices"], r["topk_scores"]
    assert idx.shape == (3, K) and sc.dtype == np.float32
    cu, used = a["cu_seqlens_q"], a["seqused_kv"]
    for b in range(len(used)):
        for t in range(cu[b], cu[b + 1]):
            n = used[b] - (cu[b + 1] - 1 - t)
            ref = np_li_scores(a, t, b, n)
            k = min(n, K)
            assert np.all(idx[t, k:] == -1) and np.all(np.isneginf(sc[t, k:]))
            want = np.sort(ref)[::-1][:k]
            got = ref[idx[t, :k]]                       # the reference's scores of dsops's choice
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(sc[t, :k], got, rtol=1e-5, atol=1e-6)
            assert len(set(idx[t, :k].tolist())) == k


# ---- in-place caches ----------------------------------------------------------------------------------------

def test_cache_store_updates_in_place():
    r = rng(8)
    cache = bf(np.zeros((4, 8, 64)))
    src = bf(r.standard_normal((3, 64)))
    slots = np.array([5, -1, 30], np.int64)
    before = cache.copy()
    res = dsops.cache_store(src=src, cache_index=slots, cache=cache)
    assert res["cache"] is cache
    flat = cache.reshape(-1, 64)
    assert np.array_equal(flat[5].view(np.uint16), src[0].view(np.uint16))
    assert np.array_equal(flat[30].view(np.uint16), src[2].view(np.uint16))
    untouched = np.ones(32, bool)
    untouched[[5, 30]] = False
    assert np.array_equal(flat[untouched].view(np.uint16), before.reshape(-1, 64)[untouched].view(np.uint16))


def test_in_out_views_are_never_copied():
    base = bf(np.zeros((8, 8, 64)))
    cache = base[::2]                                     # every other block: a strided view, written in place
    dsops.cache_store(src=bf(np.ones((1, 64))), cache_index=np.array([11], np.int64), cache=cache)
    assert f32(base[2, 3]).min() == 1.0 and f32(base).sum() == 64
    with pytest.raises(dsops.ShapeError, match="element strides"):  # a reversed view would need a copy
        dsops.cache_store(src=bf(np.ones((1, 64))), cache_index=np.array([3], np.int64), cache=base[::-1])


# ---- the same bytes through Python and through `dsops run` --------------------------------------------------

def write_safetensors(path, tensors, meta):
    tags = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32", np.dtype(np.int8): "I8", BF16: "BF16",
            np.dtype(np.float16): "F16", np.dtype(np.int64): "I64"}
    header, blobs, off = {"__metadata__": meta}, [], 0
    for k, v in tensors.items():
        v = np.ascontiguousarray(v)
        header[k] = {"dtype": tags[v.dtype], "shape": list(v.shape), "data_offsets": [off, off + v.nbytes]}
        blobs.append(v.tobytes())
        off += v.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_tensor(path, name):
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    h = json.loads(blob[8:8 + n])[name]
    b, e = h["data_offsets"]
    return blob[8 + n + b:8 + n + e]


def tool():
    path = os.environ.get("DSOPS_TOOL", os.path.join(REPO, "build", "tools", "dsops"))
    return path if os.path.exists(path) else None


@pytest.mark.skipif(tool() is None, reason="no dsops tool built (set DSOPS_TOOL)")
def test_same_bytes_as_dsops_run():
    a = sfa_case(9, True)
    with tempfile.TemporaryDirectory() as d:
        write_safetensors(os.path.join(d, "in.safetensors"), a, {})
        subprocess.run([tool(), "run", "sparse_flash_attention_v32", "--in", os.path.join(d, "in.safetensors"),
                        "--out", os.path.join(d, "out.safetensors")], check=True)
        want = read_tensor(os.path.join(d, "out.safetensors"), "out")
    assert dsops.sparse_flash_attention_v32(**a)["out"].tobytes() == want


# ---- torch --------------------------------------------------------------------------------------------------

def test_torch_tensors_zero_copy():
    torch = pytest.importorskip("torch")
    a = sfa_case(10, True)
    want = dsops.sparse_flash_attention_v32(**a)["out"].view(np.uint16)
    ta = {k: (torch.from_numpy(v.view(np.int16).copy()).view(torch.bfloat16) if v.dtype == BF16
              else torch.from_numpy(v.copy())) for k, v in a.items()}
    out = dsops.sparse_flash_attention_v32(**ta)["out"]
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    assert np.array_equal(out.view(torch.int16).numpy().view(np.uint16), want)


# ---- prepared weights, helpers ------------------------------------------------------------------------------

def hc_pre_case(seed, T=5, HC=4, H=64):
    r = rng(seed)
    M = (2 + HC) * HC
    return dict(x=bf(r.standard_normal((T, HC, H))), hc_fn=(r.standard_normal((M, HC * H)) * 0.05).astype(np.float32),
                hc_scale=np.array([0.5, 0.5, 0.5], np.float32), hc_base=(r.standard_normal(M) * 0.1).astype(np.float32))


def test_prepared_weights_give_the_same_bytes():
    a = hc_pre_case(11)
    p = dsops.hc_pre.prepare(**a)
    assert isinstance(p, dsops.Prepared)
    plain, prepared = dsops.hc_pre(**a), dsops.hc_pre(prepared=p, **a)
    for k in plain:
        assert np.array_equal(np.asarray(plain[k]).view(np.uint8), np.asarray(prepared[k]).view(np.uint8)), k
    other = dict(a, hc_fn=a["hc_fn"].copy())                # the same values in another array: not what was packed
    with pytest.raises(dsops.Error):
        dsops.hc_pre(prepared=p, **other)
    with pytest.raises(dsops.ParamError, match="prepare"):
        dsops.hc_pre(prepared=dsops.mla_prolog_v4.prepare, **a)
    with pytest.raises(TypeError, match="no weights"):
        dsops.rmsnorm.prepare(x=bf(np.ones((1, 8))))


def test_hadamard_matrix():
    for d in (1, 2, 128):
        m = dsops.hadamard_matrix(d)
        i = np.arange(d)
        sign = np.vectorize(lambda v: bin(v).count("1") % 2)(i[:, None] & i[None, :])
        assert np.array_equal(m, np.where(sign == 1, -1, 1).astype(np.float32) * np.float32(1 / np.sqrt(d)))
    assert dsops.hadamard_matrix(64, BF16).dtype == BF16
    with pytest.raises(dsops.ShapeError):
        dsops.hadamard_matrix(12)


def test_outputs_whose_elements_overlap_are_refused():
    """V9 within one output: a stride 0 on a written dimension (or interleaved dimensions) would make the result
    depend on the thread that writes last; the call is refused and writes nothing."""
    from numpy.lib.stride_tricks import as_strided
    x = bf(rng(12).standard_normal((3, 64)))
    buf = np.zeros(64, BF16)
    y = as_strided(buf, shape=(3, 64), strides=(0, 2))          # three rows on one row of memory
    with pytest.raises(dsops.AliasError, match="y"):
        dsops.rmsnorm(x=x, weight=bf(np.ones(64)), y=y)
    assert np.all(f32(buf) == 0)
    a = sfa_case(13, True)
    T, N, Dc = a["q_nope"].shape
    out = as_strided(np.zeros(T * Dc, BF16), shape=(T, N, Dc), strides=(Dc * 2, 0, 2))
    with pytest.raises(dsops.AliasError, match="out"):
        dsops.sparse_flash_attention_v32(out=out, **a)
