"""Arrays in and out of the compat modules: NumPy views of CPU torch tensors without a copy, and results handed
back as the kind that came in."""
import numpy as np

import dsops


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


def _np(x):
    """A NumPy view of an array or CPU torch tensor without a copy: bf16 as dsops.bfloat16, FP8 bytes as uint8."""
    if x is None:
        return None
    if _is_torch(x):
        import torch
        if x.device.type != "cpu":
            raise ValueError(f"dsops.compat runs on CPU tensors; got one on {x.device}")
        x = x.detach()
        if x.dtype == torch.bfloat16:
            return x.view(torch.int16).numpy().view(dsops.bfloat16)
        if str(x.dtype).startswith("torch.float8"):
            return x.view(torch.uint8).numpy()
        return x.numpy()
    a = np.asarray(x)
    if a.dtype.itemsize == 1 and a.dtype.kind not in "iub":  # ml_dtypes FP8 arrays: their bytes
        return a.view(np.uint8)
    return a


def _back(a, torch_io):
    """NumPy result as the caller's kind (torch tensors when torch came in)."""
    if not torch_io:
        return a
    import torch
    if a.dtype == dsops.bfloat16:
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _i32(x):
    """An index array or tensor as contiguous int32 (a copy only when it is not that already)."""
    return np.ascontiguousarray(_np(x), dtype=np.int32)
