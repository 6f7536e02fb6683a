"""What the end-to-end checks of `dsops run` (run_*_check.py) share: bf16 bits, safetensors files written
and read by hand, compare_close of docs/OPERATORS.md section 1.8, the numpy pieces of the spec and of the
problems that several checks use, running `dsops run` and the oracle (`dsops_ref_run`), malformed calls, and the command line
and "N passed, N failed" summary of every check.

A check imports what it needs from here and ends with
    sys.exit(runcheck.main(__doc__, "<name>", <default seed>, checks))
where checks(chk, args, work, rng) runs its checks.
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

# ---- bf16 -----------------------------------------------------------------------------------------


def bf16_from_f32(x):
    """float32 array -> uint16 bf16 bits, round to nearest even, NaN -> quiet NaN with its sign."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    r = np.where(nan, ((u >> 16) | 0x40) & 0xFFFF, r)
    return r.astype(np.uint16)


def f32_from_bf16(h):
    return (np.asarray(h, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bf16(x):
    return f32_from_bf16(bf16_from_f32(x))


BF16_NAN = np.uint16(0x7FC0)


def values(tag, arr):
    """Numeric values of a stored tensor (tag, array) as float64."""
    if tag == "BF16":
        return f32_from_bf16(arr).astype(np.float64)
    return arr.astype(np.float64)


def ub(rng, shape, amp=1.0):
    """A bf16 IN entry, uniform in [-amp, amp)."""
    return ("BF16", bf16_from_f32((amp * rng.uniform(-1, 1, shape)).astype(np.float32)))


# ---- safetensors ----------------------------------------------------------------------------------

TAGS = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "I8": np.int8, "U8": np.uint8,
        "I32": np.int32, "I64": np.int64, "F8_E4M3": np.uint8}  # bf16 and e4m3 as their raw bits
DTYPE_TAG = {np.dtype(np.float16): "F16", np.dtype(np.float32): "F32", np.dtype(np.int8): "I8",
             np.dtype(np.uint8): "U8", np.dtype(np.int32): "I32", np.dtype(np.int64): "I64"}


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> ndarray, or name -> ("BF16", uint16 ndarray)."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    pos = 0
    for name, t in tensors.items():
        if isinstance(t, tuple):
            tag, arr = t
        else:
            arr = t
            tag = DTYPE_TAG[arr.dtype]
        arr = np.ascontiguousarray(arr)
        raw = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": tag, "shape": list(arr.shape), "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """-> (name -> (tag, ndarray), metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        arr = np.frombuffer(body[b:end], dtype=np.dtype(TAGS[e["dtype"]]).newbyteorder("<"))
        out[name] = (e["dtype"], arr.reshape(e["shape"]))
    return out, meta


# ---- compare_close (spec 1.8) ---------------------------------------------------------------------


def compare_close(out, ref, atol, rtol, ratio):
    """-> (ok, text)."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        return False, "shape %s != %s" % (out.shape, ref.shape)
    fo, fr = np.isfinite(out), np.isfinite(ref)
    same_kind = (np.isnan(out) & np.isnan(ref)) | (np.isinf(out) & np.isinf(ref) & (np.sign(out) == np.sign(ref)))
    both = fo & fr
    err = np.zeros(out.shape)
    err[both] = np.abs(out[both] - ref[both])
    fail = np.where(both, err > atol + rtol * np.abs(np.where(both, ref, 0.0)), ~same_kind)
    nfail = int(fail.sum())
    allowed = int(np.floor(ratio * out.size + 0.5))
    text = "%d of %d elements beyond tolerance (allowed %d)" % (nfail, out.size, allowed)
    if nfail:
        excess = np.where(both, err - (atol + rtol * np.abs(np.where(both, ref, 0.0))), np.inf)
        w = np.unravel_index(int(np.argmax(excess)), out.shape)
        text += "; worst at %s: out %r ref %r" % (tuple(int(i) for i in w), out[w], ref[w])
    return nfail <= allowed, text


def packed_int8_fields(rows):
    """Rows [n, 656] (uint8) of a packed_int8 cache -> latent [n, 512] int8, rope [n, 64] float32 values of
    bf16, scales [n, 4] float32."""
    return (rows[:, :512].view(np.int8), f32_from_bf16(rows[:, 512:640].copy().view("<u2")),
            rows[:, 640:].copy().view("<f4"))


def compare_outputs(chk, label, got, ref, tols):
    """Every output named in tols (name -> (atol, rtol, ratio)): present in both with one dtype and shape, and
    within the tolerance of the oracle's."""
    for name, tol in tols.items():
        same = name in got and name in ref and got[name][0] == ref[name][0] and got[name][1].shape == ref[name][1].shape
        if not chk.check(same, "%s: OUT holds %s like the oracle's" % (label, name)):
            continue
        ok, text = compare_close(values(*got[name]), values(*ref[name]), *tol)
        chk.check(ok, "%s: %s vs oracle" % (label, name), text)


# ---- numpy pieces of the spec and of the problems, used by several checks -------------------------


def sylvester(d):
    """The normalised Sylvester-Hadamard matrix [d, d] (d a power of two), float32."""
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return (h / np.sqrt(d)).astype(np.float32)


def q8_rows(v, group):
    """Q8 of spec 2.7 per group of the last axis of finite data -> (int8, fp32 scales); builds int8 inputs."""
    shp = v.shape
    g = v.reshape(shp[:-1] + (shp[-1] // group, group)).astype(np.float32)
    amax = np.abs(g).max(axis=-1, keepdims=True)
    sq = np.float32(127.0) / np.where(amax > 0, amax, np.float32(1.0))
    q = np.rint(g * sq).astype(np.int8).reshape(shp)
    return q, (np.float32(1.0) / sq)[..., 0].astype(np.float32)


def wq_b_entries(rng, rows, Q, int8):
    """An MLA prolog's wq_b [rows, Q] as IN entries: bf16 uniform in [-0.1, 0.1), or (int8) its Q8 per row
    with wq_b_scale [rows]."""
    if int8:
        q, s = q8_rows(f32_from_bf16(ub(rng, (rows, Q), 0.1)[1]), Q)
        return {"wq_b": q, "wq_b_scale": s[:, 0].copy()}
    return {"wq_b": ub(rng, (rows, Q), 0.1)}


def latent_caches(layout, lat, rope, NB, BS, nan_rows=()):
    """The MLA latent caches of a kv layout as IN entries, from fp32 latent rows lat [NB*BS, Dc] and bf16
    rope bits [NB*BS, 64]: split_bf16 kv_cache, kr_cache; split_int8 kv_cache, kv_scale_cache (Q8 per 128),
    kr_cache; packed_int8 kv_packed. The rows nan_rows hold NaN (the bf16 latent, or the int8 rows' scales)."""
    rows, Dc = lat.shape
    nan_rows = list(nan_rows)
    if layout == "split_bf16":
        kv = bf16_from_f32(lat)
        kv[nan_rows] = BF16_NAN
        return {"kv_cache": ("BF16", kv.reshape(NB, BS, Dc)), "kr_cache": ("BF16", rope.reshape(NB, BS, 64))}
    q, s = q8_rows(lat, 128)
    s[nan_rows] = np.nan
    if layout == "split_int8":
        return {"kv_cache": q.reshape(NB, BS, Dc), "kv_scale_cache": s.reshape(NB, BS, Dc // 128),
                "kr_cache": ("BF16", rope.reshape(NB, BS, 64))}
    packed = np.concatenate([q.view(np.uint8), rope.astype("<u2").view(np.uint8).reshape(rows, 128),
                             s.astype("<f4").view(np.uint8).reshape(rows, 16)], axis=1)
    return {"kv_packed": packed.reshape(NB, BS, 656)}


def paged_block_table(rng, lengths, BS, spare_columns, spare_blocks, garbage=lambda NB: (-1,)):
    """A block table for sequences of lengths[b] tokens in blocks of BS, over a pool of NB physical blocks
    (those needed plus spare_blocks) in random order -> (block_table int32 [B, max blocks + spare_columns], NB).
    Row b holds its ceil(lengths[b] / BS) blocks, then columns the sequence never needs, which may hold
    anything: they cycle through garbage(NB)."""
    blocks = [(n + BS - 1) // BS for n in lengths]
    B, MB, NB = len(lengths), max(blocks) + spare_columns, sum(blocks) + spare_blocks
    perm = iter(rng.permutation(NB))
    fill = garbage(NB)
    table = np.empty((B, MB), np.int32)
    for b in range(B):
        for c in range(MB):
            table[b, c] = next(perm) if c < blocks[b] else fill[(b + c) % len(fill)]
    return table, NB


def np_rmsnorm(x, w, eps):
    """x [T, W] float32 values of bf16, w [W] float32 or None -> bf16 bits."""
    v = x.astype(np.float64)
    ms = (v * v).sum(axis=1, keepdims=True) / x.shape[1]
    y = (v / np.sqrt(ms + eps)).astype(np.float32)
    if w is not None:
        y = (y * w.astype(np.float32)).astype(np.float32)
    return bf16_from_f32(y)


def np_q8(v, G):
    """v [R, W] float32 -> (q [R, W] int8, scale [R, W/G] float32), spec 2.7 in fp32 with its edge groups."""
    R, W = v.shape
    g = v.reshape(R, W // G, G).astype(np.float32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        finite = np.isfinite(g).all(axis=2)
        amax = np.where(np.isfinite(g), np.abs(g), 0).max(axis=2).astype(np.float32)
        sq = (np.float32(127.0) / amax).astype(np.float32)
        zero = (amax == 0) | np.isinf(sq)
        ok = finite & ~zero
        sq_safe = np.where(ok, sq, np.float32(1)).astype(np.float32)
        q = np.rint((g * sq_safe[:, :, None]).astype(np.float32))  # rint: ties to even
        q = np.where(ok[:, :, None], q, 0).astype(np.int8)
        scale = np.where(ok, (np.float32(1.0) / sq_safe).astype(np.float32), np.float32(0.0)).astype(np.float32)
        scale = np.where(finite, scale, np.float32(np.nan)).astype(np.float32)
    return q.reshape(R, W), scale


def np_rope_apply(x, c, s, offset, mode, inverse):
    """x [T, N, W] float32 (bf16 values), c / s [T, 64] float32 -> bf16 bits of y. (python/tests/numpy_spec.py's
    rot is the same rotation; it imports the Python package, which these checks run without.)"""
    y = x.copy()
    sl = x[:, :, offset:offset + 64]
    c = c[:, None, :].astype(np.float32)
    s = (-s if inverse else s)[:, None, :].astype(np.float32)
    out = np.empty_like(sl)
    j = np.arange(32)
    if mode == "interleaved":
        ia, ib, oa, ob = 2 * j, 2 * j + 1, 2 * j, 2 * j + 1
    elif mode == "half":
        ia, ib, oa, ob = j, j + 32, j, j + 32
    else:
        ia, ib, oa, ob = 2 * j, 2 * j + 1, j, j + 32
    out[..., oa] = (sl[..., ia] * c[..., oa]).astype(np.float32) - (sl[..., ib] * s[..., oa]).astype(np.float32)
    out[..., ob] = (sl[..., ib] * c[..., ob]).astype(np.float32) + (sl[..., ia] * s[..., ob]).astype(np.float32)
    y[:, :, offset:offset + 64] = out.astype(np.float32)
    return bf16_from_f32(y)


# ---- running the programs -------------------------------------------------------------------------


class Checker:
    def __init__(self, verbose):
        self.passed = 0
        self.failed = 0
        self.verbose = verbose
        self.tiers = set()  # the ISA tiers `dsops run` reported in its outputs' metadata

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            if self.verbose:
                print("ok   %s %s" % (what, detail))
        else:
            self.failed += 1
            print("FAIL %s %s" % (what, detail))
        return ok


def run(cmd, verbose):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if verbose:
        print("$ " + " ".join(cmd) + "  -> %d %s" % (r.returncode, r.stderr.strip()))
    return r


def set_args(sets):
    """["name=value", ...] -> ["--set", "name=value", ...]."""
    a = []
    for s in sets:
        a += ["--set", s]
    return a


def param_value(c, name, default):
    """A parameter of a case: its --set (c["sets"]) wins over IN's metadata (c["meta"])."""
    for s in c.get("sets", []):
        if s.startswith(name + "="):
            return s.split("=", 1)[1]
    return c.get("meta", {}).get(name, default)


def params_of(meta):
    """OUT's metadata without what depends on the machine or the run."""
    return {k: v for k, v in meta.items() if k not in ("dsops_version", "isa", "threads")}


def programs(args):
    """(name, command prefix) of `dsops run` and of the oracle: both must treat every call alike."""
    return (("dsops run", [args.tool, "run"]), ("dsops_ref_run", [args.ref]))


def ref_run(chk, args, label, op, inp, out, sets=()):
    """The oracle on IN -> (tensors, metadata) of OUT, or (None, None) (a failed check) when it fails."""
    r = run([args.ref, op, "--in", inp, "--out", out] + set_args(sets), args.verbose)
    if not chk.check(r.returncode == 0, label + ": dsops_ref_run succeeds", r.stderr.strip()):
        return None, None
    return read_safetensors(out)


def tool_run(chk, args, label, op, inp, out, sets=(), extra=()):
    """`dsops run` on IN (extra: more options) -> (tensors, metadata) of OUT, or (None, None) (a failed
    check) when it fails."""
    r = run([args.tool, "run", op, "--in", inp, "--out", out] + set_args(sets) + list(extra), args.verbose)
    if not chk.check(r.returncode == 0, label + ": dsops run succeeds", r.stderr.strip()):
        return None, None
    got, meta = read_safetensors(out)
    if meta and "isa" in meta:
        chk.tiers.add(meta["isa"])
    return got, meta


def write_and_run(chk, args, work, name, op, tensors, sets=()):
    """Writes tensors as IN, <work>/<name>.in.safetensors, and runs `dsops run` on it into
    <work>/<name>.out.safetensors -> (IN's path, tensors of OUT or None when the run failed)."""
    inp = os.path.join(work, name + ".in.safetensors")
    write_safetensors(inp, tensors)
    got, _ = tool_run(chk, args, name, op, inp, os.path.join(work, name + ".out.safetensors"), sets)
    return inp, got


THREADS = (["--threads", "1"], ["--threads", "3"])
THREADS_AND_SCALAR = THREADS + (["--isa", "scalar", "--threads", "2"],)


def tool_runs(chk, args, work, name, op, inp, sets, compare, variants=THREADS_AND_SCALAR):
    """`dsops run` on IN once per variant (a list of extra options), each into a new OUT; compare(label, extra,
    got, meta) checks each OUT that came. The OUTs of the --threads variants must be bitwise identical;
    compare returns False to leave its run out of that."""
    first = None
    out_path = os.path.join(work, name + ".out.safetensors")
    for extra in variants:
        label = "%s [%s]" % (name, " ".join(extra))
        if os.path.exists(out_path):
            os.remove(out_path)
        got, meta = tool_run(chk, args, label, op, inp, out_path, sets, extra)
        if got is None or compare(label, extra, got, meta) is False or extra[0] != "--threads":
            continue
        blob = b"".join(got[n][1].tobytes() for n in sorted(got))
        if first is None:
            first = blob
        else:
            chk.check(first == blob, label + ": bitwise identical to --threads 1")


def run_both(chk, args, work, op, name, t, sets, meta, compare, variants=THREADS_AND_SCALAR):
    """Writes IN (tensors t, metadata meta), runs the oracle on it, then `dsops run` once per variant (see
    tool_runs): each OUT must hold the oracle's tensors, and compare(label, extra, got, meta, ref, rmeta)
    checks the rest. -> (ref, rmeta), the oracle's OUT, or (None, None) when the oracle failed."""
    inp = os.path.join(work, name + ".in.safetensors")
    write_safetensors(inp, t, meta)
    ref, rmeta = ref_run(chk, args, name, op, inp, os.path.join(work, name + ".ref.safetensors"), sets)
    if ref is None:
        return None, None

    def check_run(label, extra, got, meta):
        chk.check(sorted(got) == sorted(ref), label + ": OUT holds the oracle's tensors",
                  "(%s vs %s)" % (sorted(got), sorted(ref)))
        return compare(label, extra, got, meta, ref, rmeta)

    tool_runs(chk, args, work, name, op, inp, sets, check_run, variants)
    return ref, rmeta


def same_across_threads(chk, args, label, op, inp, work, sets, names):
    """`dsops run` with --threads 1 and 3: the outputs `names` must be bitwise identical."""
    outs = []
    for th in ("1", "3"):
        t, _ = tool_run(chk, args, "%s [--threads %s]" % (label, th), op, inp,
                        os.path.join(work, "%s.t%s.safetensors" % (label, th)), sets, ["--threads", th])
        if t is None:
            return
        outs.append(b"".join(t[n][1].tobytes() for n in names))
    chk.check(outs[0] == outs[1], label + ": --threads 1 and 3 give identical bytes")


def write_mutated(work, name, tensors, mutate, meta=None):
    """A copy of IN's tensors changed by mutate(copy), written as <work>/err_<name>.safetensors -> its path."""
    t = dict(tensors)
    mutate(t)
    path = os.path.join(work, "err_%s.safetensors" % name)
    write_safetensors(path, t, meta)
    return path


def bad_calls(chk, args, work, cases, exit_code=None, existing_out=True, leftovers=False):
    """Malformed calls of both programs. cases: (label, argv without --out, status[, field]). Each must exit
    non-zero (exit_code when given) with a 'dsops run: <STATUS>:' line on stderr, which names the field when
    one is given, and must not create OUT; with existing_out it runs again with OUT present, which must stay
    untouched; with leftovers no temporary file may remain in the work directory."""
    sentinel = b"do not touch"
    expect = "exit != 0" if exit_code is None else "exit %d" % exit_code
    for case in cases:
        label, argv, status = case[:3]
        field = case[3] if len(case) > 3 else None
        for who, base in programs(args):
            for existing in ((False, True) if existing_out else (False,)):
                out_path = os.path.join(work, "existing.safetensors" if existing else "never.safetensors")
                if os.path.exists(out_path):
                    os.remove(out_path)
                if existing:
                    with open(out_path, "wb") as f:
                        f.write(sentinel)
                r = run(base + argv + ["--out", out_path], args.verbose)
                what = "%s: %s" % (who, label)
                if existing_out:
                    what += " (%s OUT)" % ("existing" if existing else "new")
                ok = r.returncode != 0 if exit_code is None else r.returncode == exit_code
                ok = ok and ("dsops run: %s:" % status) in r.stderr and (field is None or field in r.stderr)
                if field is None:
                    desc = "%s -> %s and %s" % (what, expect, status)
                else:
                    desc = "%s -> %s, %s, message names %s" % (what, expect, status, field)
                chk.check(ok, desc, "(rc %d, stderr %r)" % (r.returncode, r.stderr.strip()))
                if existing:
                    with open(out_path, "rb") as f:
                        chk.check(f.read() == sentinel, what + ": OUT untouched")
                else:
                    chk.check(not os.path.exists(out_path), what + ": OUT not created")
                if leftovers:
                    left = [n for n in os.listdir(work) if ".tmp-" in n]
                    chk.check(not left, what + ": no temporary file left", str(left))


def both_accept(chk, args, work, name, what, op, tensors, judge, sets=()):
    """Writes tensors as NAME's IN and runs both programs on it: each must succeed and judge(outputs,
    metadata) of its OUT must hold. what: the text of the check after the program's name."""
    inp = os.path.join(work, name + ".in.safetensors")
    write_safetensors(inp, tensors)
    for who, base in programs(args):
        out = os.path.join(work, name + ".out.safetensors")
        r = run(base + [op, "--in", inp, "--out", out] + set_args(sets), args.verbose)
        chk.check(r.returncode == 0 and judge(*read_safetensors(out)), "%s: %s" % (who, what), r.stderr.strip())


def check_run_help(chk, args, names, what):
    """`dsops run --help` exits 0 and its text holds each of names (operators, tensors, parameters). what: the
    check's text after "dsops run --help lists"."""
    r = run([args.tool, "run", "--help"], args.verbose)
    chk.check(r.returncode == 0 and all(n in r.stdout for n in names), "dsops run --help lists " + what)


def case_checks(*runs, errors=None):
    """The checks(chk, args, work, rng) of runcheck.main of a check that runs check_case(chk, args, work, rng, c)
    for every c of each (check_case, cases) of runs, then errors(chk, args, work, rng) when given."""
    def checks(chk, args, work, rng):
        for check_case, cases in runs:
            for c in cases:
                check_case(chk, args, work, rng, c)
        if errors:
            errors(chk, args, work, rng)
    return checks


# ---- the command line -----------------------------------------------------------------------------


def main(doc, name, seed, checks, options=()):
    """Parses the options every check takes (and options: (flag, type, default) of the check's own), runs
    checks(chk, args, work, rng) and prints "N passed, N failed" last. The work directory is removed afterwards unless --keep is given or a check failed.
    Returns the exit status."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--tool", required=True, help="path of the dsops tool")
    ap.add_argument("--ref", required=True, help="path of dsops_ref_run")
    ap.add_argument("--workdir", help="directory for the files (default: a new temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the files")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DSOPS_TEST_SEED", str(seed))))
    ap.add_argument("--verbose", action="store_true")
    for flag, kind, default in options:
        ap.add_argument(flag, type=kind, default=default)
    args = ap.parse_args()

    work = args.workdir or tempfile.mkdtemp(prefix="dsops_%s_check_" % name)
    os.makedirs(work, exist_ok=True)
    print("%s: seed %d, files in %s (replay: %s --tool %s --ref %s --seed %d --keep)" % (
        os.path.basename(sys.argv[0]), args.seed, work, sys.argv[0], args.tool, args.ref, args.seed))
    rng = np.random.default_rng(args.seed)
    chk = Checker(args.verbose)
    try:
        checks(chk, args, work, rng)
    finally:
        if not args.keep and chk.failed == 0:
            shutil.rmtree(work, ignore_errors=True)
    print("tiers run: %s (the CPU's highest, dsops run's default, and scalar)" % (" ".join(sorted(chk.tiers)) or "none"))
    print("%d passed, %d failed" % (chk.passed, chk.failed))
    return 1 if chk.failed else 0


# ---- the parts of a script that every script writes the same way ----------------------------------


def cases_then_errors(cases, check_case, check_errors):
    """The checks function for main of a script that runs check_case(chk, args, work, rng, c) on every case c,
    then check_errors(chk, args, work, rng)."""
    def checks(chk, args, work, rng):
        for c in cases:
            check_case(chk, args, work, rng, c)
        check_errors(chk, args, work, rng)
    return checks


def help_lists(chk, args, words, what):
    """One check: `dsops run --help` exits 0 and its text holds every one of words (what: the check's text)."""
    r = run([args.tool, "run", "--help"], args.verbose)
    chk.check(r.returncode == 0 and all(w in r.stdout for w in words), what)
