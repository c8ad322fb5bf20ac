"""TransformerKMeans: scikit-learn's KMeans API over the k-means transformer circuit."""

import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ..utils import (
    ChunkRunner,
    chunk_rows,
    iter_chunks,
    make_generator,
    resolve_device,
    to_numpy,
    to_tensor,
)
from . import _lloyd
from ._circuit import KMeansCircuit
from ._init import kmeans_plusplus, random_rows


def _check_sample_weight(sample_weight, n_samples, dtype):
    if sample_weight is None:
        return None
    sample_weight = np.asarray(sample_weight, dtype=dtype)
    if sample_weight.ndim == 0:
        sample_weight = np.full(n_samples, sample_weight, dtype=dtype)
    if sample_weight.shape != (n_samples,):
        raise ValueError(
            f"sample_weight.shape == {sample_weight.shape}, expected ({n_samples},)."
        )
    if not np.all(np.isfinite(sample_weight)):
        raise ValueError("sample_weight contains NaN or infinity.")
    if np.any(sample_weight < 0):
        raise ValueError("sample_weight must be non-negative.")
    if not np.any(sample_weight > 0):
        raise ValueError("Sample weights must contain at least one non-zero number.")
    return sample_weight


def _mean_and_mean_variance(X, rows):
    """Column means (in X's dtype) and the mean of the column variances, chunked."""
    total = torch.zeros(X.shape[1], dtype=torch.float64, device=X.device)
    for sl in iter_chunks(X.shape[0], rows):
        total += X[sl].sum(0, dtype=torch.float64)
    mean = (total / X.shape[0]).to(X.dtype)
    var = torch.zeros(X.shape[1], dtype=torch.float64, device=X.device)
    for sl in iter_chunks(X.shape[0], rows):
        var += (X[sl] - mean).square().sum(0, dtype=torch.float64)
    return mean, float((var / X.shape[0]).mean())


class TransformerKMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin,
                        BaseEstimator):
    """K-means clustering run by the k-means transformer circuit.

    Each layer of the circuit (Clarkson et al., Theorem 2.1) is one Lloyd iteration: an
    Euclidean attention block assigns every point to its closest center and an attention
    block over the assignments replaces each center by the mean of its members. With
    ``temperature=None`` the attention is hard (arg-max) and the estimator is exact Lloyd
    k-means; a finite temperature gives soft k-means (``predict_proba``).

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters (center tokens).
    temperature : float or None, default=None
        Softmax temperature of the assignment block: weights
        ``softmax(-||x - c||^2 / temperature)`` (the paper's gamma is ``1 / temperature``).
        ``None`` is the hard limit, Lloyd's algorithm.
    attention : {"euclidean", "dot"}, default="euclidean"
        Euclidean attention (Theorem 2.1) or its dot-product form on augmented tokens
        (Theorem 2.2). Both give the same clustering, up to rounding.
    init : {"k-means++", "random"}, callable or array-like of shape (n_clusters, n_features), \
default="k-means++"
        Initial centers: greedy k-means++, distinct random rows, an array, or a callable
        ``init(X, n_clusters, random_state) -> centers``.
    n_init : "auto" or int, default="auto"
        Number of initializations; the run with the lowest inertia is kept. ``"auto"`` is 1
        for ``"k-means++"`` and an array, 10 for ``"random"`` and a callable.
    max_iter : int, default=300
        Maximum number of layers (Lloyd iterations) for one run.
    tol : float, default=1e-4
        Relative tolerance on the total squared center shift, scaled by the mean variance
        of the features, as in scikit-learn. Hard mode also stops when no label changes.
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
        Where the circuit runs. ``"auto"`` uses CUDA when present. Fitted attributes are
        numpy arrays, so a model fitted on a GPU pickles and predicts on a CPU-only machine
        (with a ``DeviceWarning`` while ``device`` still says ``"cuda"``); ``fit`` with an
        unavailable device raises.
    random_state : int, RandomState instance or None, default=None
        Seeds a local ``torch.Generator`` for the initialization; the global seed is
        never touched.
    verbose : int, default=0
        Print the inertia after each layer and the reason for stopping.
    batch_size : int or None, default=None
        Points processed per chunk; ``None`` chooses so that the ``(chunk, n_clusters)``
        score tile is about 1 MiB. Memory, not the result, depends on it.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Centers, in the dtype of X (float32 or float64).
    labels_ : ndarray of shape (n_samples,)
        Label of each training point (int32).
    inertia_ : float
        Sum of squared distances of the points to their closest center (weighted).
    n_iter_ : int
        Layers run by the best initialization.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    sklearn.cluster.KMeans : The reference implementation this estimator matches.
    sktransformer.cluster.KMeansCircuit : The same layer written token by token.

    Examples
    --------
    >>> import numpy as np
    >>> from sktransformer import TransformerKMeans
    >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
    >>> km = TransformerKMeans(n_clusters=2, random_state=0, device="cpu").fit(X)
    >>> sorted(km.cluster_centers_.tolist())
    [[1.0, 2.0], [10.0, 2.0]]
    >>> km.predict([[0, 0], [12, 3]]).tolist() == [km.labels_[0], km.labels_[3]]
    True
    """

    _parameter_constraints = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "temperature": [None, Interval(Real, 0, None, closed="neither")],
        "attention": [StrOptions({"euclidean", "dot"})],
        "init": [StrOptions({"k-means++", "random"}), callable, "array-like"],
        "n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "batch_size": [None, Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, n_clusters=8, *, temperature=None, attention="euclidean",
                 init="k-means++", n_init="auto", max_iter=300, tol=1e-4, device="auto",
                 random_state=None, verbose=0, batch_size=None):
        self.n_clusters = n_clusters
        self.temperature = temperature
        self.attention = attention
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.batch_size = batch_size

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    # -- fitting -----------------------------------------------------------------------

    def _check_init(self, X, random_state):
        """The init as an array of shape (n_clusters, n_features) of X's dtype, or a string.

        A callable is called here, once per initialization, with ``random_state``.
        """
        init = self.init
        if isinstance(init, str):
            return init
        if callable(init):
            init = init(X, self.n_clusters, random_state=random_state)
        init = check_array(init, dtype=X.dtype, copy=True, order="C")
        if init.shape != (self.n_clusters, X.shape[1]):
            raise ValueError(
                f"The shape of the initial centers {init.shape} does not match "
                f"(n_clusters, n_features) = ({self.n_clusters}, {X.shape[1]})."
            )
        return init

    def _n_init(self):
        if self.n_init != "auto":
            if not isinstance(self.init, str) and not callable(self.init) and self.n_init != 1:
                warnings.warn(
                    "Explicit initial center position passed: performing only one init in "
                    f"{type(self).__name__} instead of n_init={self.n_init}.",
                    RuntimeWarning, stacklevel=3,
                )
                return 1
            return self.n_init
        if isinstance(self.init, str) and self.init == "random" or callable(self.init):
            return 10
        return 1

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Run the circuit on X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, dense. float32 stays float32; anything else becomes float64.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each point in the center update and in the inertia.

        Returns
        -------
        self : TransformerKMeans
        """
        X = validate_data(self, X, dtype=[np.float64, np.float32], order="C",
                          accept_sparse=False)
        n_samples = X.shape[0]
        if n_samples < self.n_clusters:
            raise ValueError(
                f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}."
            )
        sample_weight = _check_sample_weight(sample_weight, n_samples, X.dtype)
        n_init = self._n_init()
        random_state = check_random_state(self.random_state)  # for a callable init only
        init = self._check_init(X, random_state)
        device = resolve_device(self.device)
        generator = make_generator(self.random_state, device=device)

        with torch.inference_mode():
            Xt = to_tensor(X, device)
            wt = None if sample_weight is None else to_tensor(sample_weight, device)
            rows = chunk_rows(n_samples, self.n_clusters, self.batch_size)
            shift, mean_var = _mean_and_mean_variance(Xt, rows)
            points = _lloyd.PointTokens(Xt, rows=rows, attention=self.attention, shift=shift)
            tol = self.tol * mean_var
            best = None
            for run in range(n_init):
                if run > 0 and callable(self.init):
                    init = self._check_init(X, random_state)
                if isinstance(init, np.ndarray):
                    centers = to_tensor(init, device) - shift
                elif init == "k-means++":
                    centers, _ = kmeans_plusplus(points, self.n_clusters, generator=generator,
                                                 sample_weight=wt)
                else:
                    centers, _ = random_rows(points, self.n_clusters, generator=generator)
                if self.verbose:
                    print("Initialization complete")
                with ChunkRunner.for_device(device, n_samples, rows) as runner:
                    result = _lloyd.run_layers(
                        points, wt, centers, max_iter=self.max_iter, tol=tol,
                        temperature=self.temperature, verbose=self.verbose, runner=runner,
                    )
                if best is None or result[2] < best[2]:
                    best = result
            centers, labels, inertia, n_iter = best
            self.cluster_centers_ = to_numpy(centers + shift)
            self.labels_ = to_numpy(labels).astype(np.int32)
        self.inertia_ = inertia
        self.n_iter_ = n_iter
        self._n_features_out = self.n_clusters
        n_distinct = len(np.unique(self.labels_))
        if n_distinct < self.n_clusters:
            warnings.warn(
                f"Number of distinct clusters ({n_distinct}) found smaller than "
                f"n_clusters ({self.n_clusters}). Possibly due to duplicate points in X.",
                ConvergenceWarning, stacklevel=2,
            )
        return self

    # -- using the fitted centers ------------------------------------------------------

    def _prepare(self, X):
        """Point tokens of the validated X and the centers in their coordinates."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], order="C",
                          accept_sparse=False, reset=False)
        device = resolve_device(self.device, fallback=True)
        Xt = to_tensor(X, device)
        centers = to_tensor(self.cluster_centers_, device, dtype=Xt.dtype)
        shift = centers.mean(0)
        rows = chunk_rows(X.shape[0], self.n_clusters, self.batch_size)
        points = _lloyd.PointTokens(Xt, rows=rows, attention=self.attention, shift=shift)
        return points, centers - shift

    def _sq_distances(self, X):
        """Squared distances to every center, (n_samples, n_clusters), as a tensor."""
        points, centers = self._prepare(X)
        with ChunkRunner.for_device(centers.device, points.n, points.rows) as runner:
            return _lloyd.sq_distances(points, centers, runner=runner)

    def _assign(self, X):
        """Labels and squared distances to the closest center, as tensors."""
        points, centers = self._prepare(X)
        with ChunkRunner.for_device(centers.device, points.n, points.rows) as runner:
            return _lloyd.assign(points, centers, runner=runner)

    def predict(self, X):
        """Index of the closest center for each sample (the assignment block).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        with torch.inference_mode():
            return to_numpy(self._assign(X)[0]).astype(np.int32)

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit and return ``labels_``."""
        return self.fit(X, sample_weight=sample_weight).labels_

    def transform(self, X):
        """Euclidean distance of each sample to each center.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
        """
        with torch.inference_mode():
            return to_numpy(self._sq_distances(X).sqrt_())

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit and return the distances of X to the centers."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

    def _is_soft(self):
        return self.temperature is not None

    @available_if(_is_soft)
    def predict_proba(self, X):
        """Soft assignments ``softmax(-||x - c||^2 / temperature)`` (soft k-means only).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_clusters)
            Rows sum to 1.
        """
        with torch.inference_mode():
            d2 = self._sq_distances(X)
            return to_numpy(torch.softmax(d2.mul_(-1.0 / self.temperature), dim=1))

    def score(self, X, y=None, sample_weight=None):
        """Opposite of the inertia of X with respect to the fitted centers.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        score : float
        """
        with torch.inference_mode():
            min_dist = to_numpy(self._assign(X)[1]).astype(np.float64)
        sample_weight = _check_sample_weight(sample_weight, len(min_dist), np.float64)
        if sample_weight is not None:
            min_dist = min_dist * sample_weight
        return -float(min_dist.sum())

    def get_circuit(self):
        """The token-level :class:`KMeansCircuit` with this estimator's settings.

        Its ``blocks`` hold the ``Q, K, V`` matrices of the paper's construction; running it
        from the same centers gives this estimator's layers (on small data: it materializes
        the ``n x n`` reset attention).
        """
        check_is_fitted(self)
        return KMeansCircuit(
            self.n_features_in_, self.n_clusters, temperature=self.temperature,
            attention=self.attention,
            center_update="softmax" if self.temperature is None else "linear",
        )
