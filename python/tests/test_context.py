"""Contexts through the package: the scratch limit, and a context shared by two Python threads (each call
either runs or is refused with BusyError, never a wrong result)."""
import threading

import numpy as np
import pytest

import dsops
from test_ops import sfa_case


def test_scratch_limit_refuses_before_writing():
    a = sfa_case(11, True)
    ctx = dsops.Context(threads=1, scratch_limit=4096)
    assert ctx.scratch_limit == 4096
    out = np.full(a["q_nope"].shape, 3, a["q_nope"].dtype)
    with pytest.raises(dsops.NoMemError, match="scratch limit of 4096 bytes"):
        dsops.sparse_flash_attention_v32(context=ctx, out=out, **a)
    assert np.all(out.astype(np.float32) == 3)
    ctx.scratch_limit = 1 << 30
    got = dsops.sparse_flash_attention_v32(context=ctx, **a)["out"].view(np.uint16)
    assert np.array_equal(got, dsops.sparse_flash_attention_v32(**a)["out"].view(np.uint16))
    for bad in (0, -1):
        with pytest.raises(dsops.ParamError, match="scratch"):
            ctx.scratch_limit = bad


def test_shared_context_runs_or_refuses():
    a = sfa_case(12, True)
    want = dsops.sparse_flash_attention_v32(**a)["out"].view(np.uint16)
    ctx = dsops.Context(threads=1)
    tally = {"ran": 0, "busy": 0, "wrong": 0}
    lock = threading.Lock()

    def caller():
        for _ in range(30):
            try:
                got = dsops.sparse_flash_attention_v32(context=ctx, **a)["out"].view(np.uint16)
                key = "ran" if np.array_equal(got, want) else "wrong"
            except dsops.BusyError:
                key = "busy"
            with lock:
                tally[key] += 1

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert tally["wrong"] == 0 and tally["ran"] >= 1 and tally["ran"] + tally["busy"] == 90, tally


def test_topk_scratch_follows_the_keys_not_k():
    """A top-k far beyond the keys a token sees costs no scratch: K = 2^22 over a few dozen keys runs within a
    1 MiB scratch limit, with strided outputs (the path that selects into scratch before scattering)."""
    from test_ops import li_case
    a = li_case(13, True, kv=(30, 11), T_per=(1, 1))
    K = 1 << 22
    idx = np.zeros((2, 2 * K), np.int32)[:, ::2]
    sc = np.zeros((2, 2 * K), np.float32)[:, ::2]
    ctx = dsops.Context(threads=2, scratch_limit=1 << 20)
    kw = {k: v for k, v in a.items() if k not in ("topk_indices", "topk_scores")}
    dsops.lightning_indexer(context=ctx, topk=K, topk_indices=idx, topk_scores=sc, **kw)
    small = dsops.lightning_indexer(topk=64, **kw)
    assert np.array_equal(idx[:, :64], small["topk_indices"])
    assert np.all(idx[:, 64:] == -1) and np.all(sc[:, 64:] == -np.inf)
