"""The README's Python examples run as written: the sparse attention call and FlashMLA's FP8 rows read by it
(the rows of the FP8 call are those `fp8_cache_dequantize` gives back, so the output equals the split bf16 call
on them), the FlashMLA call, and DeepGEMM's paged logits (against NumPy)."""
import os
import re

import numpy as np

import dsops

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")


def test_readme_python_examples():
    blocks = re.findall(r"```python\n(.*?)```", open(README, encoding="utf-8").read(), re.S)
    assert len(blocks) >= 2
    scope = {}
    exec(compile("\n".join(blocks[:2]), "README.md", "exec"), scope)
    out, out8, rows, fp8 = scope["out"], scope["out8"], scope["rows"], scope["fp8"]
    assert out.shape == out8.shape == (2, 128, 512) and rows.shape == (4, 64, 576)
    split = dsops.sparse_flash_attention_v32(**fp8, key_nope=np.ascontiguousarray(rows[..., :512]),
                                             key_rope=np.ascontiguousarray(rows[..., 512:]))["out"]
    assert np.array_equal(split.view(np.uint16), out8.view(np.uint16))


def test_readme_deep_gemm_example():
    blocks = re.findall(r"```python\n(.*?)```", open(README, encoding="utf-8").read(), re.S)
    scope = {}
    exec(compile("\n".join(blocks[:4]), "README.md", "exec"), scope)
    logits, keys, kq = scope["logits"], scope["keys"], scope["kq"]
    k = keys.view(dsops.float8_e4m3fn).reshape(4, 64, 128)[[3, 1, 0, 2]].reshape(256, 128).astype(np.float64)
    dots = np.einsum("nhd,jd->nhj", kq[0].astype(np.float64), k)
    want = np.maximum(dots, 0).sum(1) * 0.05
    for n in range(2):  # query n of 2 sees keys j <= 200 - 2 + n
        seen = np.arange(256) <= 198 + n
        assert np.isneginf(logits[n][~seen]).all()
        np.testing.assert_allclose(logits[n][seen], want[n][seen], rtol=1e-5, atol=1e-3)
