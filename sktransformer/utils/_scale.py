"""Values whose squared distances would overflow, or (fitting) underflow: a clear error
instead of a silent NaN or a meaningless fit."""

import numpy as np
import scipy.sparse as sp
import torch

from ._arrays import numpy_dtype
from ._device import share

# NumPy arrays of at most this many values take numpy's min and max: torch's aminmax runs
# on its thread pool from 32,768 values, and waking the pool between fits cost more than
# the pass (0.13 ms a call in a grid search over k on digits, against 0.02 for numpy's)
_NUMPY_MAX = 1 << 17


def check_squared_scale(X, *, name="X", fit=False, n_samples=None):
    """Raise ``ValueError`` when sums of squared differences of X's rows may overflow, or
    with ``fit``, when even the largest value's square underflows.

    X may be a numpy array, a scipy sparse matrix or a tensor (checked where it lives).
    The circuits sum ``n_samples * n_features`` squared differences of values at most
    ``2 max|X|`` apart (inertia, distances, attention scores) in X's dtype. Where that bound
    passes the dtype's largest finite number the result would be ``inf`` or ``NaN``; where
    the largest square is below the dtype's smallest normal number (float32 data of about
    1e-20 and less), every distance is rounding, and a fit on them (a bandwidth, centers,
    neighbours) means nothing. The error names the scale and the fix. X is validated
    (finite, float). Data to predict may be that small: the fit's scale holds for them.
    """
    # the largest magnitude from the extremes: no temporary of X's size
    values = X.data if sp.issparse(X) else X
    if (not isinstance(values, torch.Tensor) and values.size > _NUMPY_MAX
            and values.dtype.kind == "f" and values.dtype.isnative
            and min(values.strides, default=0) >= 0):
        values = share(values)  # (one pass for both extremes: 1.5 against 3.8 ms for
        # numpy's min and max of 10^6 x 16 float32 values)
    if isinstance(values, torch.Tensor):
        if values.numel() == 0:
            return
        low, high = torch.aminmax(values)
        largest, dtype = max(-float(low), float(high)), numpy_dtype(X)
    else:
        if values.size == 0:
            return
        largest, dtype = max(-float(values.min()), float(values.max())), X.dtype
    error = squared_scale_error(largest, X.shape[0] if n_samples is None else n_samples,
                                X.shape[-1], dtype, name=name, underflow=fit)
    if error:
        raise ValueError(f"{error} The largest magnitude is in row {_row_of_largest(X)}.")


def _row_of_largest(X):
    """The row of X's entry of largest magnitude (X 2-D: numpy, CSR or a tensor)."""
    if sp.issparse(X):
        X = X.tocsr()
        return int(np.searchsorted(X.indptr, np.argmax(np.abs(X.data)), side="right") - 1)
    if isinstance(X, torch.Tensor):
        return int(torch.argmax(X.abs().reshape(-1))) // max(1, X.shape[-1])
    return int(np.argmax(np.abs(X))) // max(1, X.shape[-1])


def squared_scale_error(largest, n_samples, n_features, dtype, *, name="X",
                        underflow=False):
    """The message of :func:`check_squared_scale` for data of largest magnitude ``largest``
    (``underflow``: for a fit), or ``None`` when its squared distances can neither overflow
    nor underflow (for data seen by blocks)."""
    dtype = np.dtype(dtype)
    fix = "pass float64 or rescale X" if dtype == np.float32 else "rescale X"
    tiny = float(np.finfo(dtype).tiny)
    if underflow and 0 < largest and largest * largest < tiny:
        return (f"{name} has values of magnitude at most {largest:.3g}: their squares "
                f"underflow {dtype} (smallest normal {tiny:.3g}), so every distance "
                f"between them is rounding; {fix}, e.g. with "
                f"sklearn.preprocessing.StandardScaler.")
    limit = float(np.finfo(dtype).max)
    bound = 4.0 * largest * largest * n_samples * max(1, n_features)
    if bound <= limit:  # False for inf and nan too
        return None
    return (f"{name} has values up to {largest:.3g}: sums of their squared differences "
            f"overflow {dtype} (largest finite {limit:.3g}); {fix}, e.g. with "
            f"sklearn.preprocessing.StandardScaler.")
