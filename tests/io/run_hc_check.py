#!/usr/bin/env python3
"""End-to-end check of `dsops run` for hc_pre and hc_post against the oracle (`dsops_ref_run`).

    dsops run hc_pre  --in IN --out OUT [--set sinkhorn_iters=N] [--set norm_eps=E] [--set hc_eps=E]
                      [--set preset=v4_flash|v4_pro]
    dsops run hc_post --in IN --out OUT

The same IN goes to both programs; their outputs are compared with the tolerances of docs/OPERATORS.md 3.1 and
3.2 (hc_pre y 1e-4 / 2^-7 / 0.005, post / pre / comb 2.5e-5 / 0.005 / 0.005 on well-conditioned data;
hc_post bf16 1e-4 / 2^-7 / 0, fp32 1e-4 / 1e-5 / 0). OUT must hold every output (pre included) with the
right shape and dtype and the parameters in its metadata; --threads 1 and 3 must give identical bytes;
preset v32 and sinkhorn_iters=0 must fail with DSOPS_ERR_PARAM without creating OUT.

usage: run_hc_check.py --tool PATH/dsops --ref PATH/dsops_ref_run [--workdir DIR] [--keep] [--verbose]
Prints "N passed, N failed" last and exits non-zero on failure.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runcheck  # noqa: E402
from runcheck import (bad_calls, bf16_from_f32, compare_close, read_safetensors, ref_run,  # noqa: E402
                      same_across_threads, set_args, tool_run, values, write_safetensors)

Y_TOL = (1e-4, 2.0 ** -7, 0.005)
GATE_TOL = (2.5e-5, 0.005, 0.005)
POST_TOL = {"BF16": (1e-4, 2.0 ** -7, 0), "F32": (1e-4, 1e-5, 0)}


def check_hc_pre(chk, args, work, rng):
    cases = [
        # name, T, HC, H, --set values
        ("pre_flash", 16, 4, 256, []),
        ("pre_pro_iters1", 5, 4, 128, ["preset=v4_pro", "sinkhorn_iters=1"]),
        ("pre_hc3_eps", 7, 3, 64, ["norm_eps=1e-5", "hc_eps=0.001", "sinkhorn_iters=7"]),
    ]
    for name, T, HC, H, sets in cases:
        M = (2 + HC) * HC
        x = bf16_from_f32(rng.uniform(0, 2, (T, HC, H)).astype(np.float32))
        tensors = {
            "x": ("BF16", x),
            "hc_fn": rng.uniform(0, 1.0 / (4 * H), (M, HC * H)).astype(np.float32),
            "hc_scale": rng.uniform(0, 2, 3).astype(np.float32),
            "hc_base": rng.uniform(0, 2, M).astype(np.float32),
        }
        inp = os.path.join(work, name + ".in.safetensors")
        write_safetensors(inp, tensors)
        t, _ = tool_run(chk, args, name, "hc_pre", inp, os.path.join(work, name + ".out.safetensors"), sets)
        r, _ = ref_run(chk, args, name, "hc_pre", inp, os.path.join(work, name + ".ref.safetensors"), sets)
        if t is None or r is None:
            continue
        want = {"y": ("BF16", (T, H)), "post": ("F32", (T, HC)), "comb": ("F32", (T, HC, HC)), "pre": ("F32", (T, HC))}
        chk.check(all(n in t and t[n][0] == d and tuple(t[n][1].shape) == s for n, (d, s) in want.items()),
                  name + ": OUT holds y, post, comb, pre with their dtypes and shapes",
                  str({n: (v[0], v[1].shape) for n, v in t.items()}))
        for n, tol in (("y", Y_TOL), ("post", GATE_TOL), ("pre", GATE_TOL), ("comb", GATE_TOL)):
            if n in t and n in r:
                ok, text = compare_close(values(*t[n]), values(*r[n]), *tol)
                chk.check(ok, "%s: %s vs the oracle" % (name, n), text)
        meta = read_safetensors(os.path.join(work, name + ".out.safetensors"))[1]
        iters = [s.split("=")[1] for s in sets if s.startswith("sinkhorn_iters=")]
        chk.check(meta.get("sinkhorn_iters") == (iters[0] if iters else "20"), name + ": metadata sinkhorn_iters",
                  str(meta))
        same_across_threads(chk, args, name, "hc_pre", inp, work, sets, ["y", "post", "comb", "pre"])
    # errors: v32 has no hc_pre; sinkhorn_iters = 0
    bad_calls(chk, args, work, [("hc_pre " + label, ["hc_pre", "--in", inp] + set_args(sets), "DSOPS_ERR_PARAM")
                                for label, sets in (("preset v32", ["preset=v32"]),
                                                    ("sinkhorn_iters=0", ["sinkhorn_iters=0"]))], exit_code=1)


def check_hc_post(chk, args, work, rng):
    cases = [
        # name, T, HC, H, dtype of x / residual, dtype of post / comb
        ("post_bf16", 16, 4, 256, "BF16", "BF16"),
        ("post_bf16_f32", 9, 4, 128, "BF16", "F32"),
        ("post_f32", 6, 3, 64, "F32", "F32"),
        ("post_f32_bf16", 4, 2, 96, "F32", "BF16"),
    ]
    for name, T, HC, H, xdt, gdt in cases:
        def make(shape, dt):
            v = rng.uniform(-10, 10, shape).astype(np.float32)
            return ("BF16", bf16_from_f32(v)) if dt == "BF16" else v

        tensors = {"x": make((T, H), xdt), "residual": make((T, HC, H), xdt), "post": make((T, HC), gdt),
                   "comb": make((T, HC, HC), gdt)}
        inp = os.path.join(work, name + ".in.safetensors")
        write_safetensors(inp, tensors)
        t, _ = tool_run(chk, args, name, "hc_post", inp, os.path.join(work, name + ".out.safetensors"))
        r, _ = ref_run(chk, args, name, "hc_post", inp, os.path.join(work, name + ".ref.safetensors"))
        if t is None or r is None:
            continue
        chk.check("out" in t and t["out"][0] == xdt and tuple(t["out"][1].shape) == (T, HC, H),
                  name + ": OUT holds out [T, HC, H] with the dtype of x")
        ok, text = compare_close(values(*t["out"]), values(*r["out"]), *POST_TOL[xdt])
        chk.check(ok, name + ": out vs the oracle", text)
        same_across_threads(chk, args, name, "hc_post", inp, work, [], ["out"])
    # an error: residual of another dtype than x
    bad = {"x": np.zeros((2, 8), np.float32), "residual": ("BF16", np.zeros((2, 4, 8), np.uint16)),
           "post": np.zeros((2, 4), np.float32), "comb": np.zeros((2, 4, 4), np.float32)}
    binp = os.path.join(work, "post_bad.in.safetensors")
    write_safetensors(binp, bad)
    bad_calls(chk, args, work, [("hc_post with x fp32, residual bf16", ["hc_post", "--in", binp], "DSOPS_ERR_DTYPE")],
              exit_code=1)


def checks(chk, args, work, rng):
    check_hc_pre(chk, args, work, rng)
    check_hc_post(chk, args, work, rng)


if __name__ == "__main__":
    sys.exit(runcheck.main(__doc__, "hc", 2024, checks))
