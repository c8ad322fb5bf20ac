"""Spherical k-means: the circuit on unit-normalized tokens (cosine similarity)."""

import torch
from sklearn.preprocessing import normalize

from ..utils import as_numpy
from . import _likelihood
from ._base import COMMON_CONSTRAINTS, BaseCircuitClustering
from ._updates import Mean, normalize_rows


class SphericalTransformerKMeans(BaseCircuitClustering):
    """Spherical (cosine) k-means run by the k-means circuit on normalized tokens.

    The tokens are normalized (the circuit's token-wise normalization), so the assignment
    block's dot-product attention ``x . c`` is the cosine similarity and its arg-max the
    closest center on the sphere; the center update takes the mean of the members and
    projects it back onto the unit sphere (Dhillon & Modha, 2001; faiss's
    ``spherical=True``). Each layer never decreases the total cosine similarity.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters.
    init : {"k-means++", "random"}, callable or array-like of shape (n_clusters, n_features), \
default="k-means++"
        Initial centers, chosen on the normalized data; an array is normalized first.
    n_init : "auto" or int, default="auto"
        Number of initializations; the lowest inertia wins. ``"auto"``: 1 for
        ``"k-means++"`` and an array, 10 for ``"random"`` and a callable.
    max_iter : int, default=300
        Maximum number of layers.
    tol : float, default=1e-4
        Relative tolerance on the total squared center shift (scaled by the mean variance of
        the normalized features). It also stops when no label changes.
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
        Where the circuit runs; ``"auto"`` uses CUDA when present. Fitted attributes are
        numpy arrays.
    random_state : int, RandomState instance or None, default=None
        Seeds a local ``torch.Generator`` for the initialization.
    verbose : int, default=0
        1 and more: scikit-learn's messages (the end of the initialization, the
        inertia after each layer, the reason for stopping; logged to the
        "sktransformer" logger, printed to stdout when logging is not configured)
        and a progress bar over the layers (stderr).
    batch_size : int or None, default=None
        Points per chunk (memory only, not the result).

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Unit-norm centers.
    labels_ : ndarray of shape (n_samples,)
    inertia_ : float
        Sum of squared Euclidean distances of the normalized samples to their centers,
        ``sum_i 2 (1 - cos(x_i, c_{a(i)}))`` for nonzero samples (weighted).
    n_iter_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Notes
    -----
    A zero sample has no direction: it is at distance 1 from every center, takes label 0 on
    the tie, and adds nothing to any center. ``transform`` and ``score`` measure the
    normalized samples.

    See Also
    --------
    TransformerKMeans : The same circuit without normalization.

    Examples
    --------
    >>> import numpy as np
    >>> from sktransformer import SphericalTransformerKMeans
    >>> X = np.array([[1, 0.1], [5, 0.2], [0.1, 1], [0.3, 7]])
    >>> skm = SphericalTransformerKMeans(n_clusters=2, random_state=0, device="cpu").fit(X)
    >>> skm.labels_.tolist() in ([0, 0, 1, 1], [1, 1, 0, 0])
    True
    >>> np.allclose(np.linalg.norm(skm.cluster_centers_, axis=1), 1)
    True
    """

    _parameter_constraints = dict(COMMON_CONSTRAINTS)
    _center_data = False  # unit vectors need no shift, and the sphere is not shift-invariant

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="auto", max_iter=300,
                 tol=1e-4, device="auto", random_state=None, verbose=0, batch_size=None):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.batch_size = batch_size

    def _preprocess(self, X):
        if isinstance(X, torch.Tensor):
            return normalize_rows(X)
        return normalize(X, copy=True)

    def _preprocess_centers(self, centers, points):
        return normalize_rows(centers)

    def _make_update(self, indices, generator):
        return Mean(sphere=True)

    def _dask_update(self):
        return {"update": "mean", "sphere": True}

    # the mixture behind ``score``: von Mises-Fisher on the unit sphere
    def _fit_mixture(self, weight, cost):
        self.mixture_weights_ = _likelihood.mixture_weights(weight)
        self.concentrations_ = _likelihood.vmf_concentrations(weight, cost,
                                                              self.n_features_in_)

    def _mixture(self):
        return _likelihood.von_mises_fisher(as_numpy(self.mixture_weights_),
                                            as_numpy(self.concentrations_),
                                            self.n_features_in_)

    def _n_parameters(self):
        k, d = self.n_clusters, self.n_features_in_
        return k * (d - 1) + k + k - 1  # (unit centers: d - 1 free coordinates each)
