"""The README's Python examples run as written: the sparse attention call and FlashMLA's FP8 rows read by it
(the rows of the FP8 call are those `fp8_cache_dequantize` gives back, so the output equals the split bf16 call
on them)."""
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
