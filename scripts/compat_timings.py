#!/usr/bin/env python3
"""Times the vendor test files' cases through dsops.compat.cann (the table of docs/ASCEND.md): the median of five
calls after one warm-up, on the threads DSOPS_NUM_THREADS allows, with the vendor's data recipes; the V4 PyPTO
operators at the shapes of the vendor's timing table (docs/CASES.md, "Vendor timings": B 64, S1 2, S2 8192), with
its µs beside them. Prints a Markdown table. Usage: PYTHONPATH=python DSOPS_LIBRARY=build/libdsops.so python3 scripts/compat_timings.py"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests"))
import test_compat_cann as t  # noqa: E402  (the vendor data recipes of the tests)
import test_compat_cann_v4_attn as ta  # noqa: E402
import test_compat_cann_v4_cmp as tc  # noqa: E402
import test_compat_cann_v4_prolog as tp  # noqa: E402
from dsops.compat import cann  # noqa: E402


def median_ms(call, runs=5):
    call()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def cases():
    rng = np.random.default_rng(0)
    B, S1, N1, D = 4, 1, 64, 128
    q = rng.standard_normal((B, S1, N1, D)).astype(t.BF16)
    w = rng.standard_normal((B, S1, N1)).astype(t.BF16)
    key, table, _ = t.paged_keys(rng, [65536] * 4, 128, D)
    yield ("npu_lightning_indexer_pto", "b 4, s1 1, 64K keys", None,
           lambda: cann.npu_lightning_indexer_pto(q, key, w, actual_seq_lengths_key=np.full(4, 65536, np.int32),
                                                  block_table=table))
    d = t.prolog_data(rng, B=4, S1=2, S2=64 * 1024)
    yield ("npu_lightning_indexer_prolog_pto", "b 4, s1 2, H 7168, ND weights", None, lambda: t.call_prolog(d, False))
    for name, b, s1, lens in (("sfa_bf16_b4_s2_seq64K_total_int8_d", 4, 2, [65536, 16381, 666, 15]),
                              ("sfa_bf16_b4_s2_seq64K_per_int8_d", 4, 2, [65536] * 4),
                              ("sfa_bf16_b1_s256_seq2047_int8_p", 1, 256, [2047])):
        s = t.sfa_data(rng, b, 128, s1, lens, True)
        out = np.zeros((b, s1, 128, 512), t.BF16)
        args = (s["q"][..., :512].reshape(-1, 512), s["q"][..., 512:].reshape(-1, 64), s["kn"], s["kr"], s["scales"],
                s["lists"], s["table"], s["lens"], out, 128, 1, 576 ** -0.5, 2048, 128, s["table"].shape[1])
        yield "sparse_flash_attention_quant", name, None, lambda a=args: cann.sparse_flash_attention_quant_d(*a)
    for T, vendor in ((128, 60.0), (192, None)):
        x = rng.uniform(0, 2, (T, 4, 4096)).astype(t.BF16)
        fn = rng.uniform(0, 2, (24, 4 * 4096)).astype(np.float32)
        sc, base = rng.uniform(0, 2, 3).astype(np.float32), rng.uniform(0, 2, 24).astype(np.float32)
        yield "npu_hc_pre", f"T {T}, d 4096", vendor, lambda x=x, fn=fn, sc=sc, base=base: cann.npu_hc_pre(x, fn, sc, base)
    for T, vendor in ((128, 13.85), (4096, 319.86)):
        x = rng.uniform(-1, 1, (T, 4096)).astype(t.BF16)
        res = rng.uniform(-1, 1, (T, 4, 4096)).astype(t.BF16)
        post, comb = rng.uniform(0, 2, (T, 4)).astype(np.float32), rng.uniform(0, 1, (T, 4, 4)).astype(np.float32)
        yield ("npu_hc_post", f"T {T}, d 4096", vendor,
               lambda x=x, res=res, post=post, comb=comb: cann.npu_hc_post(x, res, post, comb))
    b, s1, s2 = 24, 4, 512
    for mode, ratio in ((0, 1), (3, 4)):
        kq = rng.uniform(-128, 127, (b, s1, 64, 128)).astype(np.int8)
        kk = rng.uniform(-128, 127, (b * 4, 128, 1, 128)).astype(np.int8)
        ks = rng.uniform(0, 10, (b * 4, 128, 1)).astype(np.float16)
        qs = rng.uniform(0, 10, (b, s1, 64)).astype(np.float16)
        ww = rng.uniform(0, 0.01, (b, s1, 64)).astype(np.float16)
        tb = np.arange(b * 4, dtype=np.int32).reshape(b, 4)
        yield ("npu_quant_lightning_indexer", f"the documentation's example, sparse_mode {mode}, ratio {ratio}", None,
               lambda kq=kq, kk=kk, ks=ks, qs=qs, ww=ww, tb=tb, mode=mode, ratio=ratio: cann.npu_quant_lightning_indexer(
                   kq, kk, ww, qs, ks, actual_seq_lengths_key=np.full(b, s2 * ratio, np.int32), block_table=tb,
                   sparse_count=512, sparse_mode=mode, cmp_ratio=ratio))
    c = t.compressor_case(rng, 1, [1], [8191], 512, 1, 128)
    yield ("compressor", "the documentation's example: c128a, one token at 8191", None,
           lambda: cann.compressor(c["x2"], c["wkv"], c["wgate"], c["state"], c["ape"], c["weight"], c["sin"],
                                   c["cos"], 64, 128, state_block_table=c["table"], cu_seqlens=c["starts"],
                                   start_pos=c["pos"], rotary_mode=2))
    dd = t.dia_data(rng)
    yield ("npu_sparse_attention_pto", "reduced layer (H 256, 4 heads), 2500 + 300 cached tokens", None,
           lambda: cann.npu_sparse_attention_pto(
               dd["x"], dd["w_dq"], dd["w_uq_qr"], dd["w_uk"], dd["w_dkv_kr"], dd["gamma_cq"], dd["gamma_ckv"],
               dd["sin"], dd["cos"], dd["cache_index"], dd["kv_cache"], dd["kr_cache"], dd["table"], dd["act_seqs"],
               dd["w_idx_qb"], dd["w_idx_k"], dd["w_idx_proj"], dd["gamma_k"], dd["beta_k"], dd["index_k_cache"]))

    yield from v4_cases(rng)


def v4_cases(rng):
    """The V4 PyPTO operators at the vendor's timed shapes (64 sequences of 2 tokens, 8K cached), its µs."""
    x, fn, scale, base = tp.hc_data(rng, 128)
    yield "hc_pre_pypto", "T 128, h 4096", 70, lambda: cann.hc_pre_pypto(x, fn, scale, base)
    d = tp.mla_data(128, True, **tp.FLASH)
    p = cann.mla_prolog_quant_pypto.prepare(*(d[k] for k in ("x", "wq_a", "wq_b", "wkv", "cos", "sin", "gamma_cq",
                                                             "gamma_ckv", "wq_b_scale")))
    yield ("mla_prolog_quant_pypto", "T 128, int8 wq_b, prepared", 130,
           lambda: cann.mla_prolog_quant_pypto(*(d[k] for k in ("x", "wq_a", "wq_b", "wkv", "cos", "sin", "gamma_cq",
                                                                "gamma_ckv", "wq_b_scale")), prepared=p))
    dp = tc.prolog_case(rng, 128)
    args = [dp[k] for k in tc.PROLOG_ARGS]
    pp = cann.quant_lightning_indexer_prolog.prepare(*args)
    yield ("quant_lightning_indexer_prolog", "T 128, prepared", 101,
           lambda: cann.quant_lightning_indexer_prolog(*args, prepared=pp))
    for name, R, D, rotate, start, vendor in (("c4li", 4, 128, True, 8192, 55), ("c4a", 4, 512, False, 8192, 80),
                                             ("c128a", 128, 512, False, 8192, 55), ("c4li", 4, 128, True, 8191, 75),
                                             ("c4a", 4, 512, False, 8191, 95), ("c128a", 128, 512, False, 8191, 125)):
        dc = tc.compressor_case(rng, 64, 2, D, R, rotate, [start] * 64)
        cargs = [dc[k] for k in tc.ARGS]
        pc = cann.compressor_pypto.prepare(*cargs)
        yield ("compressor_pypto", f"{name}, start_pos {start}, prepared", vendor,
               lambda a=cargs, pc=pc: cann.compressor_pypto(*a, prepared=pc))
    c = ta.swa_case(1, [2] * 64, [8192] * 64)
    yield "npu_sliding_window_attention", "b 64, s1 2, 8192 tokens", 65, lambda: ta.call_swa(c)
    cf = ta.cfa_case(4, 64, 2, [8192] * 64)
    yield "npu_compress_flash_attention", "b 64, s1 2, 8192 tokens, ratio 128", 90, lambda: ta.call_cfa(cf)
    cs = ta.scfa_case(7, [2 * i for i in range(65)], [8192] * 64)
    yield ("npu_sparse_compress_flash_attention", "b 64, s1 2, 8192 tokens, ratio 4, K 512", 160,
           lambda: cann.npu_sparse_compress_flash_attention(*ta.scfa_args(cs)))


def main():
    print("| vendor op | case | ms (median of 5) | vendor µs |")
    print("|---|---|---|---|")
    for op, case, vendor, call in cases():
        print(f"| `{op}` | {case} | {median_ms(call):.2f} | {'' if vendor is None else vendor} |", flush=True)


if __name__ == "__main__":
    main()
