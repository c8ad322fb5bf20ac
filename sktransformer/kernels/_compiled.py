"""The default dynamics compiled: steps of the ``"rff"`` particles on the normalized alignment.

A step on a few hundred rows is ~60 small torch calls (features, the alignment's
gradient, its pull-back, the repulsion, the move and the ball), each a few microseconds
of dispatch that outweigh their products: on 755 rows and 64 particles, 0.75 ms a step,
0.34 ms compiled. numba runs a block of steps (those between two validations) in one
call, the same closed forms as :func:`~sktransformer.kernels._hamiltonian.potential`
with the same dtypes (the features in X's, the repulsion in float64), so the steps are
the torch steps' up to rounding (``tests/kernels/test_compiled.py``). It serves the full
batch without noise (``batch_size`` at least the rows, ``beta = inf``: the defaults on
small data); minibatches and noise draw from a torch generator each step, and run the
torch steps. The loop itself is in :mod:`._loops`.
"""

import math

import torch

from ..utils import CompiledLoops, one_blas_thread


def _build(numba, cache):
    from . import _loops  # (numba imported, the loops cached on disk where it can)

    return {"rff_steps": _loops.rff_steps}


_LOOPS = CompiledLoops(_build, "numba's particle steps", "torch's steps")


def rff_steps(X, Y, b, *, scale, step_size, radius, repulsion, s, eps):
    """A function ``steps(U, count, move_last, first)`` running the default dynamics compiled
    (see the module), for :func:`~sktransformer.kernels._langevin.langevin`, or None where
    it cannot run (not CPU tensors, not float32/64, or no compiled loops). ``scale`` is
    read at every block (a bandwidth that validation moves)."""
    if X.device.type != "cpu" or X.dtype not in (torch.float32, torch.float64):
        return None
    loops = _LOOPS.get()
    if loops is None:
        return None
    n = X.shape[0]
    Yc = Y - Y.mean(0)
    y_norm = float((Yc.T @ Yc).norm()) / n
    X_np, Yc_np = X.contiguous().numpy(), Yc.to(X.dtype).contiguous().numpy()
    b_np = b.to(X.dtype).contiguous().numpy()
    radius = math.inf if radius is None else float(radius)

    def steps(U, count, move_last, first=0):
        with one_blas_thread():
            U, record = loops["rff_steps"](X_np, Yc_np, y_norm, b_np,
                                           U.to(X.dtype).contiguous().numpy(), float(scale()),
                                           float(step_size), radius, float(repulsion),
                                           float(s), float(eps), count, move_last)
        return torch.from_numpy(U), torch.from_numpy(record)

    return steps

