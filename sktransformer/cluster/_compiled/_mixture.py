"""The fitted mixture's log-likelihood of dense rows in one compiled pass: ``score``.

Each row's distances to the k centers, its k terms ``bias_j - slope_j * cost_j`` and their
log-sum-exp, without the ``(n, k)`` distance and term arrays the torch pass builds and
hands to NumPy. The distances are the differences' squares summed directly (no
``||x||^2 + ||c||^2 - 2 x.c`` cancellation), in float64 whatever X's dtype.
"""

import numpy as np
from numba import njit, prange

from ._lloyd import CACHE, _split, prange_only


@njit(parallel=prange_only(), nogil=True, cache=CACHE, fastmath={"reassoc", "contract"})
def log_likelihoods(X, centers, bias, slope, root, n_threads):
    """Per row of ``X``: ``log sum_j exp(bias_j - slope_j * cost_j)``, ``cost_j`` the
    squared distance to ``centers[j]`` (its square root with ``root``); ``-inf`` where
    every term is. ``reassoc``: each distance's sum is vectorized."""
    n, d = X.shape
    k = centers.shape[0]
    C = centers.astype(np.float64)
    out = np.empty(n)
    for t in prange(n_threads):
        start, stop = _split(n, t, n_threads)
        terms = np.empty(k)
        for i in range(start, stop):
            top = -np.inf
            for j in range(k):
                acc = 0.0
                for c in range(d):
                    diff = X[i, c] - C[j, c]
                    acc += diff * diff
                term = bias[j] - slope[j] * (np.sqrt(acc) if root else acc)
                terms[j] = term
                top = max(top, term)
            if top == -np.inf:
                out[i] = top
                continue
            total = 0.0
            for j in range(k):
                total += np.exp(terms[j] - top)
            out[i] = np.log(total) + top
    return out
