"""Values whose squared distances would overflow: a clear error instead of a silent NaN."""

import numpy as np


def check_squared_scale(X, *, name="X"):
    """Raise ``ValueError`` when sums of squared differences of X's rows may overflow.

    The circuits sum ``n_samples * n_features`` squared differences of values at most
    ``2 max|X|`` apart (inertia, distances, attention scores) in X's dtype. Where that bound
    passes the dtype's largest finite number the result would be ``inf`` or ``NaN``: the
    error names the scale and the fix. X is validated (finite, float).
    """
    if X.size == 0:
        return
    limit = float(np.finfo(X.dtype).max)
    largest = float(np.max(np.abs(X)))
    bound = 4.0 * largest * largest * X.shape[0] * max(1, X.shape[-1])
    if not bound <= limit:  # also catches inf and nan
        fix = "pass float64 or rescale X" if X.dtype == np.float32 else "rescale X"
        raise ValueError(
            f"{name} has values up to {largest:.3g}: sums of their squared differences "
            f"overflow {X.dtype} (largest finite {limit:.3g}); {fix}, e.g. with "
            f"sklearn.preprocessing.StandardScaler.")
