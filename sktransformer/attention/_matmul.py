"""Score tiles ``a @ b.T`` on the CPU, through oneDNN where torch's BLAS leaves AVX-512 idle.

torch multiplies float32 matrices on the CPU with MKL, and MKL runs its AVX-512 kernels on
Intel processors only: on an AMD processor with AVX-512 it takes its AVX2 path, half the
peak. oneDNN, which torch also bundles (its ``mkldnn`` ops), picks its kernels by
instruction set. On the project's 2-core AMD EPYC machine a ``(256, 64) x (64, 1024)``
product ran at 164 GFLOP/s through ``torch.mm`` and 290-326 through oneDNN, with equal
results; the k-means layer and the exact kNN search score by such tiles.

So the score tiles of the clustering layer and of the exact search go through
:func:`matmul_nt`, which uses oneDNN's inner product for float32 CPU tensors that need no
gradient when the CPU has AVX-512 (where MKL's AVX2 path is the measured shortfall), and
``torch.matmul`` otherwise (float64, GPUs, autograd, other CPUs, a torch without the op,
a ``b`` that is a strided view).
"""

import functools

import torch

__all__ = ["matmul_nt", "uses_onednn"]

_ENABLED = True  # tests compare the two paths by switching this off


@functools.cache
def _onednn_linear():
    """oneDNN's float32 inner product from torch, or None where it is absent, the CPU lacks
    AVX-512, or a small product does not match ``torch.mm``."""
    try:
        if not torch.backends.mkldnn.is_available():
            return None
        if torch.backends.cpu.get_cpu_capability() != "AVX512":
            return None
        op = torch.ops.mkldnn._linear_pointwise
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(5, 7, generator=gen)
        b = torch.randn(3, 7, generator=gen)
        with torch.no_grad():
            got = op(a, b, None, "none", [], "")
        if not torch.allclose(got, a @ b.T, rtol=1e-5, atol=1e-5):
            return None
        return op
    except (AttributeError, RuntimeError):
        return None


def uses_onednn(a, b):
    """Whether :func:`matmul_nt` sends ``a @ b.T`` to oneDNN."""
    return (_ENABLED and a.device.type == "cpu" and b.device.type == "cpu"
            and a.dtype == torch.float32 and b.dtype == torch.float32
            and a.dim() >= 2 and b.dim() == 2 and a.stride(-1) == 1
            and (b.is_contiguous() or b.t().is_contiguous())
            and not (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad))
            and _onednn_linear() is not None)


def matmul_nt(a, b, out=None, *, onednn=True):
    """``a @ b.T`` for ``a (..., m, d)`` and ``b (..., n, d)``: shape ``(..., m, n)``.

    The product of ``torch.matmul``, which computes it for batched shapes, gradients, other
    dtypes and devices (into ``out`` when given, a buffer to reuse); float32 CPU tensors
    without gradient, ``b`` 2-D (``a`` with contiguous rows, ``b`` with contiguous rows or
    columns), go through oneDNN on AVX-512 processors, into a new tensor, unless
    ``onednn=False``. A ``b`` whose rows are a strided view (the heads of a wider
    projection) keeps ``torch.matmul``: oneDNN takes such a ``(1024, 32)`` view hundreds of
    times longer than the contiguous copy.
    """
    if onednn and uses_onednn(a, b):
        return _onednn_linear()(a, b, None, "none", [], "")
    return torch.matmul(a, b.transpose(-1, -2), out=out)
