"""The DeepSeek-V4 PyPTO prolog operators of the Ascend (CANN) recipes on the CPU, with the vendor's Python entry
points, argument names and order, defaults, shapes and return values, computed by dsops operators:

    hc_pre_pypto, hc_pre                 mHC pre-mixing, one eps                  -> hc_pre (norm_eps = hc_eps)
    hc_pre_kernel, hc_pre_kernel_prefill the same, into caller-given outputs
    mla_prolog_pypto, mla_prolog         V4 MLA prolog, bf16 wq_b                 -> mla_prolog_v4 (bf16)
    mla_prolog_quant_pypto,              V4 MLA prolog, int8 wq_b, int8 qr        -> mla_prolog_v4 (int8)
      mla_prolog_quant
    mla_prolog_v4                        either prolog, into caller-given outputs (the eager entry)

`hc_pre` and `mla_prolog` / `mla_prolog_quant` are the names of the vendor's torch ops (torch.ops.pypto.*);
the `*_pypto` functions are the wrappers its tests call. The vendor's own `npu_hc_pre` (which the torch op
dispatches to) is not defined here: that name belongs to the AscendC operator in `dsops.compat.cann`, which
keeps two epsilons.

Matmul weights come as the vendor keeps them, `[in, out]`, ND or FRACTAL_NZ blocks (see `dsops.compat.cann`);
NZ bytes held in a tensor of the ND shape need `weight_format="NZ"`. The calls with weights have
`.prepare(...)`, taking the same arguments, whose result passed as `prepared=` skips the conversion and packing
of the same weight objects.
"""
import dataclasses
from typing import List, Optional

import numpy as np

import dsops

from ._arrays import _back, _is_torch, _np
from .cann import PreparedWeights, _bf16, _preparable, _weight, _weights

__all__ = ["hc_pre_pypto", "hc_pre", "hc_pre_kernel", "hc_pre_kernel_prefill", "mla_prolog_pypto", "mla_prolog",
           "mla_prolog_quant_pypto", "mla_prolog_quant", "mla_prolog_v4", "MlaPrologV4Attrs",
           "MlaPrologV4Configs", "MlaTileConfigs"]


# ---- hc_pre -------------------------------------------------------------------------------------------------

def _hc_pre(name, x, hc_fn, hc_scale, hc_base, hc_mult, iters, eps, outs=None, prepared=None, _prepare=None):
    a = _bf16(x, "x")
    if a.ndim != 3:
        raise ValueError(f"x has shape {a.shape}; expected [t, hc_mult, h]")
    if a.shape[1] != hc_mult:
        raise ValueError(f"x has {a.shape[1]} streams, hc_mult = {hc_mult}")
    w, handle = _weights(name, prepared, (hc_fn,), lambda: dict(hc_fn=_np(hc_fn)))
    # the vendor op has one eps: the RMS denominator's and the gates' / Sinkhorn's
    kw = dict(x=a, hc_scale=_np(hc_scale), hc_base=_np(hc_base), sinkhorn_iters=int(iters), norm_eps=float(eps),
              hc_eps=float(eps), preset="v4_flash", **w)
    if _prepare:
        return PreparedWeights(name, (hc_fn,), w, _prepare.prepare(**kw))
    if outs is not None:
        kw.update(zip(("y", "post", "comb"), outs))
    return dsops.hc_pre(prepared=handle, **kw)


def hc_pre_pypto(x, hc_fn, hc_scale, hc_base, hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, *, prepared=None,
                 _prepare=None):
    """mHC pre-processing: (y, post, comb) from the hc_mult residual streams of every token.

    x [t, hc_mult, h] bf16; hc_fn [(2 + hc_mult) · hc_mult, hc_mult · h], hc_scale [3], hc_base
    [(2 + hc_mult) · hc_mult] fp32. Returns y [t, h] bf16, post [t, hc_mult] and comb [t, hc_mult, hc_mult] fp32.
    hc_eps is the only epsilon: it is added to the mean square of the RMS denominator, to the pre gates and in
    every Sinkhorn normalisation (rows first, hc_sinkhorn_iters rounds). The vendor op takes only hc_mult 4 and
    h 4096; dsops takes any."""
    r = _hc_pre("hc_pre_pypto", x, hc_fn, hc_scale, hc_base, hc_mult, hc_sinkhorn_iters, hc_eps, prepared=prepared,
                _prepare=_prepare)
    if _prepare:
        return r
    torch_io = _is_torch(x)
    return tuple(_back(r[k], torch_io) for k in ("y", "post", "comb"))


def hc_pre(x, hc_fn, hc_scale, hc_base, hc_mult=4, hc_split_sinkhorn_iters=20, hc_eps=1e-6, *, prepared=None):
    """torch.ops.pypto.hc_pre: `hc_pre_pypto` under the name and argument names of the documented prototype."""
    return hc_pre_pypto(x, hc_fn, hc_scale, hc_base, hc_mult, hc_split_sinkhorn_iters, hc_eps, prepared=prepared)


def _outputs(y, post, comb):
    outs = tuple(_np(o) for o in (y, post, comb))
    for n, o in zip(("y", "post", "comb"), outs):
        if not o.flags.writeable:
            raise ValueError(f"{n} must be writable (it is written in place)")
    return outs


def hc_pre_kernel(x, hc_fn, hc_scale, hc_base, y, post, comb, hc_mult=4, hc_split_sinkhorn_iters=20, hc_eps=1e-6):
    """The vendor's decode kernel entry: `hc_pre_pypto` writing y [t, h] bf16, post [t, hc_mult] and comb
    [t, hc_mult, hc_mult] fp32 (given by the caller) in place. Returns None, as the kernel does."""
    _hc_pre("hc_pre_kernel", x, hc_fn, hc_scale, hc_base, hc_mult, hc_split_sinkhorn_iters, hc_eps,
            outs=_outputs(y, post, comb))


def hc_pre_kernel_prefill(x, hc_fn, hc_scale, hc_base, y, post, comb, hc_mult=4, hc_split_sinkhorn_iters=20,
                          hc_eps=1e-6):
    """The vendor's prefill kernel entry (tokens along the last axis on the device): the same results as
    `hc_pre_kernel`, except that, as in the vendor kernel, hc_eps is ignored and 1e-6 used for every epsilon."""
    _hc_pre("hc_pre_kernel_prefill", x, hc_fn, hc_scale, hc_base, hc_mult, hc_split_sinkhorn_iters, 1e-6,
            outs=_outputs(y, post, comb))


# ---- MLA prolog ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class MlaPrologV4Attrs:
    """The eager call's attributes: eps is every RMSNorm's epsilon. The layouts are accepted and, as by the
    vendor kernel, not used (tokens are always rows, TND)."""
    eps: float = 1e-6
    layout_query: str = "TND"
    layout_key: str = "PA_BSND"


@dataclasses.dataclass
class MlaPrologV4Configs:
    """The vendor's scheduling record; nothing in it changes a result, so the CPU call ignores it."""
    unroll_list: Optional[List[int]] = None
    cube_l1_reuse_setting: Optional[dict] = None
    mg_copyin_upper_bound: int = 2 * 1024 * 1024
    pg_upper_bound: int = 8192
    block_size: int = 128
    t_sub_tile: int = 1
    chunk_size: int = 2
    vec_nbuffer_mode: int = 1


@dataclasses.dataclass
class MlaTileConfigs:
    """The int8 prolog's tiling record; ignored on the CPU."""
    two_dim_tile: Optional[list] = None
    three_dim_tile: Optional[list] = None
    four_dim_tile: Optional[list] = None
    vec_tile: Optional[list] = None


def _mla(name, token_x, wq_a, wq_b, wkv, rope_cos, rope_sin, gamma_cq, gamma_ckv, wq_b_scale, eps, weight_format,
         prepared=None, _prepare=None, outs=None):
    """dsops.mla_prolog_v4's result dict (or a PreparedWeights) for the vendor's arguments; int8 exactly when
    wq_b_scale is given."""
    x = _bf16(token_x, "token_x")
    if x.ndim != 2:
        raise ValueError(f"token_x has shape {x.shape}; expected [t, h]")
    T, H = x.shape
    Q, D = _np(gamma_cq).shape[0], _np(gamma_ckv).shape[0]
    qb = _np(wq_b)
    int8 = wq_b_scale is not None
    if (qb.dtype == np.int8) != int8:
        raise TypeError(f"wq_b is {qb.dtype}: the {'int8' if int8 else 'bf16'} prolog takes "
                        f"{'int8' if int8 else 'bfloat16'} weights")
    cos, sin = _np(rope_cos), _np(rope_sin)
    if cos.ndim != 2 or cos.shape[1] != 64 or sin.shape != cos.shape:
        raise NotImplementedError(f"rope tables {cos.shape} / {sin.shape}: the rotation acts on 64 dims, [t, 64]")
    if int8:
        ND = _np(wq_b_scale).size
    else:  # [Q, N·D], or NZ blocks [N·D / C0, Q, C0]
        ND = qb.shape[1] if qb.ndim == 2 else qb.shape[0] * qb.shape[2]
    f = weight_format
    sources = (wq_a, wq_b, wkv)
    w, handle = _weights(name, prepared, sources, lambda: dict(
        wq_a=_weight(wq_a, H, Q, f), wq_b=_weight(wq_b, Q, ND, f), wkv=_weight(wkv, H, D, f)))
    kw = dict(x=x, gamma_cq=_np(gamma_cq), gamma_ckv=_np(gamma_ckv), rope_cos=cos, rope_sin=sin,
              eps_cq=float(eps), eps_ckv=float(eps), eps_qh=float(eps), rope_mode="interleaved",
              rope_inverse=False, preset="v4_flash", **w)
    if int8:
        kw["wq_b_scale"] = np.ascontiguousarray(_np(wq_b_scale), dtype=np.float32).reshape(ND)
    if _prepare:
        return PreparedWeights(name, sources, w, _prepare.prepare(**kw))
    if outs is not None:
        kw.update(outs)
    return dsops.mla_prolog_v4(prepared=handle, **kw)


def mla_prolog_pypto(token_x, wq_a, wq_b, wkv, rope_cos, rope_sin, gamma_cq, gamma_ckv, *, weight_format=None,
                     prepared=None, _prepare=None):
    """The V4 MLA prolog, bf16 weights: returns (q [t, n, d], kv [t, d], qr [t, q_lora_rank]), all bf16.

    token_x [t, h]; wq_a [h, q_lora_rank], wq_b [q_lora_rank, n · d], wkv [h, d] (ND or NZ); gamma_cq
    [q_lora_rank], gamma_ckv [d]; rope_cos, rope_sin [t, 64]; all bf16. Every matmul result is rounded to bf16;
    qr = bf16(RMSNorm(x · wq_a) · gamma_cq); each head of bf16(qr · wq_b) gets a weightless RMSNorm; kv =
    bf16(RMSNorm(x · wkv) · gamma_ckv); the last 64 dims of every q head and of kv are rotated in interleaved
    pairs, y[2j] = x[2j]·cos[2j] − x[2j+1]·sin[2j], y[2j+1] = x[2j+1]·cos[2j+1] + x[2j]·sin[2j+1]. eps 1e-6
    everywhere, as the vendor wrapper fixes it. The vendor op takes only h 4096, q_lora_rank 1024, n 64, d 512;
    dsops takes any (d > 64)."""
    r = _mla("mla_prolog_pypto", token_x, wq_a, wq_b, wkv, rope_cos, rope_sin, gamma_cq, gamma_ckv, None, 1e-6,
             weight_format, prepared, _prepare)
    if _prepare:
        return r
    torch_io = _is_torch(token_x)
    return tuple(_back(r[k], torch_io) for k in ("q", "kv", "qr"))


def mla_prolog(token_x, wq_a, wq_b, wkv, rope_cos, rope_sin, gamma_cq, gamma_ckv, *, weight_format=None,
               prepared=None):
    """torch.ops.pypto.mla_prolog: the same as `mla_prolog_pypto`."""
    return mla_prolog_pypto(token_x, wq_a, wq_b, wkv, rope_cos, rope_sin, gamma_cq, gamma_ckv,
                            weight_format=weight_format, prepared=prepared)


def mla_prolog_quant_pypto(token_x, wq_a, wq_b, wkv, rope_cos, rope_sin, gamma_cq, gamma_ckv, wq_b_scale, *,
                           weight_format=None, prepared=None, _prepare=None):
    """The V4 MLA prolog with an int8 wq_b: returns (q [t, n, d] bf16, kv [t, d] bf16, qr [t, q_lora_rank] int8,
    qr_scale [t, 1] fp32).

    As `mla_prolog_pypto`, but wq_b [q_lora_rank, n · d] is int8 with per-column scales wq_b_scale [n · d, 1]
    fp32, and nothing is rounded to bf16 before the outputs: x · wq_a and x · wkv stay fp32; RMSNorm(x · wq_a) ·
    gamma_cq is quantised per token (scale 127 / amax, values rounded to nearest even, qr_scale = 1 / scale);
    qr · wq_b is summed exactly in int32 and dequantised by qr_scale, then by wq_b_scale. A token whose
    normalised query is all zero gets qr 0 and qr_scale 0 (the vendor's quantiser has no such guard and yields
    an undefined value there). Shapes as in `mla_prolog_pypto`."""
    r = _mla("mla_prolog_quant_pypto", token_x, wq_a, wq_b, wkv, rope_cos, rope_sin, gamma_cq, gamma_ckv,
             wq_b_scale, 1e-6, weight_format, prepared, _prepare)
    if _prepare:
        return r
    torch_io = _is_torch(token_x)
    T = r["qr_scale"].shape[0]
    return (_back(r["q"], torch_io), _back(r["kv"], torch_io), _back(r["qr"], torch_io),
            _back(r["qr_scale"].reshape(T, 1), torch_io))


def mla_prolog_quant(token_x, wq_a, wq_b, wkv, rope_cos, rope_sin, gamma_cq, gamma_ckv, wq_b_scale, *,
                     weight_format=None, prepared=None):
    """torch.ops.pypto.mla_prolog_quant: the same as `mla_prolog_quant_pypto`."""
    return mla_prolog_quant_pypto(token_x, wq_a, wq_b, wkv, rope_cos, rope_sin, gamma_cq, gamma_ckv, wq_b_scale,
                                  weight_format=weight_format, prepared=prepared)


def _writable(a, name):
    a = _np(a)
    if not a.flags.writeable:
        raise ValueError(f"{name} must be writable (it is written in place)")
    return a


def mla_prolog_v4(x, wq_a, wq_b, wkv, rmsnorm_gamma_cq, rmsnorm_gamma_ckv, cos, sin, *args, weight_format=None):
    """The eager kernel entry of both vendor prologs, writing the caller's outputs in place; returns None.

    bf16 wq_b:  mla_prolog_v4(x, wq_a, wq_b, wkv, rmsnorm_gamma_cq, rmsnorm_gamma_ckv, cos, sin,
                              q_out, kv_out, qr_out, attrs, configs)
    int8 wq_b:  mla_prolog_v4(x, wq_a, wq_b, wkv, rmsnorm_gamma_cq, rmsnorm_gamma_ckv, cos, sin, wq_b_scale,
                              q_out, kv_out, qr_out, qr_scale_out, attrs, configs, tile_configs)

    (the vendor's two modules each define one of these under this name). The math is that of `mla_prolog_pypto`
    / `mla_prolog_quant_pypto` with attrs.eps as every RMSNorm's epsilon; configs and tile_configs change
    nothing. Outputs: q_out [t, n, d], kv_out [t, d] bf16; qr_out [t, q_lora_rank] bf16 or int8; qr_scale_out
    [t, 1] fp32."""
    int8 = _np(wq_b).dtype == np.int8
    want = 8 if int8 else 5
    if len(args) not in (want - 1, want):  # the trailing tile_configs / configs may be left out
        raise TypeError(f"mla_prolog_v4 with {'int8' if int8 else 'bf16'} wq_b takes {8 + want} positional "
                        f"arguments; got {8 + len(args)}")
    if int8:
        wq_b_scale, q_out, kv_out, qr_out, qr_scale_out, attrs = args[:6]
        outs = dict(qr_scale=_writable(qr_scale_out, "qr_scale_out")[:, 0])
    else:
        wq_b_scale, (q_out, kv_out, qr_out, attrs), outs = None, args[:4], {}
    outs.update(q=_writable(q_out, "q_out"), kv=_writable(kv_out, "kv_out"), qr=_writable(qr_out, "qr_out"))
    _mla("mla_prolog_v4", x, wq_a, wq_b, wkv, cos, sin, rmsnorm_gamma_cq, rmsnorm_gamma_ckv, wq_b_scale,
         attrs.eps, weight_format, outs=outs)


_preparable(hc_pre_pypto, dsops.hc_pre)
_preparable(mla_prolog_pypto, dsops.mla_prolog_v4)
_preparable(mla_prolog_quant_pypto, dsops.mla_prolog_v4)
