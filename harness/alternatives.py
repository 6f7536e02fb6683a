"""What a user without dsops would write for two operators, in vectorised NumPy (whose matmul is the BLAS sgemm
PyPI's NumPy ships, OpenBLAS) or PyTorch eager: `dsops bench` runs it on the same inputs and thread count as
the operator, times it and checks its output against the operator's.

  sparse_flash_attention_v32: per token, gather the selected cache rows through the block table, dequantise
      them (int8 key_nope times its per-128 scale, rounded to bf16), S = scale Q K^T in fp32, softmax, P rounded
      to bf16, O = P V.
  lightning_indexer: per token, gather the visible keys, S = Q K^T in fp32, the weighted ReLU summed over heads
      (int8: the operator's fp16 roundings and the key scale), the K largest by a partial selection and a sort.

usage: alternatives.py {numpy|torch} {sparse_flash_attention_v32|lightning_indexer} IN OUT [--threads N]
                       [--budget SECONDS]
IN holds the operator's inputs under the names `dsops run` uses (scalars in the metadata); OUT receives `out`
[T, N, Dc] fp32 (attention) or `topk_scores` [T, K] fp32, decreasing, -inf past the visible keys (indexer).
Prints one line: median_s=<seconds> runs=<count> version=<library version>."""
import json
import os
import struct
import sys
import time

ARGS = sys.argv[1:]
if len(ARGS) < 4 or ARGS[0] not in ("numpy", "torch"):
    sys.exit(__doc__)
LIB, OP, IN, OUT = ARGS[:4]
OPTS = dict(zip(ARGS[4::2], ARGS[5::2]))
THREADS = int(OPTS.get("--threads", "1"))
BUDGET = float(OPTS.get("--budget", "1"))
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(THREADS)  # before NumPy loads its BLAS

import numpy as np  # noqa: E402

DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "I8": np.int8, "U8": np.uint8,
          "I32": np.int32, "I64": np.int64}


def load(path):
    """The tensors of a safetensors file (bf16 as raw uint16) and its metadata."""
    with open(path, "rb") as f:
        blob = f.read()
    size = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + size])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        dt = np.dtype(DTYPES[h["dtype"]])
        tensors[name] = np.frombuffer(blob, dt, (end - begin) // dt.itemsize, 8 + size + begin).reshape(h["shape"])
    return tensors, meta


def save(path, name, array):
    array = np.ascontiguousarray(array, np.float32)
    header = json.dumps({name: {"dtype": "F32", "shape": list(array.shape), "data_offsets": [0, array.nbytes]}})
    header += " " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header.encode() + array.tobytes())


def widen(bits):
    """bf16 bits (uint16) to float32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def bf16_round(x):
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def tokens(x):
    """Per query token: (token, sequence, visible length L)."""
    cu, used = x["cu_seqlens_q"], x["seqused_kv"]
    for b in range(len(used)):
        for t in range(cu[b], cu[b + 1]):
            yield t, b, int(used[b]) - (int(cu[b + 1]) - 1 - t)


def sfa_rows(x, t, b, L, BS):
    """The cache rows token t attends: the first min(K, L, topk_length) entries that name a stored token."""
    idx = x["topk_indices"][t]
    lim = min(len(idx), max(L, 0))
    if "topk_length" in x:
        lim = min(lim, int(x["topk_length"][t]))
    idx = idx[:lim]
    idx = idx[(idx >= 0) & (idx < x["seqused_kv"][b])]
    return x["block_table"][b, idx // BS] * BS + idx % BS


def li_rows(x, b, n, BS):
    j = np.arange(n)
    return x["block_table"][b, j // BS] * BS + j % BS


# ---- NumPy ---------------------------------------------------------------------------------------------------

def numpy_sfa(x, meta):
    T, N, Dc = x["q_nope"].shape
    NB, BS, _ = x["key_nope"].shape
    scale = np.float32(meta["softmax_scale"])
    kn_all, kr_all = x["key_nope"].reshape(NB * BS, Dc), x["key_rope"].reshape(NB * BS, -1)
    int8 = kn_all.dtype == np.int8
    if int8:
        ks_all = x["key_nope_scale"].reshape(NB * BS, -1)

    def run():
        q = np.concatenate([widen(x["q_nope"]), widen(x["q_rope"])], -1)       # [T, N, D]
        out = np.zeros((T, N, Dc), np.float32)
        for t, b, L in tokens(x):
            rows = sfa_rows(x, t, b, L, BS)
            if len(rows) == 0:
                continue
            if int8:
                g = ks_all.shape[1]
                kn = bf16_round((kn_all[rows].astype(np.float32).reshape(-1, g, Dc // g)
                                 * ks_all[rows][:, :, None]).reshape(-1, Dc))
            else:
                kn = widen(kn_all[rows])
            k = np.concatenate([kn, widen(kr_all[rows])], -1)                  # [n, D]
            s = (q[t] @ k.T) * scale                                           # [N, n]
            s -= s.max(-1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(-1, keepdims=True)
            out[t] = bf16_round(p) @ kn                                        # [N, Dc]
        return out
    return run, "out"


def numpy_li(x, meta):
    T, NI, DI = x["q_idx"].shape
    NB, BS, _ = x["key_cache"].shape
    K, ratio = int(meta["topk"]), int(meta.get("cmp_ratio", "1"))
    keys = x["key_cache"].reshape(NB * BS, DI)
    int8 = keys.dtype == np.int8
    if int8:
        ws = (x["q_idx_scale"].astype(np.float32) * x["weights"].astype(np.float32)).astype(np.float16)
        ws = ws.astype(np.float32)                                             # [T, NI]
        kscale = x["key_scale_cache"].reshape(NB * BS)

    def run():
        top = np.full((T, K), -np.inf, np.float32)
        q = x["q_idx"].astype(np.float32) if int8 else widen(x["q_idx"])      # [T, NI, DI]
        w = ws if int8 else widen(x["weights"])
        for t, b, L in tokens(x):
            n = max(L, 0) // ratio
            if n == 0:
                continue
            rows = li_rows(x, b, n, BS)
            k = keys[rows].astype(np.float32) if int8 else widen(keys[rows])    # [n, DI]
            s = np.maximum(q[t] @ k.T, 0)                                      # [NI, n]
            if int8:
                s = (s * np.float32(2.0 ** -11)).astype(np.float16).astype(np.float32)
                score = (w[t] @ s) * kscale[rows].astype(np.float32)
            else:
                score = w[t] @ s
            kk = min(n, K)
            sel = np.argpartition(-score, kk - 1)[:kk]
            top[t, :kk] = np.sort(score[sel])[::-1]
        return top
    return run, "topk_scores"


# ---- PyTorch eager --------------------------------------------------------------------------------------------

def torch_sfa(x, meta):
    import torch
    T, N, Dc = x["q_nope"].shape
    NB, BS, _ = x["key_nope"].shape
    scale = float(meta["softmax_scale"])
    as_bf16 = lambda a: torch.from_numpy(a.astype(np.int16)).view(torch.bfloat16)  # noqa: E731
    qn, qr = as_bf16(x["q_nope"]), as_bf16(x["q_rope"])
    kr_all = as_bf16(x["key_rope"].reshape(NB * BS, -1))
    int8 = x["key_nope"].dtype == np.int8
    if int8:
        kn_all = torch.from_numpy(x["key_nope"].reshape(NB * BS, Dc).copy())
        ks_all = torch.from_numpy(x["key_nope_scale"].reshape(NB * BS, -1).copy())
    else:
        kn_all = as_bf16(x["key_nope"].reshape(NB * BS, Dc))
    rows_of = {t: torch.from_numpy(sfa_rows(x, t, b, L, BS).astype(np.int64)) for t, b, L in tokens(x)}

    def run():
        q = torch.cat([qn, qr], -1).float()                                    # [T, N, D]
        out = torch.zeros(T, N, Dc)
        for t, rows in rows_of.items():
            if len(rows) == 0:
                continue
            if int8:
                g = ks_all.shape[1]
                kn = (kn_all[rows].float().reshape(-1, g, Dc // g) * ks_all[rows][:, :, None]).reshape(-1, Dc)
                kn = kn.bfloat16()
            else:
                kn = kn_all[rows]
            k = torch.cat([kn, kr_all[rows]], -1).float()                     # [n, D]
            p = torch.softmax((q[t] @ k.T) * scale, -1)                       # [N, n]
            out[t] = p.bfloat16().float() @ kn.float()                        # [N, Dc]
        return out.numpy()
    return run, "out"


def torch_li(x, meta):
    import torch
    T, NI, DI = x["q_idx"].shape
    NB, BS, _ = x["key_cache"].shape
    K, ratio = int(meta["topk"]), int(meta.get("cmp_ratio", "1"))
    int8 = x["key_cache"].dtype == np.int8
    keys = torch.from_numpy(x["key_cache"].reshape(NB * BS, DI).astype(np.int8 if int8 else np.int16))
    if int8:
        w = torch.from_numpy(x["q_idx_scale"].astype(np.float32)) * torch.from_numpy(x["weights"].astype(np.float32))
        w = w.half().float()
        q = torch.from_numpy(x["q_idx"].copy()).float()
        kscale = torch.from_numpy(x["key_scale_cache"].reshape(NB * BS).astype(np.float32))
    else:
        keys = keys.view(torch.bfloat16)
        q = torch.from_numpy(x["q_idx"].astype(np.int16)).view(torch.bfloat16).float()
        w = torch.from_numpy(x["weights"].astype(np.int16)).view(torch.bfloat16).float()
    rows_of = {t: (b, torch.from_numpy(li_rows(x, b, max(L, 0) // ratio, BS).astype(np.int64)))
               for t, b, L in tokens(x)}

    def run():
        top = torch.full((T, K), -float("inf"))
        for t, (b, rows) in rows_of.items():
            n = len(rows)
            if n == 0:
                continue
            s = torch.relu(q[t] @ keys[rows].float().T)                        # [NI, n]
            if int8:
                score = (w[t] @ (s * 2.0 ** -11).half().float()) * kscale[rows]
            else:
                score = w[t] @ s
            top[t, :min(n, K)] = torch.topk(score, min(n, K)).values
        return top.numpy()
    return run, "topk_scores"


def main():
    x, meta = load(IN)
    if LIB == "torch":
        import torch
        torch.set_num_threads(THREADS)
        version = "torch " + torch.__version__
    else:
        version = "numpy " + np.__version__
    make = {("numpy", "sparse_flash_attention_v32"): numpy_sfa, ("numpy", "lightning_indexer"): numpy_li,
            ("torch", "sparse_flash_attention_v32"): torch_sfa, ("torch", "lightning_indexer"): torch_li}
    if (LIB, OP) not in make:
        sys.exit(f"alternatives.py: no {LIB} version of {OP}")
    run, name = make[(LIB, OP)](x, meta)
    result = run()  # warm-up, and the output checked against the operator's
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < BUDGET and len(times) < 50):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    save(OUT, name, result)
    times.sort()
    print(f"median_s={times[len(times) // 2]:.6g} runs={len(times)} version={version}")


main()
