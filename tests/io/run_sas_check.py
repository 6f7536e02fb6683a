#!/usr/bin/env python3
"""End-to-end check of `dsops run sas` (and its variant names swa, cfa, scfa) against the reference oracle.

    dsops run swa|cfa|scfa --in IN --out OUT [--set win_size=... cmp_ratio=... p_mode=... p_tile=...]
    dsops run sas          --in IN --out OUT [--set variant=swa|cfa|scfa] [--set cmp_mode=...] ...

Small random problems (a few tokens, N 2 - 4, D 128 or 192, several sequences with odd pool block sizes
and permuted block tables whose unneeded columns hold -1 or junk, NaN in every pool row no token reads)
cover each variant: windows shorter and longer than the context and no window at all, dense compressed
entries with the cfa defaults and with a small ratio, sparse indices with -1, negative, out-of-range and
duplicate values and junk beyond the count, cmp_topk_length, sinks absent, finite and +-Inf, lonely tokens
(L <= 0, or nothing to attend). The variant comes from the operator name, from --set variant, from
cmp_mode or from the tensors present; OUT's metadata must record the parameters it resolves to. The
oracle (`dsops_ref_run`) is checked against an independent numpy evaluation of docs/OPERATORS.md 3.7 and 2.10,
and `dsops run` against the oracle with the spec's tolerances per p_mode (out: normalised and fp32
1e-4 / 2^-7 / 0.005, tiled 5e-4 / 5e-4 / 0.005; lse 1e-6 / 8.01/65536 / 0.005; lonely rows exactly out 0,
lse +Inf). --threads 1 and 3 must give identical bytes. One malformed call per variant (and two for the
tool's own variant handling) must exit 1 with the status and a message naming the field, without creating
or touching OUT.

usage: run_sas_check.py --tool PATH/dsops --ref PATH/dsops_ref_run [--workdir DIR] [--keep] [--verbose]
Prints "N passed, N failed" last and exits non-zero on failure.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runcheck  # noqa: E402
from runcheck import (both_accept, BF16_NAN, THREADS, bad_calls, bf16_from_f32, compare_close, f32_from_bf16,  # noqa: E402
                      help_lists, params_of, ref_run, round_bf16, tool_runs, write_safetensors)

TOL_OUT = (1e-4, 2.0 ** -7, 0.005)      # normalised, fp32
TOL_OUT_TILED = (5e-4, 5e-4, 0.005)
TOL_LSE = (1e-6, 8.01 / 65536, 0.005)
V4_SCALE = 512 ** -0.5

# The parameters each variant resolves to when nothing overrides them (spec 3.7).
VARIANT_DEFAULTS = {
    "swa": dict(win_size=128, cmp_mode="none", p_mode="normalised"),
    "cfa": dict(win_size=128, cmp_mode="dense", cmp_ratio=128, p_mode="tiled", p_tile=128),
    "scfa": dict(win_size=128, cmp_mode="sparse", cmp_ratio=4, p_mode="normalised"),
}

# name, op (entry name), sets, meta (IN's __metadata__), variant it must resolve to, sequences (S, seqused),
# N, D, BSW / BSC (pool block sizes), K (sparse), topk_length, sinks (None, "finite", "inf": with +-Inf)
CASES = [
    dict(name="swa_short_window", op="swa", sets=["win_size=6"], variant="swa", S=[3, 2], seqused=[40, 1],
         N=3, D=128, BSW=5, sinks="finite"),
    dict(name="swa_via_variant", op="sas", sets=["variant=swa"], variant="swa", S=[2, 1, 1],
         seqused=[20, 9, 133], N=2, D=192, BSW=7, sinks=None),
    dict(name="cfa_defaults", op="cfa", sets=[], variant="cfa", S=[2, 1], seqused=[300, 129], N=2, D=128,
         BSW=9, BSC=3, sinks="finite"),
    dict(name="cfa_inferred_small_ratio", op="sas", sets=["cmp_ratio=4", "win_size=5"], meta={"p_tile": "3"},
         variant="cfa", S=[3, 2], seqused=[37, 2], N=4, D=192, BSW=5, BSC=3, sinks="inf"),
    dict(name="cfa_nowin_normalised", op="cfa",
         sets=["cmp_ratio=3", "win_size=0", "p_mode=normalised", "softmax_scale=0.07"], variant="cfa",
         S=[2, 2], seqused=[14, 2], N=2, D=128, BSC=5, sinks=None),
    dict(name="scfa_defaults", op="scfa", sets=[], variant="scfa", S=[2, 2], seqused=[50, 3], N=3, D=128,
         BSW=5, BSC=3, K=8, topk_length=False, sinks=None),
    dict(name="scfa_cmp_mode_fp32", op="sas", sets=["cmp_mode=sparse", "win_size=4", "p_mode=fp32"],
         variant="scfa", S=[3, 1], seqused=[61, 17], N=2, D=192, BSW=7, BSC=5, K=12, topk_length=True,
         sinks="finite"),
    dict(name="scfa_inferred_nowin_tiled", op="sas", sets=["win_size=0", "p_mode=tiled", "p_tile=2"],
         variant="scfa", S=[2, 2], seqused=[30, 5], N=4, D=128, BSC=3, K=6, topk_length=False, sinks="inf",
         all_skipped=True),
]


def expected_params(c):
    """The parameter values OUT's metadata must record."""
    e = dict(VARIANT_DEFAULTS[c["variant"]], variant=c["variant"])
    e.update(c.get("meta", {}))
    e.update(s.split("=", 1) for s in c["sets"])  # --set wins over metadata
    return {k: str(v) for k, v in e.items()}


# ---- problems -------------------------------------------------------------------------------------


def pool(rng, need, seqused, BS, D, junk):
    """A paged pool holding the rows of the needed logical positions (need[b]: set of positions of sequence
    b). Returns (bits [NB, BS, D] with NaN in every row nobody needs, block_table [B, MB], values
    [NB*BS, D] float32, slot function). Columns of unneeded blocks hold -1 or junk (never read)."""
    B = len(need)
    blocks = [sorted({p // BS for p in need[b]}) for b in range(B)]
    MB = max(1, max((max(s, 1) + BS - 1) // BS for s in seqused) + 1)
    for b in range(B):
        MB = max(MB, (max(need[b]) // BS + 1) if need[b] else 1)
    NB = sum(len(x) for x in blocks) + 2
    perm = rng.permutation(NB)
    bt = np.full((B, MB), -1, dtype=np.int32)
    if junk:
        bt[:, :] = np.where(rng.random((B, MB)) < 0.5, -1, rng.integers(NB, 1 << 20, size=(B, MB)))
    k = 0
    for b in range(B):
        for j in blocks[b]:
            bt[b, j] = perm[k]
            k += 1
    bits = bf16_from_f32(rng.uniform(-1, 1, (NB * BS, D)).astype(np.float32))
    used = np.zeros(NB * BS, dtype=bool)

    def slot(b, p):
        return int(bt[b, p // BS]) * BS + p % BS

    for b in range(B):
        for p in need[b]:
            used[slot(b, p)] = True
    bits[~used] = BF16_NAN
    return bits.reshape(NB, BS, D), bt, f32_from_bf16(bits), slot


def build(rng, c):
    """-> (tensors, info). info holds per token the window rows and compressed rows in list order."""
    S, seqused, N, D = c["S"], c["seqused"], c["N"], c["D"]
    prm = expected_params(c)
    win = int(prm["win_size"])
    mode = prm["cmp_mode"]
    ratio = int(prm.get("cmp_ratio", "1"))
    B, T = len(S), sum(S)
    cu = np.zeros(B + 1, dtype=np.int32)
    cu[1:] = np.cumsum(S)
    toks = []  # (b, t, L)
    for b in range(B):
        for i in range(S[b]):
            toks.append((b, int(cu[b]) + i, seqused[b] - (S[b] - 1 - i)))

    t = {"q": ("BF16", bf16_from_f32((2.0 * rng.standard_normal((T, N, D))).astype(np.float32))),
         "cu_seqlens_q": cu, "seqused_kv": np.array(seqused, dtype=np.int32)}

    # window positions
    win_pos = [[] for _ in range(T)]
    for b, tt, L in toks:
        w = min(max(L, 0), win)
        win_pos[tt] = list(range(L - w, L))

    # compressed entries
    cmp_idx = [[] for _ in range(T)]
    if mode == "dense":
        for b, tt, L in toks:
            cmp_idx[tt] = list(range(max(L, 0) // ratio))
    elif mode == "sparse":
        K = c["K"]
        ind = np.zeros((T, K), dtype=np.int32)
        tl = np.zeros(T, dtype=np.int32)
        for b, tt, L in toks:
            NC = seqused[b] // ratio
            for j in range(K):
                r = rng.random()
                if r < 0.66 and NC > 0:
                    ind[tt, j] = rng.integers(0, NC)
                elif r < 0.76:
                    ind[tt, j] = -1
                elif r < 0.84:
                    ind[tt, j] = NC + int(rng.integers(0, 3))  # just out of range
                elif r < 0.88:
                    ind[tt, j] = 1 << 30
                elif r < 0.92:
                    ind[tt, j] = -7
                elif j > 0:
                    ind[tt, j] = ind[tt, j - 1]  # duplicates are used as often as they occur
                else:
                    ind[tt, j] = -1
            tl[tt] = rng.integers(0, K + 1)
            cnt = min(K, max(L, 0) // ratio)
            if c.get("topk_length"):
                cnt = min(cnt, int(tl[tt]))
            if c.get("all_skipped") and tt == 0 and cnt > 0:
                ind[tt, :cnt] = -1  # nothing valid: with no window this token is lonely
            cmp_idx[tt] = [int(x) for x in ind[tt, :cnt] if 0 <= x < NC]
        t["cmp_indices"] = ind
        if c.get("topk_length"):
            t["cmp_topk_length"] = tl

    if win > 0:
        need = [set() for _ in range(B)]
        for b, tt, L in toks:
            need[b].update(win_pos[tt])
        bits, bt, ori_vals, ori_slot = pool(rng, need, seqused, c["BSW"], D, junk=True)
        t["ori_kv"] = ("BF16", bits)
        t["ori_block_table"] = bt
    if mode != "none":
        need = [set() for _ in range(B)]
        for b, tt, L in toks:
            need[b].update(cmp_idx[tt])
        NCmax = [max(s // ratio, 1) for s in seqused]
        bits, bt, cmp_vals, cmp_slot = pool(rng, need, NCmax, c["BSC"], D, junk=True)
        t["cmp_kv"] = ("BF16", bits)
        t["cmp_block_table"] = bt
    if c.get("sinks"):
        s = rng.standard_normal(N).astype(np.float32)
        if c["sinks"] == "inf":
            s[0], s[-1] = np.inf, -np.inf
        t["sinks"] = s

    keys, nwin = [], []
    for b, tt, L in toks:
        rows = [ori_vals[ori_slot(b, p)] for p in win_pos[tt]]
        rows += [cmp_vals[cmp_slot(b, i)] for i in cmp_idx[tt]]
        keys.append(np.array(rows, dtype=np.float32).reshape(len(rows), D))
        nwin.append(len(win_pos[tt]))
    info = dict(T=T, N=N, D=D, keys=keys, nwin=nwin, lonely=[tt for tt in range(T) if len(keys[tt]) == 0],
                q=f32_from_bf16(t["q"][1]), sinks=t.get("sinks"), params=prm)
    return t, info


def numpy_sas(info):
    """Independent evaluation of spec 3.7 / 2.10: fp64 dot products rounded to fp32, fp32 softmax,
    bf16 rounding at the points of the chosen p_mode."""
    T, N, D, prm = info["T"], info["N"], info["D"], info["params"]
    scale = np.float32(float(prm.get("softmax_scale", V4_SCALE)))
    p_mode, tile = prm["p_mode"], int(prm.get("p_tile", "1"))
    out = np.zeros((T, N, D), dtype=np.float32)
    lse = np.full((T, N), np.inf, dtype=np.float32)
    top = np.full((T, N), -np.inf, dtype=np.float32)  # max_logits: the largest score of the row
    sinks = info["sinks"]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for t in range(T):
            K = info["keys"][t]
            if len(K) == 0:
                continue
            K64 = K.astype(np.float64)
            s = (info["q"][t].astype(np.float64) @ K64.T).astype(np.float32) * scale  # [N, n]
            top[t] = s.max(axis=1)
            if p_mode == "tiled":
                nw = info["nwin"][t]
                bounds = ([0, nw] if nw else [0]) + list(range(nw + tile, len(K), tile)) + [len(K)]
                bounds = sorted(set(bounds))
                m = l = O = None
                for a, e in zip(bounds[:-1], bounds[1:]):
                    mi = s[:, a:e].max(axis=1)
                    if m is None:
                        m, alpha = mi, None
                    else:
                        mn = np.maximum(m, mi)
                        alpha = np.exp((m - mn).astype(np.float32))
                        m = mn
                    w = np.exp((s[:, a:e] - m[:, None]).astype(np.float32))
                    pv = (round_bf16(w).astype(np.float64) @ K64[a:e]).astype(np.float32)
                    lw = w.astype(np.float64).sum(axis=1).astype(np.float32)
                    if alpha is None:
                        l, O = lw, pv
                    else:
                        l = (l * alpha + lw).astype(np.float32)
                        O = (O * alpha[:, None] + pv).astype(np.float32)
                den = l + (np.exp((sinks - m).astype(np.float32)) if sinks is not None else 0)
                out[t] = round_bf16((O / den[:, None]).astype(np.float32))
            else:
                m = s.max(axis=1)
                w = np.exp((s - m[:, None]).astype(np.float32))
                l = w.astype(np.float64).sum(axis=1).astype(np.float32)
                den = l + (np.exp((sinks - m).astype(np.float32)) if sinks is not None else 0)
                P = (w / den[:, None]).astype(np.float32)
                if p_mode == "normalised":
                    P = round_bf16(P)
                out[t] = round_bf16((P.astype(np.float64) @ K64).astype(np.float32))
            lse[t] = (m + np.log(l)).astype(np.float32)
    return out, lse, top


# ---- checks ---------------------------------------------------------------------------------------


def check_case(chk, args, work, rng, c):
    t, info = build(rng, c)
    name = c["name"]
    inp = os.path.join(work, name + ".in.safetensors")
    write_safetensors(inp, t, c.get("meta"))
    tol = TOL_OUT_TILED if info["params"]["p_mode"] == "tiled" else TOL_OUT
    T, N, D, lon = info["T"], info["N"], info["D"], info["lonely"]

    ref, rmeta = ref_run(chk, args, name, c["op"], inp, os.path.join(work, name + ".ref.safetensors"), c["sets"])
    if ref is None:
        return
    chk.check(sorted(ref) == ["lse", "max_logits", "out"] and ref["out"][0] == "BF16"
              and ref["out"][1].shape == (T, N, D) and all(ref[k][0] == "F32" and ref[k][1].shape == (T, N)
                                                             for k in ("lse", "max_logits")),
              name + ": OUT holds out [T, N, D] BF16, lse and max_logits [T, N] F32",
              str({k: (v[0], v[1].shape) for k, v in ref.items()}))
    want = {k: v for k, v in info["params"].items() if k != "softmax_scale"}
    scale = float(info["params"].get("softmax_scale", V4_SCALE))
    ok = {k: rmeta.get(k) for k in want} == want and abs(float(rmeta.get("softmax_scale", "nan")) - scale) < 1e-7
    chk.check(ok, name + ": metadata records the resolved variant and parameters",
              "(%s vs %s)" % (params_of(rmeta), info["params"]))
    rout, rlse = f32_from_bf16(ref["out"][1]), ref["lse"][1]

    # the oracle against numpy
    nout, nlse, ntop = numpy_sas(info)
    ok, text = compare_close(rout, nout, *tol)
    chk.check(ok, name + ": oracle out vs numpy", text)
    ok, text = compare_close(rlse, nlse, *TOL_LSE)
    chk.check(ok, name + ": oracle lse vs numpy", text)
    ok, text = compare_close(ref["max_logits"][1], ntop, *TOL_LSE)
    chk.check(ok, name + ": oracle max_logits vs numpy (-Inf for tokens without keys)", text)
    chk.check(np.all(rout[lon] == 0) and np.all(np.isposinf(rlse[lon])),
              name + ": oracle lonely tokens %s give out = 0, lse = +Inf" % lon)
    if c.get("sinks") == "inf":
        live = [tt for tt in range(T) if tt not in lon]
        chk.check(np.all(rout[live, 0] == 0), name + ": a +Inf sink gives out = 0 for its head")

    def compare(label, extra, got, meta):
        if not chk.check(sorted(got) == sorted(ref) and all(got[k][1].shape == ref[k][1].shape for k in got),
                         label + ": OUT holds the oracle's tensors"):
            return False
        out, lse = f32_from_bf16(got["out"][1]), got["lse"][1]
        ok, text = compare_close(out, rout, *tol)
        chk.check(ok, label + ": out vs oracle", text)
        ok, text = compare_close(lse, rlse, *TOL_LSE)
        chk.check(ok, label + ": lse vs oracle", text)
        chk.check(np.all(out[lon] == 0) and np.all(np.isposinf(lse[lon])), label + ": lonely tokens exact")
        if extra[1] == "1":
            chk.check(params_of(meta) == params_of(rmeta), label + ": OUT's metadata equals the oracle run's",
                      "(%s vs %s)" % (meta, rmeta))

    tool_runs(chk, args, work, name, c["op"], inp, c["sets"], compare, THREADS)


def check_errors(chk, args, work, rng):
    """Exit 1, 'dsops run: <STATUS>:' and the field's name on stderr; OUT neither created nor touched."""
    ts, _ = build(rng, dict(op="swa", sets=[], variant="swa", S=[2], seqused=[12], N=2, D=128, BSW=5))
    ts["ori_block_table"] = ts["ori_block_table"].copy()
    ts["ori_block_table"][0, 0] = 999  # a block the window of both tokens needs
    tc, _ = build(rng, dict(op="cfa", sets=["cmp_ratio=4"], variant="cfa", S=[2], seqused=[20], N=2, D=128,
                            BSW=5, BSC=3))
    tq, _ = build(rng, dict(op="scfa", sets=[], variant="scfa", S=[2], seqused=[30], N=2, D=128, BSW=5, BSC=3,
                            K=4, topk_length=True))
    tq["cmp_topk_length"] = np.array([0, -1], dtype=np.int32)  # token 0 reads no entry
    td = dict(tc)
    td["cmp_kv"] = ("BF16", np.zeros((2, 3, 64), np.uint16))  # D 64 where q has 128
    files = {}
    for key, t in (("swa", ts), ("cfa", tc), ("scfa", tq), ("dmis", td)):
        files[key] = os.path.join(work, "err_%s.safetensors" % key)
        write_safetensors(files[key], t)
    cases = [
        ("swa: a needed ori_block_table entry outside [0, NB)", ["swa", "--in", files["swa"]], "DSOPS_ERR_INDEX",
         "ori_block_table"),
        ("cfa: cmp_ratio 0", ["cfa", "--in", files["cfa"], "--set", "cmp_ratio=0"], "DSOPS_ERR_PARAM", "cmp_ratio"),
        ("scfa: cmp_topk_length < 0", ["scfa", "--in", files["scfa"]], "DSOPS_ERR_INDEX", "cmp_topk_length"),
        ("sas: cmp_kv with another D", ["sas", "--in", files["dmis"], "--set", "cmp_ratio=4"], "DSOPS_ERR_SHAPE",
         "cmp_kv"),
        ("cfa: --set variant=scfa contradicts the name", ["cfa", "--in", files["cfa"], "--set", "variant=scfa"],
         "DSOPS_ERR_PARAM", "variant"),
        ("sas: unknown cmp_mode", ["sas", "--in", files["cfa"], "--set", "cmp_mode=partial"], "DSOPS_ERR_PARAM",
         "cmp_mode"),
    ]
    bad_calls(chk, args, work, cases, exit_code=1)

    # empty work (T = 0): valid, zero-row outputs
    te = {"q": ("BF16", np.zeros((0, 2, 128), np.uint16)), "cu_seqlens_q": np.zeros(2, np.int32),
          "seqused_kv": np.array([5], np.int32), "ori_kv": ("BF16", np.zeros((1, 8, 128), np.uint16)),
          "ori_block_table": np.zeros((1, 1), np.int32)}
    both_accept(chk, args, work, "empty", "swa with T = 0 gives empty out and lse", "swa", te,
                lambda o, m: o["out"][1].shape == (0, 2, 128) and o["lse"][1].shape == (0, 2))

    help_lists(chk, args, ("\nsas\n", "\nswa\n", "\ncfa\n", "\nscfa\n", "variant", "cmp_mode", "cmp_topk_length"),
               "dsops run --help lists sas, its variant names, tensors and parameters")


if __name__ == "__main__":
    sys.exit(runcheck.main(__doc__, "sas", 3707, runcheck.cases_then_errors(CASES, check_case, check_errors)))
