"""Drop-in CPU versions of other libraries' Python calls, computed by dsops operators.

    from dsops.compat import flash_mla          # in place of `import flash_mla`
    out, lse = flash_mla.flash_mla_with_kvcache(q, k_cache, None, None, 512, meta, indices=idx, is_fp8_kvcache=True)

Modules: `flash_mla` (FlashMLA's sparse attention calls), `deep_gemm` (DeepGEMM's FP8 indexer logits) and `cann`
(the Ascend vendor operators; so far the PyPTO lightning indexer).

Each module keeps the upstream functions' names, argument names and order, defaults, shapes and return tuples,
on CPU torch tensors or NumPy arrays (torch in, torch out). docs/COMPAT.md says what each call maps onto and
where it differs.
"""
