"""dsops from Python: every operator of the C library on NumPy arrays (bf16 through ml_dtypes) or PyTorch CPU
tensors, driven by the operator descriptions of the library's public API (dsops_op_count / dsops_op_at).

    import dsops
    r = dsops.sparse_flash_attention_v32(q_nope=..., q_rope=..., key_nope=..., ...)   # dict of outputs
    r["out"]

Each operator is a function named as in include/dsops.h; its keyword arguments are the tensors and parameters of
the C args struct, named as there. Inputs and in-out tensors are passed as arrays (views with any non-negative
strides; in-out tensors are updated in place, never copied). Outputs are allocated when not given, as NumPy arrays
or, when the inputs are torch tensors, as torch tensors. `preset` ("v32", "v4_flash", "v4_pro") selects the
defaults of the scalar parameters; `threads` and `isa` cap the call. A rejected call raises a subclass of
dsops.Error carrying the library's message; nothing is written then.
"""
import ctypes
import os
import threading

import numpy as np

try:
    import ml_dtypes
    bfloat16 = np.dtype(ml_dtypes.bfloat16)
    float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
except ImportError:  # bf16 tensors then need torch or raw uint16 views
    ml_dtypes = None
    bfloat16 = None
    float8_e4m3fn = None

__all__ = ["Error", "Context", "operators", "bfloat16", "float8_e4m3fn"]

_here = os.path.dirname(os.path.abspath(__file__))
_lib = None
for _name in ("libdsops.so", "libdsops.so.0"):
    _path = os.path.join(_here, _name)
    if os.path.exists(_path):
        _lib = ctypes.CDLL(_path)
        break
if _lib is None:
    _lib = ctypes.CDLL(os.environ.get("DSOPS_LIBRARY", "libdsops.so"))

MAX_DIMS = 6
DTYPE_INVALID, BF16, FP16, FP32, INT8, INT32, INT64, UINT8, FP8_E4M3 = range(9)
ARG_IN, ARG_IN_OPT, ARG_INOUT, ARG_INOUT_OPT, ARG_OUT, ARG_OUT_OPT = range(6)
PARAM_FLOAT, PARAM_INT, PARAM_BOOL, PARAM_ENUM, PARAM_DOUBLE = range(5)


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("stride", ctypes.c_int64 * MAX_DIMS)]


class _EnumValue(ctypes.Structure):
    _fields_ = [("spelling", ctypes.c_char_p), ("value", ctypes.c_int)]


class _TensorDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("offset", ctypes.c_size_t), ("role", ctypes.c_int),
                ("dtypes", ctypes.c_uint), ("note", ctypes.c_char_p)]


class _ParamDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("type", ctypes.c_int), ("offset", ctypes.c_size_t),
                ("size", ctypes.c_size_t), ("spellings", ctypes.POINTER(_EnumValue)), ("note", ctypes.c_char_p),
                ("required", ctypes.c_bool)]


_INIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_INFER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_bool))
_SHAPES = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)
_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_PREPARE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))


class _OpDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("args_size", ctypes.c_size_t),
                ("tensors", ctypes.POINTER(_TensorDesc)), ("n_tensors", ctypes.c_size_t),
                ("params", ctypes.POINTER(_ParamDesc)), ("n_params", ctypes.c_size_t),
                ("default_preset", ctypes.c_int), ("init", _INIT), ("infer", _INFER),
                ("output_shapes", _SHAPES), ("call", _CALL), ("variant_of", ctypes.c_char_p),
                ("prepare", _PREPARE), ("prepared_offset", ctypes.c_size_t)]


def _fn(name, res, *args):
    f = getattr(_lib, name)
    f.restype, f.argtypes = res, list(args)
    return f


_op_count = _fn("dsops_op_count", ctypes.c_size_t)
_op_at = _fn("dsops_op_at", ctypes.POINTER(_OpDesc), ctypes.c_size_t)
_preset_spellings = _fn("dsops_preset_spellings", ctypes.POINTER(_EnumValue))
_status_name = _fn("dsops_status_name", ctypes.c_char_p, ctypes.c_int)
_last_error = _fn("dsops_last_error", ctypes.c_char_p)
_ctx_create = _fn("dsops_context_create", ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
_ctx_destroy = _fn("dsops_context_destroy", None, ctypes.c_void_p)
_ctx_set_threads = _fn("dsops_context_set_threads", ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_ctx_threads = _fn("dsops_context_threads", ctypes.c_int, ctypes.c_void_p)
_ctx_set_isa = _fn("dsops_context_set_isa", ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_ctx_set_scratch_limit = _fn("dsops_context_set_scratch_limit", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)
_ctx_scratch_limit = _fn("dsops_context_scratch_limit", ctypes.c_size_t, ctypes.c_void_p)
_isa_from_name = _fn("dsops_isa_from_name", ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int))
_version = _fn("dsops_version", ctypes.c_char_p)
_prepared_destroy = _fn("dsops_prepared_destroy", None, ctypes.c_void_p)
_hadamard = _fn("dsops_hadamard_matrix", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Tensor))

__version__ = _version().decode()


# ---- errors -------------------------------------------------------------------------------------------------

class Error(Exception):
    """A call the library refused: .status is its status name, the message is the library's."""
    status = "DSOPS_ERR"


class NullError(Error): status = "DSOPS_ERR_NULL"            # noqa: E701
class ShapeError(Error): status = "DSOPS_ERR_SHAPE"          # noqa: E701
class DtypeError(Error): status = "DSOPS_ERR_DTYPE"          # noqa: E701
class ParamError(Error): status = "DSOPS_ERR_PARAM"          # noqa: E701
class IndexError(Error): status = "DSOPS_ERR_INDEX"          # noqa: E701,A001
class AliasError(Error): status = "DSOPS_ERR_ALIAS"          # noqa: E701
class NoMemError(Error): status = "DSOPS_ERR_NOMEM"          # noqa: E701
class UnsupportedError(Error): status = "DSOPS_ERR_UNSUPPORTED"  # noqa: E701
class BusyError(Error): status = "DSOPS_ERR_BUSY"            # noqa: E701


_ERRORS = {1: NullError, 2: ShapeError, 3: DtypeError, 4: ParamError, 5: IndexError, 6: AliasError,
           7: NoMemError, 8: UnsupportedError, 9: BusyError}
__all__ += [c.__name__ for c in _ERRORS.values()]


def _raise(status, message=None):
    if message is None:
        message = (_last_error() or b"").decode(errors="replace")
    raise _ERRORS.get(status, Error)(f"{_status_name(status).decode()}: {message}")


# ---- contexts -----------------------------------------------------------------------------------------------

class Context:
    """A library context: thread count, instruction-set cap and scratch limit (bytes) for the calls made with
    it. One context serves one call at a time: a call while another thread's call holds it raises BusyError.
    The module keeps one per thread for calls that name none."""

    def __init__(self, threads=None, isa=None, scratch_limit=None):
        h = ctypes.c_void_p()
        st = _ctx_create(ctypes.byref(h))
        if st:
            _raise(st)
        self._h = h
        if threads is not None:
            self.threads = threads
        if isa is not None:
            self.set_isa(isa)
        if scratch_limit is not None:
            self.scratch_limit = scratch_limit

    @property
    def scratch_limit(self):
        return _ctx_scratch_limit(self._h)

    @scratch_limit.setter
    def scratch_limit(self, nbytes):
        n = int(nbytes)
        if n < 0:  # c_size_t would wrap it
            raise ParamError(f"DSOPS_ERR_PARAM: scratch_limit = {n}, expected a byte count >= 1")
        st = _ctx_set_scratch_limit(self._h, n)
        if st:
            _raise(st)

    @property
    def threads(self):
        return _ctx_threads(self._h)

    @threads.setter
    def threads(self, n):
        st = _ctx_set_threads(self._h, int(n))
        if st:
            _raise(st)

    def set_isa(self, name):
        v = ctypes.c_int()
        st = _isa_from_name(str(name).encode(), ctypes.byref(v))
        if st == 0:
            st = _ctx_set_isa(self._h, v.value)
        if st:
            _raise(st)

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _ctx_destroy(h)


_local = threading.local()


def _context(threads, isa):
    if threads is None and isa is None:
        if not hasattr(_local, "ctx"):
            _local.ctx = Context()
        return _local.ctx
    return Context(threads, isa)


# ---- arrays <-> dsops_tensor --------------------------------------------------------------------------------

_NP_CODES = {np.dtype(np.float32): FP32, np.dtype(np.float16): FP16, np.dtype(np.int8): INT8,
             np.dtype(np.int32): INT32, np.dtype(np.int64): INT64, np.dtype(np.uint8): UINT8}
if bfloat16 is not None:
    _NP_CODES[bfloat16] = BF16
    _NP_CODES[float8_e4m3fn] = FP8_E4M3


def _np_dtype(code):
    for k, v in _NP_CODES.items():
        if v == code:
            return k
    raise DtypeError(f"DSOPS_ERR_DTYPE: no NumPy dtype for dsops dtype {code} (install ml_dtypes for bf16)")


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


def _torch_codes():
    import torch
    codes = {torch.float32: FP32, torch.float16: FP16, torch.bfloat16: BF16, torch.int8: INT8, torch.int32: INT32,
             torch.int64: INT64, torch.uint8: UINT8}
    if hasattr(torch, "float8_e4m3fn"):  # torch >= 2.1
        codes[torch.float8_e4m3fn] = FP8_E4M3
    return codes


def _row_major(shape):
    strides, n = [], 1
    for e in reversed(shape):
        strides.append(n)
        n *= max(int(e), 1)
    return tuple(reversed(strides))


def _view(name, x, writable):
    """(tensor struct fields, the object that keeps the memory alive) for an array or torch tensor. An empty
    array's strides carry no meaning (NumPy gives them all 0): it is described row-major."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise DtypeError(f"DSOPS_ERR_DTYPE: {name} is on {x.device}; dsops runs on CPU tensors")
        code = _torch_codes().get(x.dtype)
        if code is None:
            raise DtypeError(f"DSOPS_ERR_DTYPE: {name} has torch dtype {x.dtype}, which dsops has no type for")
        shape, strides, ptr = tuple(x.shape), tuple(x.stride()), x.data_ptr()
        if x.numel() == 0:
            strides = _row_major(shape)
        return code, shape, strides, ptr, x
    a = x if isinstance(x, np.ndarray) else np.asarray(x)
    code = _NP_CODES.get(a.dtype)
    if code is None:
        raise DtypeError(f"DSOPS_ERR_DTYPE: {name} has dtype {a.dtype}, which dsops has no type for")
    size = a.dtype.itemsize
    if a.size == 0:
        return code, a.shape, _row_major(a.shape), a.ctypes.data, a
    if any(s < 0 or s % size for s in a.strides):
        if writable:  # a copy would lose the in-place update
            raise ShapeError(f"DSOPS_ERR_SHAPE: {name} has strides {a.strides} (bytes) that are negative or not "
                             f"a multiple of its element size; pass a view with non-negative element strides")
        a = np.ascontiguousarray(a)
    if writable and not a.flags.writeable:
        raise ParamError(f"DSOPS_ERR_PARAM: {name} is read-only but the operator writes it")
    strides = tuple(s // size for s in a.strides)
    return code, a.shape, strides, a.ctypes.data, a


def _fill(t, code, shape, strides, ptr):
    if len(shape) > MAX_DIMS:
        raise ShapeError(f"DSOPS_ERR_SHAPE: rank {len(shape)} exceeds {MAX_DIMS}")
    t.data, t.dtype, t.ndim = ptr, code, len(shape)
    for i, (n, s) in enumerate(zip(shape, strides)):
        t.shape[i], t.stride[i] = n, s


# ---- operators ----------------------------------------------------------------------------------------------

def _spellings(p):
    out, i = {}, 0
    while p and p[i].spelling:
        out[p[i].spelling.decode()] = p[i].value
        i += 1
    return out


_PRESETS = _spellings(_preset_spellings())
PRESET_V32, PRESET_V4_FLASH, PRESET_V4_PRO = (_PRESETS[k] for k in ("v32", "v4_flash", "v4_pro"))


class Prepared:
    """Weights packed once by an operator's prepare(); pass it as `prepared=` to calls with the same weight
    arrays (it keeps them alive; the library checks a call's weights are the ones it packed)."""

    def __init__(self, op, handle, keep):
        self.operator, self._h, self._keep = op, handle, keep

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _prepared_destroy(h)


class _Operator:
    def __init__(self, desc):
        d = desc.contents
        self._d = d
        self.name = d.name.decode()
        self.tensors = [(d.tensors[i].name.decode(), d.tensors[i].offset, d.tensors[i].role)
                        for i in range(d.n_tensors)]
        self.params = [(d.params[i].name.decode(), d.params[i].type, d.params[i].offset, d.params[i].size,
                        _spellings(d.params[i].spellings) if d.params[i].spellings else None,
                        bool(d.params[i].required)) for i in range(d.n_params)]
        notes = [f"{n} ({('in', 'in, optional', 'in-out', 'in-out, optional', 'out', 'out, optional')[r]})"
                 for n, _, r in self.tensors]
        self.__doc__ = (f"dsops.{self.name}: tensors {', '.join(notes)}; parameters "
                        f"{', '.join(p[0] for p in self.params) or 'none'}; preset, threads, isa, context.")

    def _set_param(self, rec, name, ptype, off, size, spell, value):
        if ptype == PARAM_ENUM and isinstance(value, str):
            if value not in spell:
                raise ParamError(f"DSOPS_ERR_PARAM: {name} = {value!r}; expected one of {', '.join(spell)}")
            value = spell[value]
        ctype = {PARAM_FLOAT: ctypes.c_float, PARAM_DOUBLE: ctypes.c_double}.get(ptype)
        if ctype is None:
            ctype = ctypes.c_int64 if size == 8 else ctypes.c_int32
            value = int(value)
        ctype.from_buffer(rec, off).value = value

    def _record(self, preset, kw, outputs):
        """The call record with the preset's defaults, then the caller's tensors and parameters; returns the
        record, the objects that keep its memory alive, whether torch tensors came in, and the given flags."""
        d = self._d
        rec = (ctypes.c_char * d.args_size)()
        if isinstance(preset, str):
            if preset not in _PRESETS:
                raise ParamError(f"DSOPS_ERR_PARAM: preset = {preset!r}; expected one of {', '.join(_PRESETS)}")
            preset = _PRESETS[preset]
        st = d.init(ctypes.addressof(rec), d.default_preset if preset is None else int(preset))
        if st:
            _raise(st)
        names = {t[0] for t in self.tensors} | {p[0] for p in self.params}
        if d.prepare:
            names.add("prepared")
        unknown = sorted(set(kw) - names)
        if unknown:
            raise TypeError(f"dsops.{self.name}: no argument {', '.join(unknown)}; it takes {', '.join(sorted(names))}")
        keep, torch_io = [], False
        for name, off, role in self.tensors:
            x = kw.get(name)
            if x is None or (role >= ARG_OUT and not outputs):
                continue
            torch_io |= _is_torch(x)
            code, shape, strides, ptr, obj = _view(name, x, role >= ARG_INOUT)
            keep.append(obj)
            _fill(_Tensor.from_buffer(rec, off), code, shape, strides, ptr)
        given = (ctypes.c_bool * max(1, len(self.params)))()
        for i, (name, ptype, off, size, spell, _req) in enumerate(self.params):
            if name in kw:
                self._set_param(rec, name, ptype, off, size, spell, kw[name])
                given[i] = True
        missing = [p[0] for i, p in enumerate(self.params) if p[5] and not given[i]]
        if missing:
            raise TypeError(f"dsops.{self.name}: {', '.join(missing)} is required")
        if d.infer:
            d.infer(ctypes.addressof(rec), given)
        p = kw.get("prepared")
        if p is not None:
            if not isinstance(p, Prepared) or p.operator is not self:
                raise ParamError(f"DSOPS_ERR_PARAM: prepared must come from dsops.{self.name}.prepare")
            ctypes.c_void_p.from_buffer(rec, d.prepared_offset).value = p._h.value
            keep.append(p)
        return rec, keep, torch_io

    def prepare(self, *, preset=None, context=None, **kw):
        """Packs the weights among kw once (the other arguments as for a call; outputs are not needed)."""
        d = self._d
        if not d.prepare:
            raise TypeError(f"dsops.{self.name} has no weights to prepare")
        rec, keep, _ = self._record(preset, kw, outputs=False)
        h = ctypes.c_void_p()
        ctx = context if context is not None else _context(None, None)
        st = d.prepare(ctx._h, ctypes.addressof(rec), ctypes.byref(h))
        if st:
            _raise(st)
        return Prepared(self, h, keep)

    def __call__(self, *, preset=None, threads=None, isa=None, context=None, **kw):
        d = self._d
        rec, keep, torch_io = self._record(preset, kw, outputs=True)
        # every output's dtype and shape from the inputs (this may also settle parameters in the record); the
        # outputs the caller gave replace the described ones, the others are allocated
        msg = ctypes.create_string_buffer(512)
        st = d.output_shapes(ctypes.addressof(rec), msg, len(msg))
        if st:
            _raise(st, msg.value.decode(errors="replace"))
        results = {}
        for name, off, role in self.tensors:
            if role < ARG_OUT:
                if role >= ARG_INOUT and name in kw:
                    results[name] = kw[name]
                continue
            t = _Tensor.from_buffer(rec, off)
            if name in kw and kw[name] is not None:
                code, shp, strides, ptr, obj = _view(name, kw[name], True)
                keep.append(obj)
                _fill(t, code, shp, strides, ptr)
                results[name] = kw[name]
                continue
            if t.dtype == DTYPE_INVALID:
                continue  # an output this variant does not have
            shape = tuple(t.shape[i] for i in range(t.ndim))
            if torch_io:
                import torch
                codes = {v: k for k, v in _torch_codes().items()}
                out = torch.empty(shape, dtype=codes[t.dtype])
            else:
                out = np.empty(shape, dtype=_np_dtype(t.dtype))
            code, shp, strides, ptr, obj = _view(name, out, True)
            keep.append(obj)
            _fill(_Tensor.from_buffer(rec, off), code, shp, strides, ptr)
            results[name] = out
        ctx = context if context is not None else _context(threads, isa)
        st = d.call(ctx._h, ctypes.addressof(rec))
        if st:
            _raise(st)
        return results


def hadamard_matrix(d, dtype=np.float32, context=None):
    """The normalised [d, d] Sylvester Hadamard matrix (d a power of two) as fp32 or bf16 (§2.6)."""
    m = np.empty((d, d), np.dtype(dtype))
    t = _Tensor()
    code, shape, strides, ptr, _ = _view("m", m, True)
    _fill(t, code, shape, strides, ptr)
    st = _hadamard((context or _context(None, None))._h, ctypes.byref(t))
    if st:
        _raise(st)
    return m


__all__ += ["hadamard_matrix", "Prepared"]

operators = {}
for _i in range(_op_count()):
    _op = _Operator(_op_at(_i))
    operators[_op.name] = _op
    globals()[_op.name] = _op
__all__ += sorted(operators)
