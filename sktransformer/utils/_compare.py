"""Comparisons and ``nonzero`` of CPU tensors through numpy, which shares their memory.

torch's CPU kernels for these are slow on the machines we measure (torch 2.13): ``a > b``
took 47-57 us for 10^5 float32 or float64 values, numpy's 4-11 us; ``nonzero`` of a mask
with a fifth of its values set took 5 times numpy's ``flatnonzero``. The update blocks of
the clustering variants run several of these per layer over every point. On other devices,
and for dtypes numpy lacks, torch's own ops run. Inputs and outputs are tensors.
"""

import numpy as np
import torch

_NUMPY_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64, torch.bool)


def through_numpy(*tensors):
    """Whether every tensor is a CPU tensor of a dtype numpy has (and needs no grad): then
    ``t.numpy()`` shares its memory, and numpy's ops serve."""
    return all(t.device.type == "cpu" and t.dtype in _NUMPY_DTYPES and not t.requires_grad
               for t in tensors)


def greater(a, b):
    """``a > b`` (broadcasting) as a bool tensor."""
    if through_numpy(a, b):
        return torch.from_numpy(np.greater(a.numpy(), b.numpy()))
    return a > b


def flatnonzero(mask):
    """Indices (int64, 1-d) of the true values of a bool tensor, in order."""
    if through_numpy(mask):
        return torch.from_numpy(np.flatnonzero(mask.numpy()).astype(np.int64, copy=False))
    return torch.nonzero(mask.flatten()).flatten()
