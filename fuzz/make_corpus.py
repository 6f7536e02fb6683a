#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into fuzz/corpus/<target>/ (the outputs are kept in the repository).

    python3 fuzz/make_corpus.py            # rewrites every seed; deterministic, so an unchanged script changes nothing

fuzz_safetensors: small files, valid ones in the writer's layout and in other legal layouts, and a few broken ones.
fuzz_run: `dsops run` command lines, one argument per line, then the marker \\0ST\\0 and the IN file (fuzz/fuzz_run.c).
fuzz_validation: the decision streams of fuzz/fuzz_validation.c: one byte per operator (its valid baseline), and
a few streams that change it. Files are named for what they hold; none ends in .safetensors (ignored by git).
"""
import json
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I8": 1, "U8": 1, "I32": 4, "I64": 8}


def safetensors(tensors, metadata=None, pad_to=8):
    """tensors: list of (name, dtype tag, shape, bytes); laid out in order, without gaps."""
    header, data, offset = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, tag, shape, raw in tensors:
        count = 1
        for extent in shape:
            count *= extent
        assert len(raw) == count * DTYPE_BYTES[tag], name
        header[name] = {"dtype": tag, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-len(text)) % pad_to)
    return struct.pack("<Q", len(text)) + text + data


def raw_header(text, data=b""):
    text = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(text)) + text + data


def values(rng, tag, count):
    """Deterministic payload bytes: small finite numbers for floats, small integers otherwise."""
    out = bytearray()
    for _ in range(count):
        if tag == "F32":
            out += struct.pack("<f", rng.uniform(-2, 2))
        elif tag in ("BF16", "F16"):
            bits = struct.unpack("<I", struct.pack("<f", rng.uniform(-2, 2)))[0]
            out += struct.pack("<H", bits >> 16) if tag == "BF16" else struct.pack("<e", rng.uniform(-2, 2))
        elif tag in ("I8", "U8"):
            out += bytes([rng.randrange(256)])
        elif tag == "I32":
            out += struct.pack("<i", rng.randrange(-4, 5))
        else:
            out += struct.pack("<q", rng.randrange(-4, 5))
    return bytes(out)


def tensor(rng, name, tag, shape, data=None):
    count = 1
    for extent in shape:
        count *= extent
    if data is not None:
        fmt = {"I32": "<%di", "I64": "<%dq", "F32": "<%df"}[tag]
        raw = struct.pack(fmt % len(data), *data)
    else:
        raw = values(rng, tag, count)
    return (name, tag, shape, raw)


def write(target, name, content):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(content)


def safetensors_seeds(rng):
    t = lambda *a, **k: tensor(rng, *a, **k)
    write("fuzz_safetensors", "every_dtype", safetensors(
        [t("a.bf16", "BF16", (2, 3)), t("b.f16", "F16", (3,)), t("c.f32", "F32", (2, 2)), t("d.i8", "I8", (5,)),
         t("e.u8", "U8", (1, 3)), t("f.i32", "I32", (2,)), t("g.i64", "I64", (1,)), t("scalar", "F32", ())],
        metadata={"operator": "rmsnorm", "eps": "1e-6"}))
    write("fuzz_safetensors", "empty_header", raw_header("{}"))
    write("fuzz_safetensors", "metadata_only", raw_header('{"__metadata__":{"k":"v","quote \\" and \\\\":"\\n"}}  '))
    write("fuzz_safetensors", "zero_size_tensors", raw_header(
        '{"z":{"dtype":"I32","shape":[0,3],"data_offsets":[0,0]},"y":{"dtype":"BF16","shape":[2,0],'
        '"data_offsets":[4,4]},"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}', bytes(range(4))))
    write("fuzz_safetensors", "misaligned_and_gaps", raw_header(
        '{"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"f":{"dtype":"F32","shape":[2],"data_offsets":[1,9]},'
        '"i":{"dtype":"I64","shape":[1],"data_offsets":[12,20]}}\n', bytes(range(24))))
    write("fuzz_safetensors", "escaped_names", raw_header(
        '{"caf\\u00e9\\ud83d\\ude00\\/\\n":{"dtype":"U8","shape":[1],"x":{"y":[true,false,null,-1]},'
        '"data_offsets":[0,1]}}', b"\x07"))
    write("fuzz_safetensors", "overlap_refused", raw_header(
        '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
        bytes(12)))
    write("fuzz_safetensors", "truncated", safetensors([t("x", "F32", (4,))])[:30])


def run_seed(args, tensors=None, metadata=None):
    text = "\n".join(args).encode()
    if tensors is None and metadata is None:
        return text
    return text + b"\0ST\0" + safetensors(tensors or [], metadata)


def run_seeds(rng):
    t = lambda *a, **k: tensor(rng, *a, **k)
    io = ["--in", "@IN", "--out", "@OUT"]
    write("fuzz_run", "rmsnorm", run_seed(["rmsnorm"] + io + ["--set", "eps=1e-5"],
                                          [t("x", "BF16", (2, 8)), t("weight", "BF16", (8,))]))
    write("fuzz_run", "rmsnorm_metadata_threads", run_seed(["rmsnorm", "--in=@IN", "--out=@OUT", "--threads", "2"],
                                                           [t("x", "BF16", (1, 4))], {"eps": "1e-5"}))
    write("fuzz_run", "quant_q8", run_seed(["quant_q8"] + io + ["--set", "group=4", "--isa", "scalar"],
                                           [t("x", "F32", (2, 8))]))
    write("fuzz_run", "rope_tables", run_seed(["rope_tables"] + io + ["--set", "dtype=bf16", "--set", "yarn=false"],
                                              [t("positions", "I64", (3,), [0, 5, 9])]))
    write("fuzz_run", "rope_apply", run_seed(["rope_apply"] + io + ["--set", "rope_mode=half"],
                                             [t("x", "BF16", (1, 1, 64)), t("rope_cos", "F32", (1, 64)),
                                              t("rope_sin", "F32", (1, 64))]))
    write("fuzz_run", "cache_store", run_seed(["cache_store"] + io,
                                              [t("src", "BF16", (2, 8)), t("cache_index", "I64", (2,), [3, -1]),
                                               t("cache", "BF16", (2, 2, 8))]))
    write("fuzz_run", "hc_post", run_seed(["hc_post"] + io,
                                          [t("x", "F32", (1, 4)), t("residual", "F32", (1, 2, 4)),
                                           t("post", "F32", (1, 2)), t("comb", "F32", (1, 2, 2))]))
    write("fuzz_run", "sparse_flash_attention_v32", run_seed(
        ["sparse_flash_attention_v32"] + io + ["--set", "p_mode=tiled", "--set", "p_tile=2"],
        [t("q_nope", "BF16", (1, 1, 128)), t("q_rope", "BF16", (1, 1, 64)), t("key_nope", "BF16", (1, 4, 128)),
         t("key_rope", "BF16", (1, 4, 64)), t("topk_indices", "I32", (1, 2), [0, 2]),
         t("block_table", "I32", (1, 1), [0]), t("cu_seqlens_q", "I32", (2,), [0, 1]),
         t("seqused_kv", "I32", (1,), [3])]))
    write("fuzz_run", "lightning_indexer", run_seed(
        ["lightning_indexer"] + io + ["--set", "topk=2"],
        [t("q_idx", "BF16", (1, 1, 64)), t("weights", "BF16", (1, 1)), t("key_cache", "BF16", (1, 4, 64)),
         t("block_table", "I32", (1, 1), [0]), t("cu_seqlens_q", "I32", (2,), [0, 1]),
         t("seqused_kv", "I32", (1,), [4])]))
    write("fuzz_run", "swa", run_seed(
        ["swa"] + io + ["--set", "win_size=4"],
        [t("q", "BF16", (1, 1, 128)), t("ori_kv", "BF16", (1, 4, 128)), t("ori_block_table", "I32", (1, 1), [0]),
         t("cu_seqlens_q", "I32", (2,), [0, 1]), t("seqused_kv", "I32", (1,), [3])]))
    write("fuzz_run", "out_is_in", run_seed(["rmsnorm", "--in", "@IN", "--out", "@IN"], [t("x", "BF16", (1, 4))]))
    write("fuzz_run", "help", run_seed(["--help"]))
    write("fuzz_run", "usage_errors", run_seed(["rmsnorm", "--in", "@IN", "--out"]))
    write("fuzz_run", "unknown_operator", run_seed(["no_such_operator", "--in", "@IN", "--out", "@OUT"]))
    write("fuzz_run", "missing_input", run_seed(["rmsnorm"] + io))


def validation_seeds(rng):
    # one byte: the operator's baseline; longer streams change it (the format is in fuzz/fuzz_validation.c)
    for op in range(24):  # byte % (number of operators): every operator, whatever their count up to 24
        write("fuzz_validation", "baseline_%02d" % op, bytes([op]))
    for k in range(12):
        write("fuzz_validation", "changes_%02d" % k, bytes(rng.randrange(256) for _ in range(rng.randrange(8, 48))))


def main():
    rng = random.Random(20240611)
    safetensors_seeds(rng)
    run_seeds(rng)
    validation_seeds(rng)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(CORPUS) for f in fs)
    print("seed corpus: %d bytes in %s" % (total, CORPUS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
