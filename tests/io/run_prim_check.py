#!/usr/bin/env python3
"""End-to-end check of `dsops run` for the shared primitives against numpy reimplementations of the spec.

    dsops run rmsnorm      --in IN --out OUT [--set eps=...]
    dsops run quant_q8     --in IN --out OUT [--set group=G]
    dsops run rope_tables  --in IN --out OUT [--set preset=...] [--set dtype=bf16]
    dsops run rope_apply   --in IN --out OUT --set rope_mode=... --set rope_inverse=... --set rope_offset=...
    dsops run cache_store  --in IN --out OUT [--set group=G]

numpy evaluates docs/OPERATORS.md sections 2.3, 2.5, 2.7 and 2.8 independently (fp32 arithmetic where the spec
says fp32, fp64 cos / sin of the fp32 angle). Tolerances are the spec's: rmsnorm 1e-4 / 2^-7 / 0.005;
quant_q8 and cache_store q 1 / 0 / 0, scales 2.5e-5 / 0.005 / 0; rope_apply exact for bf16 tables;
rope_tables atol 2e-7 (fp32). The edge groups of quant_q8 (all zero, amax whose 127 / amax overflows,
NaN / Inf) are checked exactly, cache rows that no token addresses must come back bit-identical, the
oracle (`dsops_ref_run`) must agree too, thread counts must give identical bytes, and a duplicate slot
must fail with DSOPS_ERR_INDEX without creating OUT.

usage: run_prim_check.py --tool PATH/dsops --ref PATH/dsops_ref_run [--workdir DIR] [--keep] [--verbose]
Prints "N passed, N failed" last and exits non-zero on failure.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runcheck  # noqa: E402
from runcheck import (bf16_from_f32, compare_close, f32_from_bf16, np_q8, np_rmsnorm, np_rope_apply,  # noqa: E402
                      bad_calls, ref_run, same_across_threads, set_args, tool_run, write_and_run, write_safetensors)

RMS_TOL = (1e-4, 2.0 ** -7, 0.005)
Q_TOL = (1, 0, 0)
SCALE_TOL = (2.5e-5, 0.005, 0)

# ---- numpy reimplementations of the spec ------------------------------------------------------------


def np_rope_freqs(base, yarn, factor, orig, beta_fast, beta_slow):
    theta = np.float32(base)
    e = (np.arange(32, dtype=np.float32) * np.float32(2)) / np.float32(64)
    pw = np.array([np.float32(float(theta) ** float(x)) for x in e], dtype=np.float32)  # theta^(2j/64), fp32
    freq = (np.float32(1) / pw).astype(np.float32)
    if yarn:
        import math

        def corr(r):
            return 64 * math.log(orig / (2 * math.pi * r)) / (2 * math.log(base))

        lo = max(math.floor(corr(beta_fast)), 0)
        hi = min(math.ceil(corr(beta_slow)), 63)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(32) - lo) / (hi - lo), 0, 1).astype(np.float32)
        f = np.float32(factor)
        freq = (freq * (np.float32(1) - ramp) + (freq / f) * ramp).astype(np.float32)
    return freq


def np_rope_tables(pos, freq, layout):
    """-> fp64 cos, sin [T, 64] of the fp32 angles. (python/tests/test_v32_prims.py has its own copy: the
    package's tests and these checks do not import one another.)"""
    ang = (pos.astype(np.float32)[:, None] * freq[None, :]).astype(np.float32).astype(np.float64)
    c, s = np.cos(ang), np.sin(ang)
    if layout == "pairs":
        return np.repeat(c, 2, axis=1), np.repeat(s, 2, axis=1)
    return np.concatenate([c, c], axis=1), np.concatenate([s, s], axis=1)


# ---- checks --------------------------------------------------------------------------------------------


def check_rmsnorm(chk, args, work, rng):
    for name, T, W, wdt, eps in (("rms_bf16w", 5, 7168, "BF16", None), ("rms_f32w", 9, 512, "F32", 1e-5),
                                 ("rms_noweight", 3, 130, None, 0.0)):
        x = bf16_from_f32((rng.standard_normal((T, W)) * rng.uniform(0.01, 50, (T, 1))).astype(np.float32))
        tensors = {"x": ("BF16", x)}
        w = None
        if wdt == "BF16":
            wb = bf16_from_f32(rng.uniform(0.5, 1.5, W).astype(np.float32))
            tensors["weight"] = ("BF16", wb)
            w = f32_from_bf16(wb)
        elif wdt == "F32":
            w = rng.uniform(0.5, 1.5, W).astype(np.float32)
            tensors["weight"] = w
        sets = [] if eps is None else ["eps=%r" % eps]
        inp, t = write_and_run(chk, args, work, name, "rmsnorm", tensors, sets)
        if t is None:
            continue
        chk.check(t["y"][0] == "BF16" and t["y"][1].shape == (T, W), name + ": y is [T, W] BF16")
        want = np_rmsnorm(f32_from_bf16(x), w, 1e-6 if eps is None else eps)
        ok, text = compare_close(f32_from_bf16(t["y"][1]), f32_from_bf16(want), *RMS_TOL)
        chk.check(ok, name + ": y vs numpy", text)
        r, _ = ref_run(chk, args, name, "rmsnorm", inp, os.path.join(work, name + ".ref.safetensors"), sets)
        if r is not None:
            ok, text = compare_close(f32_from_bf16(t["y"][1]), f32_from_bf16(r["y"][1]), *RMS_TOL)
            chk.check(ok, name + ": y vs oracle", text)
        same_across_threads(chk, args, name, "rmsnorm", inp, work, sets, ["y"])


def q8_rows(rng, R, W, G):
    x = (rng.standard_normal((R, W)) * 10.0 ** rng.uniform(-6, 6, (R, 1))).astype(np.float32)
    edges = []
    if W // G >= 1 and R >= 6:
        x[0, :G] = 0.0                                   # prim_q8_zero_group
        x[1, :G] = np.float32(1e-38) * np.sign(rng.standard_normal(G)).astype(np.float32)  # prim_q8_tiny_amax
        x[2, :G] = rng.standard_normal(G)
        x[2, G // 2] = np.nan                            # prim_q8_nonfinite
        x[3, :G] = rng.standard_normal(G)
        x[3, 0] = -np.inf
        x[4, :G] = 0.0
        x[4, 0] = 127.0                                  # ties: sq = 1
        if G >= 8:
            x[4, 1:8] = [2.5, 3.5, -2.5, 0.5, -0.5, 1.5, -1.5]
        edges = [(0, 0, "zero"), (1, 0, "zero"), (2, 0, "nan"), (3, 0, "nan")]
    return x, edges


def check_quant(chk, args, work, rng):
    for name, R, W, G, dt in (("q8_f32", 8, 512, 128, "F32"), ("q8_bf16", 7, 96, 32, "BF16"),
                              ("q8_rowgroup", 6, 64, None, "F32"), ("q8_g3", 6, 12, 3, "F32")):
        x, edges = q8_rows(rng, R, W, G or W)
        if dt == "BF16":
            xb = bf16_from_f32(x)
            tensors = {"x": ("BF16", xb)}
            xv = f32_from_bf16(xb)
        else:
            tensors = {"x": x}
            xv = x
        sets = [] if G is None else ["group=%d" % G]
        Gv = G or W
        inp, t = write_and_run(chk, args, work, name, "quant_q8", tensors, sets)
        if t is None:
            continue
        q, s = t["q"][1], t["scale"][1]
        chk.check(t["q"][0] == "I8" and q.shape == (R, W) and t["scale"][0] == "F32" and s.shape == (R, W // Gv),
                  name + ": q [R, W] I8 and scale [R, W/G] F32")
        wq, ws = np_q8(xv, Gv)
        ok, text = compare_close(q.astype(np.float32), wq.astype(np.float32), *Q_TOL)
        chk.check(ok, name + ": q vs numpy", text)
        ok, text = compare_close(s, ws, *SCALE_TOL)
        chk.check(ok, name + ": scale vs numpy", text)
        for r, g, kind in edges:
            qq, ss = q[r, g * Gv:(g + 1) * Gv], s[r, g]
            if kind == "zero":
                chk.check(np.all(qq == 0) and ss == 0, "%s: row %d group %d (zero / tiny amax): q = 0, scale 0" %
                          (name, r, g), "scale %r" % ss)
            else:
                chk.check(np.all(qq == 0) and np.isnan(ss), "%s: row %d group %d (non-finite): q = 0, scale NaN" %
                          (name, r, g), "scale %r" % ss)
        if Gv >= 8 and R >= 6:
            chk.check(list(q[4, :8]) == [127, 2, 4, -2, 0, 0, 2, -2], name + ": rint ties to even", str(q[4, :8]))
        r, _ = ref_run(chk, args, name, "quant_q8", inp, os.path.join(work, name + ".ref.safetensors"), sets)
        if r is not None:
            chk.check(r["q"][1].tobytes() == q.tobytes() and
                      np.array_equal(r["scale"][1], s, equal_nan=True), name + ": identical to the oracle")
        same_across_threads(chk, args, name, "quant_q8", inp, work, sets, ["q", "scale"])


def check_rope(chk, args, work, rng):
    # rope_tables: presets and a plain table, fp32 against fp64 of the fp32 angle
    pos = np.concatenate([[0, 1, 4095, 4096, 65536, 2 ** 24 + 1, 2 ** 31 - 1],
                          rng.integers(0, 1 << 20, 25)]).astype(np.int64)
    inp = os.path.join(work, "rt.in.safetensors")
    write_safetensors(inp, {"positions": pos})
    for preset, yarn, base, fct, orig, layout in (("v32", True, 10000.0, 40.0, 4096.0, "halves"),
                                                  ("v4_flash", True, 160000.0, 16.0, 65536.0, "pairs")):
        name = "rope_tables_" + preset
        t, _ = tool_run(chk, args, name, "rope_tables", inp, os.path.join(work, name + ".out.safetensors"),
                        ["preset=" + preset])
        if t is None:
            continue
        freq = np_rope_freqs(base, yarn, fct, orig, 32.0, 1.0)
        c, s = np_rope_tables(pos, freq, layout)
        ok1, text1 = compare_close(t["cos"][1], c, 2e-7, 0, 0)
        ok2, text2 = compare_close(t["sin"][1], s, 2e-7, 0, 0)
        chk.check(ok1 and ok2, name + ": fp32 tables within 2e-7 of numpy fp64", text1 + "; " + text2)
        tb, _ = tool_run(chk, args, name + "_bf16", "rope_tables", inp,
                         os.path.join(work, name + ".bf16.safetensors"), ["preset=" + preset, "dtype=bf16"])
        if tb is not None:
            same = (tb["cos"][1] == bf16_from_f32(t["cos"][1])).all() and (tb["sin"][1] == bf16_from_f32(t["sin"][1])).all()
            chk.check(tb["cos"][0] == "BF16" and same, name + ": bf16 tables are the fp32 tables rounded")

    # rope_apply with random bf16 tables: exact against numpy
    T, N, W = 4, 3, 576
    x = bf16_from_f32(rng.standard_normal((T, N, W)).astype(np.float32))
    cb = bf16_from_f32(rng.uniform(-1, 1, (T, 64)).astype(np.float32))
    sb = bf16_from_f32(rng.uniform(-1, 1, (T, 64)).astype(np.float32))
    inp = os.path.join(work, "ra.in.safetensors")
    write_safetensors(inp, {"x": ("BF16", x), "rope_cos": ("BF16", cb), "rope_sin": ("BF16", sb)})
    for mode, inverse, offset in (("interleaved", True, 448), ("half", False, 0), ("interleaved_in_half_out", False, 512)):
        name = "rope_apply_%s_%d" % (mode, offset)
        sets = ["rope_mode=" + mode, "rope_inverse=" + ("true" if inverse else "false"), "rope_offset=%d" % offset]
        t, _ = tool_run(chk, args, name, "rope_apply", inp, os.path.join(work, name + ".out.safetensors"), sets)
        if t is None:
            continue
        want = np_rope_apply(f32_from_bf16(x), f32_from_bf16(cb), f32_from_bf16(sb), offset, mode, inverse)
        chk.check(t["y"][1].tobytes() == want.tobytes(), name + ": y bit-exact against numpy")


def check_cache_store(chk, args, work, rng):
    for name, W, G, cdt, sdt in (("cs_int8_fp16", 128, None, "I8", "F16"), ("cs_int8_grouped", 512, 128, "I8", "F32"),
                                 ("cs_bf16", 96, None, "BF16", None)):
        T, NB, BS = 10, 3, 8
        src = bf16_from_f32(rng.standard_normal((T, W)).astype(np.float32))
        idx = rng.permutation(NB * BS)[:T].astype(np.int64)
        idx[[2, 7]] = [-1, -5]  # padding tokens
        Gv = G or W
        if cdt == "I8":
            cache = rng.integers(-128, 128, (NB, BS, W)).astype(np.int8)
            shape = (NB, BS) if G is None else (NB, BS, W // Gv)
            scale = rng.standard_normal(shape).astype(np.float16 if sdt == "F16" else np.float32)
            tensors = {"src": ("BF16", src), "cache_index": idx, "cache": cache, "cache_scale": scale}
        else:
            cache = rng.integers(0, 1 << 16, (NB, BS, W)).astype(np.uint16)
            tensors = {"src": ("BF16", src), "cache_index": idx, "cache": ("BF16", cache)}
        sets = [] if G is None else ["group=%d" % G]
        inp, t = write_and_run(chk, args, work, name, "cache_store", tensors, sets)
        if t is None:
            continue
        oc = t["cache"][1].reshape(NB * BS, W)
        before = cache.reshape(NB * BS, W)
        used = idx[idx >= 0]
        untouched = np.setdiff1d(np.arange(NB * BS), used)
        chk.check(oc[untouched].tobytes() == before[untouched].tobytes(), name + ": rows not addressed are unchanged")
        rows = idx >= 0
        if cdt == "BF16":
            chk.check(oc[idx[rows]].tobytes() == src[rows].tobytes(), name + ": bf16 rows are exact copies")
        else:
            wq, ws = np_q8(f32_from_bf16(src[rows]), Gv)
            ok, text = compare_close(oc[idx[rows]].astype(np.float32), wq.astype(np.float32), *Q_TOL)
            chk.check(ok, name + ": int8 rows vs numpy", text)
            osc = t["cache_scale"][1].reshape(NB * BS, -1)
            bsc = scale.reshape(NB * BS, -1)
            if sdt == "F16":
                ws = ws.astype(np.float16)
            ok, text = compare_close(osc[idx[rows]].astype(np.float32), ws.reshape(len(wq), -1).astype(np.float32),
                                     *SCALE_TOL)
            chk.check(ok, name + ": scales vs numpy", text)
            chk.check(osc[untouched].tobytes() == bsc[untouched].tobytes(), name + ": scales not addressed unchanged")
        r, _ = ref_run(chk, args, name, "cache_store", inp, os.path.join(work, name + ".ref.safetensors"), sets)
        if r is not None:
            chk.check(all(r[n][1].tobytes() == t[n][1].tobytes() for n in t), name + ": identical to the oracle")
        # a duplicate slot: DSOPS_ERR_INDEX, OUT not created
        bad = dict(tensors)
        dup = idx.copy()
        dup[9] = dup[0]
        bad["cache_index"] = dup
        binp = os.path.join(work, name + ".dup.safetensors")
        write_safetensors(binp, bad)
        bad_calls(chk, args, work, [(name + ": duplicate slot", ["cache_store", "--in", binp] + set_args(sets),
                                     "DSOPS_ERR_INDEX", "repeats")], exit_code=1)


def checks(chk, args, work, rng):
    check_rmsnorm(chk, args, work, rng)
    check_quant(chk, args, work, rng)
    check_rope(chk, args, work, rng)
    check_cache_store(chk, args, work, rng)


if __name__ == "__main__":
    sys.exit(runcheck.main(__doc__, "prim", 2023, checks))
