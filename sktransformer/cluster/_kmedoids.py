"""K-medoids: the center update is arg-max (or Gumbel-max) attention onto a data point."""

import warnings
from numbers import Real

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from ..utils import Interval, StrOptions, as_numpy, to_numpy
from . import _likelihood, _lloyd
from ._base import COMMON_CONSTRAINTS, MIXTURE_ATTRIBUTES, BaseCircuitClustering
from ._init import kmeans_plusplus, random_rows
from ._updates import Medoid


class TransformerKMedoids(BaseCircuitClustering):
    """K-medoids: every center is a data point, chosen by attention over its cluster.

    The assignment block is Lloyd's. In the center update each cluster's members attend to
    one another: member ``i`` scores minus its in-cluster cost (the sum of its distances to
    the members), and the center moves to the arg-max, a medoid.

    * ``temperature=None``: the hard limit, the alternate (Voronoi iteration) step of
      Park & Jun (2009), scikit-learn-extra's ``KMedoids(method="alternate")``. A medoid
      changes only for a strictly cheaper member; the loop stops when no medoid moves.
    * ``temperature=t``: randomized k-medoids, a Gumbel-softmax draw of each medoid from
      ``softmax(-cost / (t * s))`` with ``s`` the mean cost at the first layer (so ``t`` is
      unitless). The best medoids seen are returned.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters (medoids).
    metric : {"euclidean", "sqeuclidean"}, default="euclidean"
        The distance in the cost and in ``inertia_``. ``"euclidean"`` (scikit-learn-extra's
        default) sums distances over each cluster, ``O(n^2 d / k)`` per layer in chunks of
        bounded memory; ``"sqeuclidean"`` reduces the same sum to the distance to the
        members' mean, ``O(n d)``.
    temperature : float or None, default=None
        ``None`` is the deterministic alternate step; a positive value samples the medoids.
    init : {"k-medoids++", "random", "heuristic"}, callable or array-like of shape \
(n_clusters, n_features), default="k-medoids++"
        Initial medoids: k-means++ seeding on the data points; distinct random points; the
        ``n_clusters`` points of least total cost to all points (scikit-learn-extra's
        ``"heuristic"``, ``O(n^2)`` for ``"euclidean"``); or centers (an array, or a
        callable ``init(X, n_clusters, random_state)``) each replaced by its nearest point.
        An array of another length than ``n_clusters`` is an error, where
        scikit-learn-extra warns and fits as many medoids as it has rows: a fit that
        quietly changed ``n_clusters`` would change what a grid search over it compares.
    n_init : "auto" or int, default="auto"
        Number of initializations; the lowest inertia wins. ``"auto"``: 10 for
        ``"random"`` and a callable, 1 otherwise.
    max_iter : int, default=300
        Maximum number of layers.
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
        Where the circuit runs; ``"auto"`` uses CUDA when present.
    random_state : int, RandomState instance or None, default=None
        Seeds a local ``torch.Generator`` for the initialization and the Gumbel draws.
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
        The medoids, ``X[medoid_indices_]``.
    medoid_indices_ : ndarray of shape (n_clusters,)
        Row of each medoid in the training data.
    labels_ : ndarray of shape (n_samples,)
    inertia_ : float
        Sum of the distances (in ``metric``) to the closest medoid (weighted).
    n_iter_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    See Also
    --------
    TransformerKMeans : Centers are means instead of data points.

    Examples
    --------
    >>> import numpy as np
    >>> from sktransformer import TransformerKMedoids
    >>> X = np.array([[1, 2], [1, 4], [1, 0], [9, 2], [9, 4], [9, 0]], dtype=float)
    >>> kmed = TransformerKMedoids(n_clusters=2, random_state=0, device="cpu").fit(X)
    >>> sorted(kmed.cluster_centers_.tolist())
    [[1.0, 2.0], [9.0, 2.0]]
    >>> bool(np.all(kmed.cluster_centers_ == X[kmed.medoid_indices_]))
    True
    """

    _parameter_constraints = {
        **{name: rule for name, rule in COMMON_CONSTRAINTS.items() if name != "tol"},
        "init": [StrOptions({"k-medoids++", "random", "heuristic"}), callable, "array-like"],
        "metric": [StrOptions({"euclidean", "sqeuclidean"})],
        "temperature": [None, Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, n_clusters=8, *, metric="euclidean", temperature=None,
                 init="k-medoids++", n_init="auto", max_iter=300, device="auto",
                 random_state=None, verbose=0, batch_size=None):
        self.n_clusters = n_clusters
        self.metric = metric
        self.temperature = temperature
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.batch_size = batch_size

    _array_attributes = ("cluster_centers_", "labels_", "medoid_indices_") + MIXTURE_ATTRIBUTES

    def fit(self, X, y=None, sample_weight=None):
        super().fit(X, y, sample_weight)
        # (as scikit-learn-extra's KMedoids; a temperature's draws move the medoids at every
        # layer by design)
        if self.temperature is None and self.n_iter_ >= self.max_iter:
            warnings.warn(f"Maximum number of iterations ({self.max_iter}) reached before "
                          f"the medoids stopped moving; increase max_iter to improve the "
                          f"fit.", ConvergenceWarning, stacklevel=2)
        return self

    fit.__doc__ = BaseCircuitClustering.fit.__doc__

    def _tol(self, mean_variance):
        return 0.0  # stop when no medoid moves

    def _initialize(self, points, init, generator, sample_weight):
        if isinstance(init, np.ndarray):
            centers = torch.as_tensor(init, device=points.device) - points.shift
            indices = _lloyd.nearest_rows(points, centers)
        elif init == "random":
            return random_rows(points, self.n_clusters, generator=generator,
                               sample_weight=sample_weight)
        elif init == "k-medoids++":
            return kmeans_plusplus(points, self.n_clusters, generator=generator,
                                   sample_weight=sample_weight)
        else:  # "heuristic": the points of least total cost to all the points
            everyone = torch.zeros(points.n, dtype=torch.long, device=points.device)
            if self.metric == "euclidean":
                cost = _lloyd.distance_sums(points, everyone, 1, sample_weight)
            else:
                w = points.new_ones(points.n) if sample_weight is None else sample_weight
                mean = _lloyd.weighted_sums(points, everyone, w, 1) / w.sum()  # chunked
                cost = _lloyd.sq_dist_to_own(points, mean, everyone)
            indices = torch.argsort(cost, stable=True)[:self.n_clusters]
        return points.rows_of(indices), indices

    def _make_update(self, indices, generator):
        return Medoid(self.n_clusters, indices, metric=self.metric,
                      temperature=self.temperature, generator=generator)

    def _store(self, update, points):
        self.medoid_indices_ = to_numpy(update.indices).astype(np.intp)
        rows = (points.rows_of(update.indices) if points.X is None  # (CSR: never shifted)
                else points.X[update.indices])
        self.cluster_centers_ = to_numpy(rows).copy()

    def _point_cost(self, sq_dist):
        return sq_dist.sqrt() if self.metric == "euclidean" else sq_dist

    _distance = _point_cost

    @property
    def _cost_is_distance(self):
        return self.metric == "euclidean"

    # the mixture behind ``score``: Gaussian for "sqeuclidean", radial Laplace densities
    # exp(-||x - m|| / b) for "euclidean" (the distance is the log-density's slope)
    def _fit_mixture(self, weight, cost):
        if self.metric == "sqeuclidean":
            return super()._fit_mixture(weight, cost)
        self.mixture_weights_ = _likelihood.mixture_weights(weight)
        self.scales_ = _likelihood.laplace_scales(
            weight, cost, self.n_features_in_, np.sqrt(self._spread_scale(weight, cost)))

    def _mixture(self):
        if self.metric == "sqeuclidean":
            return super()._mixture()
        return _likelihood.radial_laplace(as_numpy(self.mixture_weights_),
                                          as_numpy(self.scales_),
                                          self.n_features_in_)
