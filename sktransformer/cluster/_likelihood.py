"""The mixture model behind each clusterer, and its log-likelihood: a score that selects k.

A clustering circuit is the limit of a mixture model. Soft k-means' assignment
``softmax(-||x - c||^2 / t)`` is the posterior of an equal-weight Gaussian mixture of
variance ``t / 2``; hard k-means is the same mixture as the variances go to zero, whose
weights and per-cluster variances are estimated from the fit; spherical k-means is a von
Mises-Fisher mixture; k-medoids with the Euclidean metric, a mixture of radial Laplace
densities ``exp(-||x - m|| / b)``. Unlike the inertia, which only falls as clusters are
added, the held-out log-likelihood of that mixture peaks near the number of clusters the
data have, so ``GridSearchCV`` can select ``n_clusters`` and ``temperature`` with it.

Every component here has the form ``log p_j(x) = offset_j - slope_j * cost_j(x)``, with
``cost`` the clusterer's own per-point cost (squared distance, or distance for k-medoids):
a mixture is the three vectors ``log weight``, ``offset`` and ``slope``.
All functions take numpy arrays and return numpy float64 arrays.
"""

import numpy as np
from scipy.special import gammaln, ive

# a cluster's spread is estimated as if it had this many extra members at the pooled
# spread: a singleton (zero spread, an infinite density) takes the pooled one, a large
# cluster its own
PRIOR_WEIGHT = 1.0


def member_sums(labels, cost, sample_weight, n_clusters):
    """Each cluster's weight and summed cost over its members (``labels == -1``: none).

    Returns
    -------
    weight, cost : ndarray of shape (n_clusters,), float64
    """
    labels = np.asarray(labels).ravel()
    cost = np.asarray(cost, dtype=np.float64).ravel()
    w = None if sample_weight is None else np.asarray(sample_weight, np.float64).ravel()
    if len(labels) and labels.min() < 0:
        kept = labels >= 0
        labels, cost = labels[kept], cost[kept]
        w = None if w is None else w[kept]
    weight = np.bincount(labels, weights=w, minlength=n_clusters).astype(np.float64)
    return weight, np.bincount(labels, weights=cost if w is None else w * cost,
                               minlength=n_clusters)


def _shrunk_mean(weight, cost):
    """Each cluster's mean cost, shrunk towards the pooled mean by ``PRIOR_WEIGHT``."""
    pooled = cost.sum() / max(weight.sum(), np.finfo(np.float64).tiny)
    return (cost + PRIOR_WEIGHT * pooled) / (weight + PRIOR_WEIGHT)


def _spread_floor(values, scale):
    """Spreads no smaller than a relative ``1e-12`` of the data's ``scale`` (all points
    equal: a finite density)."""
    floor = 1e-12 * scale if scale > 0 else np.finfo(np.float64).tiny
    return np.maximum(values, floor)


def mixture_weights(weight):
    """The clusters' shares of the weight."""
    return weight / weight.sum()


def gaussian_variances(weight, cost, n_features, scale):
    """Per-cluster isotropic variances from the members' summed squared distances:
    ``sum ||x - c||^2 / (d * weight)`` (shrunk, see ``PRIOR_WEIGHT``)."""
    return _spread_floor(_shrunk_mean(weight, cost) / n_features, scale)


def gaussian(weights, variances, n_features):
    """``(log weight, offset, slope)`` of an isotropic Gaussian mixture."""
    variances = np.broadcast_to(np.asarray(variances, np.float64), weights.shape)
    offset = -0.5 * n_features * np.log(2 * np.pi * variances)
    return _log(weights), offset, 0.5 / variances


def vmf_concentrations(weight, cost, n_features):
    """Per-cluster von Mises-Fisher concentrations from the members' summed squared chord
    distances to their unit center (``||x - c||^2 = 2 - 2 x.c``): the mean resultant
    length is ``r = 1 - mean cost / 2``, and ``kappa = r (d - r^2) / (1 - r^2)``
    (Banerjee et al., 2005), shrunk as the Gaussian variances."""
    r = np.clip(1.0 - 0.5 * _shrunk_mean(weight, cost), 1e-12, 1 - 1e-12)
    return r * (n_features - r * r) / (1.0 - r * r)


def log_bessel_iv(order, x):
    """``log I_order(x)`` for ``x > 0``, finite where ``I`` over- or underflows: scipy's
    scaled ``ive``, Debye's uniform expansion where ``ive`` is 0 (large orders), and the
    large-argument expansion where order 0 fails."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore"):
        out = np.log(ive(order, x)) + x
    bad = ~np.isfinite(out)
    if np.any(bad) and order > 0:
        z = x[bad] / order
        root = np.sqrt(1 + z * z)
        eta = root + np.log(z / (1 + root))
        out[bad] = -0.5 * np.log(2 * np.pi * order) + order * eta - 0.5 * np.log(root)
    elif np.any(bad):  # order 0 (the circle), where ive fails at large x: Hankel's expansion
        out[bad] = x[bad] - 0.5 * np.log(2 * np.pi * x[bad]) + np.log1p(1 / (8 * x[bad]))
    return out


def von_mises_fisher(weights, concentrations, n_features):
    """``(log weight, offset, slope)`` of a von Mises-Fisher mixture on the unit sphere of
    ``R^d``, against squared chord distances: ``kappa x.c = kappa - kappa cost / 2``."""
    kappa = np.asarray(concentrations, dtype=np.float64)
    order = n_features / 2 - 1
    log_norm = (order * np.log(kappa) - 0.5 * n_features * np.log(2 * np.pi)
                - log_bessel_iv(order, kappa))
    return _log(weights), log_norm + kappa, 0.5 * kappa


def laplace_scales(weight, cost, n_features, scale):
    """Per-cluster scales ``b = mean distance / d`` of radial Laplace densities
    ``exp(-||x - m|| / b)`` (the maximum-likelihood scale; shrunk as the variances)."""
    return _spread_floor(_shrunk_mean(weight, cost) / n_features, scale)


def radial_laplace(weights, scales, n_features):
    """``(log weight, offset, slope)`` of a mixture of radial Laplace densities in ``R^d``,
    against distances: ``int exp(-r / b) dx = 2 pi^(d/2) Gamma(d) / Gamma(d/2) b^d``."""
    d = n_features
    log_norm = (np.log(2.0) + 0.5 * d * np.log(np.pi) + gammaln(d) - gammaln(d / 2)
                + d * np.log(scales))
    return _log(weights), -log_norm, 1.0 / scales


def _log(weights):
    with np.errstate(divide="ignore"):
        return np.log(weights)


def log_likelihood(cost, mixture):
    """Per-sample log-likelihood of ``cost`` (n_samples, n_clusters) under ``mixture``."""
    log_weight, offset, slope = mixture
    return log_sum_exp(log_weight + offset - np.asarray(cost, np.float64) * slope)


def log_sum_exp(terms):
    """``log(sum(exp(terms), axis=1))`` of a 2-D array (scipy's ``logsumexp`` spends more
    on its array-API dispatch than on a score of a few thousand rows)."""
    top = terms.max(axis=1, keepdims=True)
    top[~np.isfinite(top)] = 0  # (rows of -inf terms: -inf)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(terms - top).sum(axis=1)) + top[:, 0]
