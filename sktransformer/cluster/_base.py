"""What every clustering circuit shares: validation, initialization, the fit loop, predict.

A variant subclasses :class:`BaseCircuitClustering` and chooses its center-update block
(``_make_update``); the assignment block, the initial centers, the restarts and the
scikit-learn API are written once, here.
"""

import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import assert_all_finite, check_random_state
from sklearn.utils.validation import check_array, check_is_fitted

from ..utils import (
    ArrayAPISupport,
    ChunkRunner,
    Interval,
    StrOptions,
    as_numpy,
    check_allocation,
    check_data,
    check_squared_scale,
    fit_context,
    follows_input,
    is_tensor,
    iter_chunks,
    logger,
    logs_verbosely,
    make_generator,
    numpy_dtype,
    output_space,
    resolve_device,
    sample_stride,
    squared_scale_error,
    to_numpy,
    to_tensor,
    torch_dtype,
)
from . import _compiled, _dask, _likelihood, _lloyd
from ._init import initial_generator, kmeans_plusplus, random_rows
from ._sparse import mean_and_mean_variance, point_tokens

# the fitted mixtures' arrays (each estimator sets some of them; see _fit_mixture)
MIXTURE_ATTRIBUTES = ("mixture_weights_", "covariances_", "concentrations_", "scales_")

COMMON_CONSTRAINTS = {
    "n_clusters": [Interval(Integral, 1, None, closed="left")],
    "init": [StrOptions({"k-means++", "random"}), callable, "array-like"],
    "n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "tol": [Interval(Real, 0, None, closed="left")],
    "device": [str, torch.device],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
    "batch_size": [None, Interval(Integral, 1, None, closed="left")],
}


_EXACT_ROWS = 1 << 14  # rows of float32 data whose distances are recomputed at a time


def _shares_memory(X, Xt):
    """Whether the tensor ``Xt`` is the writable, C-ordered NumPy array ``X`` itself."""
    return (isinstance(X, np.ndarray) and X.flags.writeable and X.flags.c_contiguous
            and Xt.device.type == "cpu" and Xt.data_ptr() == X.ctypes.data)


def _float64(X):
    """A float64 copy of validated data (numpy, CSR or a tensor, where it lives)."""
    return X.double() if isinstance(X, torch.Tensor) else X.astype(np.float64)


def check_sample_weight(sample_weight, n_samples, dtype):
    """``None`` or a validated non-negative, finite, not all-zero array of ``dtype``."""
    if sample_weight is None:
        return None
    if sp.issparse(sample_weight):
        raise TypeError("sample_weight must be a dense 1-D array of one weight per sample, "
                        "got a sparse matrix; pass sample_weight.toarray().ravel().")
    sample_weight = np.asarray(as_numpy(sample_weight), dtype=dtype)
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
    with np.errstate(over="ignore"):
        total = np.sum(sample_weight, dtype=np.float64)
    if not np.isfinite(total):
        raise ValueError("sample_weight sums to infinity: rescale the weights (k-means does "
                         "not depend on their scale, only on their ratios).")
    return sample_weight


def check_sparse_width(X, n_clusters):
    """The dense rows a fit on sparse X makes (the centers, their sums and the column
    means: ``n_clusters + 3`` of X's width), checked before they are allocated."""
    check_allocation("X.shape[1]", X.shape[1], 8 * (n_clusters + 3) * X.shape[1],
                     fix="select fewer features (a smaller vocabulary, say) or pass fewer "
                         "clusters")


def _checked_for_fit(estimator, X, variance):
    """X (from ``check_data(finite=False)``) checked as ``check_data`` and
    :func:`check_squared_scale` with ``fit=True`` check it; for dense NumPy X in one
    compiled pass, whose column means and mean column variance (``variance``) are returned
    (else None): scikit-learn's own finite check was 9 ms of a 10^6 x 16 fit, the scale's
    extremes 5 more."""
    found = _compiled.summary(X, variance) if isinstance(X, np.ndarray) else None
    if found is None or not np.isfinite(found[0]).all():
        if not is_tensor(X):  # (the finite values' sums may overflow: the scale's error)
            assert_all_finite(X.data if sp.issparse(X) else X, input_name="X",
                              estimator_name=type(estimator).__name__)
        check_squared_scale(X, fit=True)
        return None
    error = squared_scale_error(found[2], *X.shape, X.dtype, underflow=True)
    if error:
        raise ValueError(error)
    return found[:2]


def _mean_and_mean_variance(X, rows, variance=True):
    """Column means (in X's dtype) and the mean of the column variances, chunked: each
    chunk sums in X's dtype (no float64 copy of it), the chunks' sums add in float64.
    ``variance=False`` skips the variances' pass and gives 0.0 for them (a zero ``tol``
    needs no scale, as in scikit-learn). CPU data: the compiled passes."""
    compiled = _compiled.mean_and_mean_variance(X, variance)
    if compiled is not None:
        return compiled
    total = torch.zeros(X.shape[1], dtype=torch.float64, device=X.device)
    for sl in iter_chunks(X.shape[0], rows):
        total += X[sl].sum(0)
    mean = (total / X.shape[0]).to(X.dtype)
    if not variance:
        return mean, 0.0
    var = torch.zeros(X.shape[1], dtype=torch.float64, device=X.device)
    for sl in iter_chunks(X.shape[0], rows):
        var += (X[sl] - mean).square_().sum(0)
    return mean, float((var / X.shape[0]).mean())


def _runner(points, centers):
    """The worker threads for passes over ``points`` against ``centers``: by the
    multiply-adds of one pass (the layer's product), and whether oneDNN or MKL multiplies
    (``utils._parallel``)."""
    return ChunkRunner.for_device(centers.device, points.n, points.rows,
                                  work=points.n * points.width * centers.shape[0],
                                  onednn=points.onednn(points.keys(centers)))


class BaseCircuitClustering(ArrayAPISupport, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                            ClusterMixin, BaseEstimator):
    """The clustering circuit behind the scikit-learn API; subclasses pick the update.

    What a variant may override (each has a default here but ``_make_update``):

    ``_make_update(indices, generator)``
        The center-update block (``_updates.py``); ``indices`` are the rows the initial
        centers came from (or None). The one hook every variant defines.
    ``_assignment_temperature()``
        The softmax temperature of the assignment block, ``None`` (hard) by default.
    ``_attention``, ``_center_data``
        The score of the assignment block (a key of ``attention.SCORES``), and whether the
        points may be shifted by their mean (precision; the score may forbid it).
    ``_check_fit_params(X, sample_weight)``
        Validation that needs the data.
    ``_preprocess(X)``, ``_preprocess_centers(centers, points)``
        What the circuit sees of the data and of given initial centers (the sphere, for
        spherical k-means).
    ``_initialize(points, init, generator, sample_weight)``
        The initial centers (k-means++, random rows or an array).
    ``_tol(mean_variance)``, ``_location_and_scale(sample)``
        The tolerance on the center shift; a robust shift and variance (trimming).
    ``_run(points, sample_weight, centers, update, tol, runner)``
        The layers of one initialization (a learned layer instead of the circuit, for
        ``TransformerKMeans(weights=...)``).
    ``_store(update, points)``
        What a variant adds to the fitted attributes.
    ``_point_cost(sq_dist)``, ``_distance(sq_dist)``
        The per-point objective, and what ``transform`` returns, from squared distances.
    """

    _attention = "euclidean"
    _center_data = True  # shift the points by their mean (float32 precision)
    _array_attributes = ("cluster_centers_", "labels_") + MIXTURE_ATTRIBUTES

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.sparse = True
        return tags

    # -- hooks -------------------------------------------------------------------------

    def _preprocess(self, X):
        return X

    def _check_fit_params(self, X, sample_weight):
        """Validate what depends on the data."""

    def _make_update(self, indices, generator):
        raise NotImplementedError

    def _assignment_temperature(self):
        return None

    def _store(self, update, points):
        pass

    def _point_cost(self, sq_dist):
        return sq_dist

    _cost_is_distance = False  # whether _point_cost is the distance, not its square

    def _distance(self, sq_dist):
        return sq_dist.sqrt()

    def _tol(self, mean_variance):
        return self.tol * mean_variance

    def _location_and_scale(self, sample):
        """The shift of the points and the mean feature variance (``tol``'s scale) from
        evenly spaced rows ``sample``, or None for X's mean and variance."""
        return None

    def _run(self, points, sample_weight, centers, update, tol, runner):
        """The layers of one initialization: (centers, labels, inertia, n_iter)."""
        return _lloyd.run_layers(points, sample_weight, centers, update=update,
                                 temperature=self._assignment_temperature(),
                                 max_iter=self.max_iter, tol=tol, verbose=self.verbose,
                                 runner=runner)

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
        init = check_array(as_numpy(init), dtype=numpy_dtype(X), copy=True, order="C")
        if init.shape[0] != self.n_clusters:
            raise ValueError(
                f"The shape of the initial centers {init.shape} does not match the number "
                f"of clusters {self.n_clusters}: pass n_clusters={init.shape[0]} or "
                f"{self.n_clusters} initial centers.")
        if init.shape[1] != X.shape[1]:
            raise ValueError(
                f"The shape of the initial centers {init.shape} does not match the number "
                f"of features of the data {X.shape[1]}.")
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

    def _initialize(self, points, init, generator, sample_weight):
        """Initial centers (shifted coordinates) and, when they are rows, their indices."""
        if isinstance(init, np.ndarray):
            return self._preprocess_centers(to_tensor(init, points.device) - points.shift,
                                            points), None
        if init == "random":
            return random_rows(points, self.n_clusters, generator=generator,
                               sample_weight=sample_weight)
        return kmeans_plusplus(points, self.n_clusters, generator=generator,
                               sample_weight=sample_weight)

    def _preprocess_centers(self, centers, points):
        return centers

    def _in_place(self):
        """Whether the fit may shift X in place (``copy_x=False``) and put it back."""
        return False

    @logs_verbosely
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Run the circuit on X.

        Parameters
        ----------
        X : array-like, tensor, dask array or dask DataFrame of shape (n_samples, n_features)
            Training data, dense. float32 stays float32; anything else becomes float64.
            A torch tensor (or another array-API array) is used where it lives: with
            ``device="auto"`` the fit runs on the tensor's device, without a copy.
            A dask collection is fitted on its workers, block by block (the variants
            listed in :ref:`dask`); ``labels_`` is then a lazy dask array.
        y : Ignored
        sample_weight : array-like or dask array of shape (n_samples,), default=None
            Weight of each point in the center update and in the inertia.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        if isinstance(self.n_clusters, (bool, np.bool_)):  # (an Integral to the constraint)
            raise ValueError(f"The 'n_clusters' parameter of {type(self).__name__} must be an "
                             f"int in the range [1, inf), got {self.n_clusters!r}.")
        if _dask.is_dask(X):
            n_distinct = _dask.fit(self, X, sample_weight)
        else:
            n_distinct = self._fit_in_memory(X, sample_weight)
        if n_distinct < self.n_clusters:
            warnings.warn(
                f"Number of distinct clusters ({n_distinct}) found smaller than "
                f"n_clusters ({self.n_clusters}). Possibly due to duplicate points in X.",
                ConvergenceWarning, stacklevel=2,
            )
        return self

    def _dask_update(self):
        """What the Dask driver runs (a dict read by ``_dask.fit``); raises where none."""
        raise ValueError(
            f"{type(self).__name__} does not fit dask arrays; the variants that do are "
            f"{_dask.SUPPORTED}. Compute the array first (X.compute()) if it fits in memory.")

    def _fit_in_memory(self, X, sample_weight):
        """The fit on in-memory X; returns the number of distinct labels."""
        space = output_space(X)
        X = check_data(self, X, reset=True, accept_sparse=True, finite=False)
        found = _checked_for_fit(self, X, variance=self._tol(1.0) != 0)
        n_samples = X.shape[0]
        if sp.issparse(X):
            check_sparse_width(X, self.n_clusters)
        if n_samples < self.n_clusters:
            raise ValueError(
                f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}."
            )
        sample_weight = check_sample_weight(sample_weight, n_samples, numpy_dtype(X))
        total = None if sample_weight is None else float(sample_weight.sum(dtype=np.float64))
        if total is not None and total > n_samples:
            # (the weighted sums of squares reach the weights' total times a squared value)
            check_squared_scale(X, fit=True, n_samples=total,
                                name=f"X, weighted by a sample_weight of total {total:.3g},")
        self._check_fit_params(X, sample_weight)
        n_init = self._n_init()
        # (for a callable init only: a RandomState costs a small fit 0.1 ms)
        random_state = check_random_state(self.random_state) if callable(self.init) else None
        init = self._check_init(X, random_state)
        device = resolve_device(self.device, data=X)
        generator = make_generator(self.random_state, device=device)
        init_generator = initial_generator(generator, self.random_state)
        X, raw = self._preprocess(X), X

        origin = None  # (copy_x=False: the shift made in X itself)
        with torch.inference_mode():
            wt = None if sample_weight is None else to_tensor(sample_weight, device)
            rows = _lloyd.layer_rows(n_samples, self.n_clusters,
                                     0 if sp.issparse(X) else X.shape[1], self.batch_size,
                                     device)
            if sp.issparse(X):
                _, mean_var = mean_and_mean_variance(X)
                points = point_tokens(X, device, rows=rows, attention=self._attention)
            else:
                Xt = to_tensor(X, device)
                robust = self._location_and_scale(Xt[::sample_stride(*Xt.shape)])
                if robust is not None:
                    shift, mean_var = robust
                elif found is not None and X is raw:  # (the validation's pass found them)
                    shift, mean_var = to_tensor(found[0], device), found[1]
                else:
                    shift, mean_var = _mean_and_mean_variance(
                        Xt, rows, variance=self._tol(1.0) != 0)
                if not self._center_data:
                    shift = torch.zeros_like(shift)
                if self._in_place() and _shares_memory(X, Xt):
                    # copy_x=False: X itself is shifted (and put back below), and the
                    # points are X with no shift of their own
                    origin, shift = shift, torch.zeros_like(shift)
                    Xt.sub_(origin)
                points = _lloyd.PointTokens(Xt, rows=rows, attention=self._attention,
                                            shift=shift)
            try:
                best = None
                for run in range(n_init):
                    if run > 0 and callable(self.init):
                        init = self._check_init(X, random_state)
                    centers, indices = self._initialize(points, init, init_generator, wt)
                    update = self._make_update(indices, generator)
                    if self.verbose:
                        logger.info("Initialization complete")
                    with _runner(points, centers) as runner:
                        result = self._run(points, wt, centers, update,
                                           self._tol(mean_var), runner)
                    if best is None or result[2] < best[0][2]:
                        best = result, update
                (centers, labels, inertia, n_iter), update = best
                # the mixture's spreads: each member's cost at its final center
                _, min_dist = _lloyd.assign(points, centers)
            finally:
                if origin is not None:
                    Xt.add_(origin)
            centers = centers + points.shift
            self.cluster_centers_ = to_numpy(centers if origin is None else centers + origin)
            self.labels_ = to_numpy(labels.to(torch.int32))  # (half the copy off a GPU)
            self._store(update, points)
            self._set_mixture(self.labels_, to_numpy(self._point_cost(min_dist)),
                              sample_weight, raw)
        self.inertia_ = inertia
        self.n_iter_ = n_iter
        self._n_features_out = self.n_clusters_ = self.n_clusters
        # (trimmed points are -1: counted in the first bin, left out)
        n_distinct = np.count_nonzero(
            np.bincount(self.labels_ + 1, minlength=self.n_clusters + 1)[1:])
        self._publish(space)
        return n_distinct

    # -- using the fitted centers ------------------------------------------------------

    def _check(self, X):
        """X validated against the fit (fitted, a kind of data the estimator takes, finite,
        its squares in range): what every method using the fitted centers does once."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, accept_sparse=True)
        check_squared_scale(X)
        return X

    def _prepare(self, X):
        """Point tokens of X (validated by :meth:`_check`) and the centers in their
        coordinates."""
        X = self._preprocess(X)
        device = resolve_device(self.device, fallback=True, data=X)
        centers = to_tensor(self.cluster_centers_, device, dtype=torch_dtype(X))
        rows = _lloyd.layer_rows(X.shape[0], self.n_clusters_,
                                 0 if sp.issparse(X) else X.shape[1], self.batch_size, device)
        points = point_tokens(X, device, rows=rows, attention=self._attention,
                              shift=centers.mean(0))
        return points, centers - points.shift

    def _sq_distances(self, X):
        """Squared distances of validated X to every center, (n_samples, n_clusters), as a
        tensor."""
        points, centers = self._prepare(X)
        with _runner(points, centers) as runner:
            sq = _lloyd.sq_distances(points, centers, runner=runner)
        return _lloyd.exact_near_zero(points, centers, sq)

    def _assign(self, X):
        """Labels and squared distances of validated X to the closest center, as
        tensors."""
        points, centers = self._prepare(X)
        with _runner(points, centers) as runner:
            return _lloyd.assign(points, centers, runner=runner)

    @_dask.by_blocks(columns=False)
    @follows_input
    def predict(self, X):
        """Index of the closest center for each sample (the assignment block).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            int32; under ``array_api_dispatch``, in X's namespace and on its device.
        """
        with torch.inference_mode():
            return self._assign(self._check(X))[0].to(torch.int32)

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit and return ``labels_``."""
        return self.fit(X, sample_weight=sample_weight).labels_

    @_dask.by_blocks(columns=True)
    @follows_input
    def transform(self, X):
        """Distance of each sample to each center (Euclidean; k-medoids: its metric).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
            In X's dtype; under ``array_api_dispatch``, in X's namespace and on its device.
        """
        with torch.inference_mode():
            X = self._check(X)
            if torch_dtype(X) != torch.float32:
                return self._distance(self._sq_distances(X))
            # in float32, ||x||^2 + ||c||^2 - 2 x.c loses to cancellation what x and c share
            # (a medoid 0.06 from itself at a scale of 1,000): as scikit-learn's
            # euclidean_distances does, by row chunks in float64, returned in float32
            return torch.cat([
                self._distance(self._sq_distances(_float64(X[sl]))).to(torch.float32)
                for sl in iter_chunks(X.shape[0], _EXACT_ROWS)])

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit and return the distances of X to the centers."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

    def _costs(self, X):
        """Per-sample objective (numpy float64) and labels of X at the fitted centers."""
        with torch.inference_mode():
            labels, min_dist = self._assign(self._check(X))
            return to_numpy(self._point_cost(min_dist)).astype(np.float64), to_numpy(labels)

    # -- the mixture model: score, bic, aic (_likelihood.py) ----------------------------

    def _fit_mixture(self, weight, cost):
        """The fitted mixture's attributes, from each cluster's weight and summed cost
        (:func:`~sktransformer.cluster._likelihood.member_sums` of the training points).
        Here an isotropic Gaussian mixture: its weights and per-cluster variances."""
        self.mixture_weights_ = _likelihood.mixture_weights(weight)
        self.covariances_ = _likelihood.gaussian_variances(
            weight, cost, self.n_features_in_, self._spread_scale(weight, cost))

    def _spread_scale(self, weight, cost):
        """The data's scale (squared): the floor of the fitted spreads is relative to it."""
        centers = as_numpy(self.cluster_centers_).astype(np.float64)
        return float(cost.sum() / weight.sum() + np.square(centers).sum(1).mean())

    def _mixture(self):
        """``(log weight, offset, slope)`` of the fitted mixture (see ``_likelihood``)."""
        return _likelihood.gaussian(as_numpy(self.mixture_weights_), as_numpy(self.covariances_),
                                    self.n_features_in_)

    def _n_parameters(self):
        """Free parameters of the fitted mixture: centers, spreads and weights."""
        k, d = self.n_clusters_, self.n_features_in_
        return k * d + k + k - 1

    def _set_mixture(self, labels, cost, sample_weight, X=None):
        """Fit the mixture from the training points' labels (-1: left out) and costs
        (``X``: the training data, where the mixture reads it)."""
        weight, summed = _likelihood.member_sums(labels, cost, sample_weight, self.n_clusters)
        self._fit_mixture(weight, summed)

    def _log_likelihoods(self, X):
        """Per-sample log-likelihood (numpy float64), and which samples the score counts
        (None: all), by chunks of the score tiles."""
        X, mixture = self._check(X), self._mixture()
        out = _compiled.log_likelihoods(X, as_numpy(self.cluster_centers_), mixture,
                                        attention=self._attention, root=self._cost_is_distance,
                                        preprocess=self._preprocess)
        if out is not None:  # (small dense NumPy data: one compiled pass)
            return out, None
        points, centers = self._prepare(X)
        out = np.empty(points.n)
        with torch.inference_mode():
            for sl, sq_dist in _lloyd.iter_sq_distances(points, centers):
                out[sl] = _likelihood.log_likelihood(to_numpy(self._point_cost(sq_dist)),
                                                     mixture)
        return out, None

    @follows_input
    def score_samples(self, X):
        """Log-likelihood of each sample under the fitted mixture (see :meth:`score`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_likelihood : ndarray of shape (n_samples,)
            float64.
        """
        check_is_fitted(self)
        if _dask.is_dask(X):
            return _dask.map_rows(self, self.score_samples, X, dtype=np.float64)
        return self._log_likelihoods(X)[0]

    def _score_sums(self, X, sample_weight=None):
        """Summed (weighted) log-likelihood of the samples the score counts, and their
        weight."""
        ll, counted = self._log_likelihoods(X)
        w = check_sample_weight(sample_weight, len(ll), np.float64)
        w = np.ones(len(ll)) if w is None else w
        if counted is not None:
            w = np.where(counted, w, 0.0)
        ll = np.where(w > 0, ll, 0.0)
        return float(ll @ w), float(w.sum())

    def score(self, X, y=None, sample_weight=None):
        """Mean log-likelihood of X under the fitted mixture: a score that selects k.

        The mixture is fitted with the clusters (soft k-means: Gaussians of variance
        ``temperature / 2`` and equal weights; hard k-means of dense data: each cluster's
        covariance, tails fitted to the data, and with one cluster a uniform density beside
        it; see :ref:`model_selection`). Unlike the inertia, which only falls as clusters
        are added, this score on held-out data peaks at the number of clusters in the data,
        one included, so ``GridSearchCV`` selects ``n_clusters`` (and ``temperature``) with
        it: shuffle its folds (``cv=KFold(5, shuffle=True)``). scikit-learn's
        ``KMeans.score`` (minus the inertia) is
        :func:`~sktransformer.cluster.neg_inertia_scorer`, and the inertia of X
        :meth:`inertia`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        score : float
            Weighted mean log-likelihood per sample (higher is better).
        """
        check_is_fitted(self)
        if _dask.is_dask(X):
            total, weight = _dask.score(self, X, sample_weight)
        else:
            total, weight = self._score_sums(X, sample_weight)
        if weight <= 0:
            raise ValueError("No sample to score: every sample has zero weight or is an "
                             "outlier.")
        return total / weight

    def bic(self, X):
        """Bayesian information criterion of the fitted mixture on X (lower is better).

        ``-2 log L + p log n`` with ``p`` the mixture's free parameters, as
        ``GaussianMixture.bic``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        bic : float
        """
        n = _n_rows(X)
        return -2 * self.score(X) * n + self._n_parameters() * np.log(n)

    def aic(self, X):
        """Akaike information criterion of the fitted mixture on X (lower is better):
        ``-2 log L + 2 p``, as ``GaussianMixture.aic``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        aic : float
        """
        return -2 * self.score(X) * _n_rows(X) + 2 * self._n_parameters()

    def inertia(self, X, sample_weight=None):
        """The objective of X at the fitted centers: scikit-learn's ``-KMeans.score``.

        Sum of the (weighted) squared distances to the closest center (each variant's own
        objective: trimming leaves the outliers out, k-medoids sums its metric).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        inertia : float
        """
        check_is_fitted(self)
        if _dask.is_dask(X):
            return _dask.inertia(self, X, sample_weight)
        cost, _ = self._costs(X)
        sample_weight = check_sample_weight(sample_weight, len(cost), np.float64)
        if sample_weight is not None:
            cost = cost * sample_weight
        return float(cost.sum())


def neg_inertia_scorer(estimator, X, y=None, sample_weight=None):
    """Minus the inertia of X: scikit-learn's ``KMeans.score``, as a scorer.

    ``GridSearchCV(..., scoring=neg_inertia_scorer)`` ranks models as ``KMeans`` does (the
    largest ``n_clusters`` of a grid always wins: use it to tune other parameters at a
    fixed k).
    """
    return -estimator.inertia(X, sample_weight=sample_weight)


def _n_rows(X):
    return X.shape[0] if hasattr(X, "shape") else len(X)
