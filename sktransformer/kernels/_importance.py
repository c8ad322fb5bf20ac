"""The importance-sampling baseline: Sinha & Duchi (2016), "Learning kernels with random
features", the fixed-candidate method the learned particles are compared with."""

import math
from numbers import Integral, Real

import torch
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils.validation import check_is_fitted

from ..attention import features, initial_particles, sparsemax
from ..utils import (
    ArrayAPISupport,
    Interval,
    StrOptions,
    check_allocation,
    check_data,
    check_data_and_target,
    check_squared_scale,
    chunk_rows,
    fit_context,
    follows_input,
    iter_chunks,
    make_generator,
    numpy_dtype,
    output_space,
    to_numpy,
    to_tensor,
    torch_dtype,
)
from ._hamiltonian import target_codes
from ._particles import _validate_targets, resolve_gamma


def chi_square_tilt(v, rho, n_bisect=100):
    """``argmax_q q . v`` over the simplex with ``N ||q - 1/N||^2 <= rho`` (chi-square ball).

    For a multiplier ``lam`` the maximizer of ``q . v - lam N ||q - u||^2 / 2`` is the
    simplex projection (sparsemax) of ``u + v / (lam N)``; bisection on ``lam`` makes the
    constraint tight (or returns the unconstrained vertex when it fits in the ball).
    """
    N = v.numel()
    u = torch.full_like(v, 1.0 / N)

    def q_of(lam):
        return sparsemax((u + v / (lam * N)).unsqueeze(0))[0]

    def divergence(q):
        return float(N * (q - u).square().sum())

    scale = float(v.abs().max()) or 1.0
    lo, hi = 1e-12 * scale, 1e12 * scale  # small lam: far tilt; large lam: uniform
    if divergence(q_of(lo)) <= rho:
        return q_of(lo)
    for _ in range(n_bisect):
        mid = math.sqrt(lo * hi)
        if divergence(q_of(mid)) > rho:
            lo = mid
        else:
            hi = mid
    return q_of(hi)


class ImportanceSampledRFF(ArrayAPISupport, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                           BaseEstimator):
    """Random Fourier features drawn from a label-tilted distribution (Sinha & Duchi, 2016).

    Draws ``n_candidates`` RBFSampler frequencies, scores each by its alignment with the
    labels ``v_k = ||(1/n) sum_i Y_i phi(x_i; w_k)||^2``, tilts the uniform distribution
    over candidates toward high scores within a chi-square ball of radius ``rho``
    (``max q . v`` s.t. ``N ||q - 1/N||^2 <= rho``), then samples ``n_components``
    frequencies from ``q`` (with replacement) for the usual ``sqrt(2/D) cos(w.x + b)``.
    The baseline of the particle kernels: the same candidates, no moving.

    Parameters
    ----------
    n_components : int, default=64
        Output features.
    gamma : "scale" or float, default="scale"
        RBF width of the candidates: ``w ~ N(0, 2 gamma I)``; ``"scale"`` is
        ``1 / (n_features * X.var())``, as in scikit-learn's SVC.
    n_candidates : int or None, default=None
        Candidate frequencies; ``None`` is ``10 * n_components``.
    rho : float, default=1.0
        Radius of the chi-square ball around uniform (0: plain RBFSampler draws).
    random_state : int, RandomState instance or None, default=None
        Seeds a local ``torch.Generator``.

    Attributes
    ----------
    particles_ : ndarray of shape (n_components, `n_features_in_`)
        The sampled frequencies.
    offsets_ : ndarray of shape (n_components,)
    weights_ : ndarray of shape (n_candidates,)
        The tilted distribution ``q``.
    gamma_ : float
        The RBF width used (``"scale"`` resolved).
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from sktransformer.kernels import ImportanceSampledRFF
    >>> X, y = make_moons(200, noise=0.1, random_state=0)
    >>> ImportanceSampledRFF(16, random_state=0).fit_transform(X, y).shape
    (200, 16)
    """

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "gamma": [StrOptions({"scale"}), Interval(Real, 0, None, closed="neither")],
        "n_candidates": [None, Interval(Integral, 1, None, closed="left")],
        "rho": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, n_components=64, *, gamma="scale", n_candidates=None, rho=1.0,
                 random_state=None):
        self.n_components = n_components
        self.gamma = gamma
        self.n_candidates = n_candidates
        self.rho = rho
        self.random_state = random_state

    _array_attributes = ("weights_", "particles_", "offsets_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Score the candidates on (X, y), tilt, and sample the features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Dense: a sparse matrix is an error, where ``RBFSampler`` takes one. The
            candidates are scored on a dense float64 copy of X, so a sparse X would be
            densified whole: densify it yourself (``X.toarray()``) where it fits, or
            reduce it first (``TruncatedSVD`` for TF-IDF).
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : ImportanceSampledRFF
        """
        space = output_space(X)
        X, y = check_data_and_target(self, X, y)
        check_squared_scale(X, fit=True)
        self.classes_, y_index = _validate_targets(y)
        np_dtype = numpy_dtype(X)
        X = to_tensor(X, "cpu", dtype=torch.float64)  # a CPU estimator: tensors come here
        generator = make_generator(self.random_state, device="cpu")
        n_candidates = self.n_candidates or 10 * self.n_components
        # the candidates' frequencies, phases and alignments, and a chunk's features
        check_allocation(*(("n_candidates", n_candidates) if self.n_candidates else
                           ("n_components", self.n_components)),  # (the one that was set)
                         8 * n_candidates * (X.shape[1] + 2 + len(self.classes_) + 1))
        self.gamma_ = resolve_gamma(self.gamma, X)
        W, b = initial_particles("rff", n_candidates, X.shape[1], gamma=self.gamma_,
                                 generator=generator)
        Y = target_codes(torch.as_tensor(y_index), len(self.classes_))
        aligned = torch.zeros(n_candidates, Y.shape[1], dtype=torch.float64)
        with torch.inference_mode():
            for rows in iter_chunks(len(X), chunk_rows(len(X), n_candidates)):
                Phi = torch.cos(X[rows] @ W.T + b)
                aligned += Phi.T @ Y[rows]  # per-candidate feature, unscaled
        scores = (aligned / len(X)).square().sum(1)
        q = chi_square_tilt(scores, self.rho)
        pick = torch.multinomial(q, self.n_components, replacement=True, generator=generator)
        self.weights_ = to_numpy(q)
        self.particles_ = to_numpy(W[pick]).astype(np_dtype)
        self.offsets_ = to_numpy(b[pick]).astype(np_dtype)
        self._n_features_out = self.n_components
        self._publish(space)
        return self

    @follows_input
    def transform(self, X):
        """``sqrt(2 / D) cos(X w^T + b)`` for the sampled frequencies.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self)
        X = check_data(self, X, reset=False)
        dtype = torch_dtype(X)
        with torch.inference_mode():  # a CPU estimator (no device parameter)
            Z = features("rff", to_tensor(X, "cpu", dtype=torch.float64),
                         to_tensor(self.particles_, "cpu", dtype=torch.float64),
                         to_tensor(self.offsets_, "cpu", dtype=torch.float64))
        return Z.to(dtype)
