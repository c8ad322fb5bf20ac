"""The mixture behind hard k-means' score: elliptical clusters with fitted tails.

Hard k-means' own limit is a mixture of round Gaussians of one spread each. Its held-out
likelihood selects k where the clusters are such blobs, but keeps rising with k where they
are not: an elongated, heavy-tailed or flat cluster is better fitted by several round ones.
The mixture here is fitted to the same partition (the circuit's labels) and is rich enough
to fit one cluster with one component:

* each cluster's **covariance** from its members, full where it is small enough
  (``FULL_MAX_FEATURES``, ``FULL_MAX_ENTRIES``), else diagonal: each feature's variance
  (shrunk towards the pooled within-cluster variance by one pseudo-member, so a singleton
  is not a point mass) and the correlations shrunk towards none by Ledoit and Wolf's
  intensity (2004), at least ``d / (members + d)``;
* one **radial profile** for all clusters, matched to those covariances and chosen by the
  training likelihood among Gaussian, Student-t (heavy tails, ``NU``) and power-exponential
  (flat tops, light tails, ``BETA``) densities;
* with one cluster, a **uniform density over the data's box** beside the component, its
  weight fitted by EM: data without clusters (uniform or not) are then fitted by the
  one-cluster model as well as by any number of clusters, so a grid that includes
  ``n_clusters=1`` can select it.

Functions take and return NumPy float64 arrays.
"""

import numpy as np
from scipy.special import gammaln

from ._likelihood import log_sum_exp

# the covariances are full up to this many features and k d^2 entries, else diagonal: wider
# clusters seldom have the members for d^2 / 2 correlations, and their products outweigh
# the fit
FULL_MAX_FEATURES = 32
FULL_MAX_ENTRIES = 1 << 22
# Student-t degrees of freedom and power-exponential powers tried for the radial profile
NU = (2.5, 3.0, 4.0, 6.0, 10.0, 30.0)
BETA = (1.5, 2.0, 3.0, 5.0)
PROFILES = (("gaussian", 0.0),) + tuple(("t", v) for v in NU) + tuple(
    ("power", b) for b in BETA)
# a cluster's feature variances are shrunk towards the pooled ones by this many members
PRIOR_WEIGHT = 1.0
_ROWS = 4096  # rows scored at a time
_EM_STEPS = 50


def _profile(family, shape, d):
    """``(log normalizer, c)`` of a radial profile whose covariance is the unit matrix:
    its log-density is ``log normalizer - log|Sigma| / 2 + core(c * M)`` for the squared
    Mahalanobis distance ``M`` under the covariance ``Sigma``."""
    if family == "gaussian":
        return -0.5 * d * np.log(2 * np.pi), 1.0
    if family == "t":  # scale matrix Sigma (nu - 2) / nu
        c = shape / (shape - 2)
        return (gammaln((shape + d) / 2) - gammaln(shape / 2) - 0.5 * d * np.log(shape * np.pi)
                + 0.5 * d * np.log(c)), c
    # power exponential exp(-(x' S^-1 x)^beta / 2), Gomez et al. (1998): its covariance is
    # c S with c = 2^(1/beta) Gamma((d + 2) / (2 beta)) / (d Gamma(d / (2 beta)))
    half = d / (2 * shape)
    c = 2 ** (1 / shape) * np.exp(gammaln(half + 1 / shape) - gammaln(half)) / d
    return (np.log(d) + gammaln(d / 2) - 0.5 * d * np.log(np.pi) - gammaln(1 + half)
            - (1 + half) * np.log(2) + 0.5 * d * np.log(c)), c


def _core(family, shape, d, scaled):
    if family == "gaussian":
        return -0.5 * scaled
    if family == "t":
        return -0.5 * (shape + d) * np.log1p(scaled / shape)
    return -0.5 * np.power(scaled, shape)


def component_log_density(family, shape, d, mahalanobis, log_det):
    """Log-density of each component at squared Mahalanobis distances ``mahalanobis``
    (n, k), for components of log-determinants ``log_det`` (k,)."""
    log_norm, c = _profile(family, shape, d)
    return log_norm - 0.5 * log_det + _core(family, shape, d, c * mahalanobis)


def _ledoit_wolf(S, fourth, weight, d):
    """Ledoit-Wolf's shrinkage of each cluster's weighted second moments ``S`` (k, d, d)
    towards their mean diagonal (``sklearn.covariance.ledoit_wolf_shrinkage`` with frequency
    weights), from the weighted sums ``fourth`` of the members' ``||z||^4`` and the
    clusters' ``weight``; 1 where it is undefined."""
    trace = np.einsum("kaa->k", S)
    mu = trace / d
    frob = np.square(S).sum((1, 2))
    total = np.maximum(weight, np.finfo(np.float64).tiny)
    beta = (fourth / total - frob) / (d * total)
    delta = (frob - 2 * mu * trace + d * mu * mu) / d
    with np.errstate(divide="ignore", invalid="ignore"):
        shrinkage = np.clip(beta / delta, 0.0, 1.0)
    return np.where((delta > 0) & (weight > 1), shrinkage, 1.0)


def _segment_sums(values, bounds, w=None):
    """Sums of ``values`` (rows sorted by cluster; weighted by ``w``) over each cluster's
    slice ``bounds[j]:bounds[j + 1]`` (empty slices: 0)."""
    out = np.zeros((len(bounds) - 1,) + values.shape[1:])
    filled = np.flatnonzero(bounds[1:] > bounds[:-1])
    if len(filled):
        out[filled] = np.add.reduceat(values if w is None else values * w[:, None],
                                      bounds[filled], axis=0)
    return out


class EllipticalMixture:
    """A mixture of elliptical components fitted to a hard partition.

    Parameters
    ----------
    covariance_type : {"full", "diag"}

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
    means_ : ndarray of shape (n_components, n_features)
    covariances_ : ndarray of shape (n_components, n_features, n_features) or
        (n_components, n_features)
    profile_ : tuple of (str, float)
        ``("gaussian", 0)``, ``("t", degrees of freedom)`` or ``("power", beta)``.
    background_weight_ : float
        Weight of the uniform density over ``box_`` (0 but with one component).
    box_ : ndarray of shape (2, n_features)
    """

    def __init__(self, covariance_type="full"):
        self.covariance_type = covariance_type

    def fit(self, X, labels, n_components, sample_weight=None):
        """Fit to X's partition ``labels`` (in ``0..n_components - 1``)."""
        X = np.asarray(X, dtype=np.float64)
        n, d = X.shape
        k = n_components
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
        # the rows sorted by label (each cluster's members are one slice), about their
        # weighted mean (the sums then carry no more than the clusters' spread)
        order = np.argsort(labels, kind="stable")
        labels, w = labels[order], w[order]
        bounds = np.searchsorted(labels, np.arange(k + 1))
        weight = np.bincount(labels, weights=w, minlength=k)
        origin = w @ X / w.sum()
        X = X[order] - origin
        safe = np.maximum(weight, np.finfo(np.float64).tiny)[:, None]
        unit = sample_weight is None
        means = _segment_sums(X, bounds, None if unit else w) / safe
        residual = X - means[labels]
        own = _segment_sums(np.square(residual), bounds, None if unit else w)
        self.weights_ = weight / weight.sum()
        self.means_ = means + origin
        pooled = own.sum(0) / weight.sum()
        # (no variance below 1e-9 of its feature's, nor 1e-12 of the data's squared scale:
        # a feature constant in a cluster, or in all of X, gives a finite density)
        spread = pooled + self.weights_ @ np.square(means - self.weights_ @ means)
        floor = np.maximum(1e-9 * spread, max(1e-12 * spread.sum(), np.finfo(np.float64).tiny))
        variances = np.maximum((own + PRIOR_WEIGHT * pooled) / (weight + PRIOR_WEIGHT)[:, None],
                               floor)
        if self.covariance_type == "diag":
            self.covariances_ = variances
        else:
            sd = np.sqrt(variances)
            Z = residual / sd[labels]
            S = np.zeros((k, d, d))
            for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
                if b > a:
                    S[j] = (Z[a:b] if unit else Z[a:b] * w[a:b, None]).T @ Z[a:b]
            S /= safe[:, :, None]
            fourth = np.bincount(labels, weights=w * np.square(np.square(Z).sum(1)),
                                 minlength=k)
            # (at least d / (members + d): fewer members than features leave the
            # correlations singular)
            keep = 1 - np.maximum(_ledoit_wolf(S, fourth, weight, d),
                                  d / (np.diff(bounds) + d))
            norm = np.sqrt(np.maximum(np.einsum("kaa->ka", S), np.finfo(np.float64).tiny))
            S *= (keep[:, None] / norm)[:, :, None] / norm[:, None, :]
            S[:, np.arange(d), np.arange(d)] = 1.0
            self.covariances_ = S * sd[:, :, None] * sd[:, None, :]
        self._factor()
        # the radial profile: by the training likelihood of each point in its own cluster
        own_m = np.empty(n)
        for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            if self.covariance_type == "diag":
                own_m[a:b] = np.square(residual[a:b] * self._inv[j]).sum(1)
            else:
                own_m[a:b] = np.square(residual[a:b] @ self._inv[j].T).sum(1)
        log_det = self._log_det[labels]
        best = None
        for family in ("gaussian", "t", "power"):
            shapes = np.array([v for f, v in PROFILES if f == family])[:, None]
            ll = np.broadcast_to(component_log_density(family, shapes, d, own_m, log_det),
                                 (len(shapes), n))
            i = int(np.argmax(ll @ w))
            if best is None or ll[i] @ w > best[0]:
                best = ll[i] @ w, (family, float(shapes[i, 0])), ll[i]
        self.profile_ = best[1]
        self.box_ = np.zeros((2, d))
        self.background_weight_ = 0.0
        if k == 1:
            self._fit_background(X + origin, w, best[2])
        return self

    def _factor(self):
        """Inverse Cholesky factors (full) or inverse deviations (diag), log-determinants."""
        self._origin = self.weights_ @ self.means_
        if self.covariance_type == "diag":
            self._inv = 1.0 / np.sqrt(self.covariances_)
            self._log_det = np.log(self.covariances_).sum(1)
            return
        L = np.linalg.cholesky(self.covariances_)
        eye = np.broadcast_to(np.eye(L.shape[1]), L.shape)
        self._inv = np.linalg.solve(L, eye)  # (L^-1: M = ||L^-1 (x - m)||^2)
        self._log_det = 2 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(1)

    def _mahalanobis(self, X):
        """Squared Mahalanobis distances of X to every component, (n, k)."""
        k, d = self.means_.shape
        X = X - self._origin  # (about the means' centroid: no cancellation of what the
        # rows share)
        if self.covariance_type == "diag":
            precision = np.square(self._inv)
            centered = self.means_ - self._origin
            M = np.square(X) @ precision.T - 2 * X @ (centered * precision).T
            M += (np.square(centered) * precision).sum(1)
            return np.maximum(M, 0.0)
        # one product for every component
        stacked = self._inv.transpose(2, 0, 1).reshape(d, k * d)  # (x L_j^-T for each j)
        shift = np.einsum("kij,kj->ki", self._inv, self.means_ - self._origin).reshape(k * d)
        Z = X @ stacked - shift
        return np.square(Z).reshape(len(X), k, d).sum(2)

    def _fit_background(self, X, w, component_ll):
        """The uniform density over X's box (padded by a range over the row count each
        side), its weight fitted by EM beside the fixed component."""
        low, high = X.min(0), X.max(0)
        span = high - low
        if np.any(span <= 0):
            return  # (a constant feature: no box of positive volume)
        pad = span / len(X)
        self.box_ = np.stack([low - pad, high + pad])
        log_box = -np.log(span + 2 * pad).sum()
        eps = 0.05
        for _ in range(_EM_STEPS):
            a = component_ll + np.log1p(-eps)
            b = np.log(eps) + log_box
            eps = float(np.clip(w @ np.exp(b - np.logaddexp(a, b)) / w.sum(), 1e-4, 0.99))
        self.background_weight_ = eps

    def score_samples(self, X):
        """Log-likelihood of each row of X (by chunks of rows)."""
        X = np.asarray(X, dtype=np.float64)
        out = np.empty(len(X))
        d = X.shape[1]
        family, shape = self.profile_
        log_w = np.log(np.maximum(self.weights_, np.finfo(np.float64).tiny))
        rows = max(1, _ROWS // max(1, len(self.weights_) * d // 256))
        for start in range(0, len(X), rows):
            x = X[start:start + rows]
            terms = log_w + component_log_density(family, shape, d, self._mahalanobis(x),
                                                  self._log_det)
            ll = log_sum_exp(terms)
            eps = self.background_weight_
            if eps > 0:
                low, high = self.box_
                inside = np.all((x >= low) & (x <= high), axis=1)
                with np.errstate(divide="ignore"):
                    box = np.where(inside, np.log(eps) - np.log(high - low).sum(), -np.inf)
                ll = np.logaddexp(ll + np.log1p(-eps), box)
            out[start:start + rows] = ll
        return out

    def n_parameters(self):
        """Free parameters: weights, means, covariances, the profile's shape, and the
        background's weight and box where there is one."""
        k, d = self.means_.shape
        cov = k * d * (d + 1) // 2 if self.covariance_type == "full" else k * d
        extra = (self.profile_[0] != "gaussian") + (
            1 + 2 * d if self.background_weight_ > 0 else 0)
        return k - 1 + k * d + cov + extra
