"""TransformerKMeans: scikit-learn's KMeans API over the k-means transformer circuit."""

import os
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..attention import SCORES
from ..utils import (
    Interval,
    StrOptions,
    as_numpy,
    check_data,
    check_squared_scale,
    fit_context,
    follows_input,
    iter_chunks,
    logger,
    logs_verbosely,
    make_generator,
    numpy_dtype,
    one_blas_thread,
    output_space,
    resolve_device,
    to_numpy,
    to_tensor,
    torch_dtype,
)
from . import _dask, _lloyd
from ._base import (
    COMMON_CONSTRAINTS,
    MIXTURE_ATTRIBUTES,
    BaseCircuitClustering,
    check_sample_weight,
    check_sparse_width,
)
from ._circuit import CIRCUIT_ATTENTIONS, KMeansCircuit
from ._elliptical import FULL_MAX_ENTRIES, FULL_MAX_FEATURES, EllipticalMixture
from ._learned import LearnedKMeansLayer, resolve_weights, run_learned
from ._sparse import point_tokens
from ._swaps import swap_centers
from ._updates import Mean

# the elliptical mixture is fitted to at most this many values of X (evenly spaced rows,
# this many at least) and scores this many rows at a time
MIXTURE_VALUES = 1 << 21
MIXTURE_MIN_ROWS = 2048
# n_clusters="auto": the k tried, and the folds of the cross-validation
AUTO_MAX_CLUSTERS = 20
AUTO_FOLDS = 5


class TransformerKMeans(BaseCircuitClustering):
    """K-means clustering run by the k-means transformer circuit.

    Each layer of the circuit (Clarkson et al., Theorem 2.1) is one Lloyd iteration: an
    Euclidean attention block assigns every point to its closest center and an attention
    block over the assignments replaces each center by the mean of its members. With
    ``temperature=None`` the attention is hard (arg-max) and the estimator is exact Lloyd
    k-means; a finite temperature gives soft k-means (``predict_proba``).

    Parameters
    ----------
    n_clusters : int or "auto", default=8
        Number of clusters (center tokens). ``"auto"`` selects it: a shuffled 5-fold
        cross-validation of :meth:`score` over k = 1..20 (fewer where the training folds
        are smaller), then the fit at the best k on all of X (``n_clusters_``, and the
        curve in ``cv_results_``). It costs about a hundred fits.
    temperature : float or None, default=None
        Softmax temperature of the assignment block: weights
        ``softmax(-||x - c||^2 / temperature)`` (the paper's gamma is ``1 / temperature``).
        ``None`` is the hard limit, Lloyd's algorithm.
    attention : str, default="euclidean"
        The score of the assignment block, a key of
        :data:`sktransformer.attention.SCORES`: ``"euclidean"`` (Theorem 2.1) or its
        dot-product form on augmented tokens, ``"dot"`` (Theorem 2.2); both give the same
        clustering, up to rounding. A score registered there is accepted here.
    weights : None, "learned", path or LearnedKMeansLayer, default=None
        ``None`` runs the exact circuit (Lloyd). Otherwise each layer is a *trained* layer
        (:class:`~sktransformer.cluster.LearnedKMeansLayer`): ``"learned"`` is the one
        shipped with the package, trained on Gaussian-mixture tasks with ``d = 32``,
        ``k = 10``; a path or a layer is one of your own
        (:class:`~sktransformer.cluster.LayerTrainer`). Its ``d`` and ``k`` must be the
        data's and ``n_clusters``. X is min-max scaled per feature as in training and the
        centers mapped back; ``max_iter`` is the number of layers (the paper uses 20) and
        ``tol`` stops them early. The layer's points-to-points block costs
        ``O(n^2 D)`` per layer: for up to some ten thousand points.
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
        1 and more: scikit-learn's messages (the end of the initialization, the
        inertia after each layer, the reason for stopping; logged to the
        "sktransformer" logger, printed to stdout when logging is not configured)
        and a progress bar over the layers (stderr).
    batch_size : int or None, default=None
        Points processed per chunk; ``None`` chooses so that the ``(chunk, n_clusters)``
        score tile is about 2 MiB. Memory, not the result, depends on it.
    swaps : "auto" or int, default="auto"
        Hard k-means: at most this many center swaps after the layers converge (a costly
        cluster is split in two by 2-means and the center that costs least to lose is
        removed, its members sent elsewhere or the center merged into its neighbour;
        where that saves more than it costs, the layers run again, kept only when the
        inertia falls: I-k-means-+, Ismkhan 2018).
        They repair the local optimum one initialization often leaves (two centers in one
        cluster, one across two), which is what selecting ``n_clusters`` by :meth:`score`
        needs. ``"auto"``: ``n_clusters`` for ``"k-means++"``, ``"random"`` and a callable,
        0 for an array (the layers from that start exactly, as ``KMeans``).
    algorithm : {"auto", "lloyd", "hamerly"}, default="auto"
        How hard k-means runs its layers; each gives the same clustering, up to ties
        within rounding. ``"lloyd"`` scores every point against every center in every
        layer. ``"hamerly"`` keeps, per point, an upper bound on the distance to its
        center and a lower bound on the distance to every other one (Hamerly 2010): a
        point whose bounds prove it keeps its center is not scored, the attention skipping
        the keys it can prove irrelevant. The bounds run on NumPy data on the CPU;
        elsewhere (CSR, tensors on a GPU, ``verbose``) the layers are Lloyd's. Their loop
        scores float64 data in float32 (a copy of X, shifted) and scores again in float64
        the points whose float32 scores are too close to call: the labels of float64
        scores, from half the bytes a layer.
        ``"auto"``: from 10,000 rows (while that float32 copy stays below 1 GiB), the
        bounds where they pay (while many points change cluster, each layer scores all of
        them, and again where a bounded layer would cost more than a plain one), else
        ``"lloyd"``. Bounds pay on data with clusters and fits of many layers; on uniform
        data ``"auto"`` runs mostly plain layers: ask for ``"hamerly"`` on large clustered
        data.
        ``"elkan"`` (scikit-learn's name for its bounds) runs ``"hamerly"``, so code
        written for ``KMeans`` runs unchanged. With one cluster there is nothing to bound:
        the bounds warn and run ``"lloyd"``, as scikit-learn's ``"elkan"`` does.
    copy_x : bool, default=True
        The compiled loop on dense CPU data works on X shifted by its mean, a copy made
        once a fit (as scikit-learn's ``KMeans``; the bounds' loop, float32 for float64
        X: half its size). With ``copy_x=False`` and X a C-ordered
        NumPy array of float32 or float64, it shifts X in place instead and puts it back
        before ``fit`` returns, which may change X by rounding (scikit-learn's
        ``copy_x=False``); any other X is copied anyway.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Centers, in the dtype of X (float32 or float64).
    labels_ : ndarray of shape (n_samples,)
        Label of each training point (int32).
    inertia_ : float
        Sum of squared distances of the points to their closest center (weighted).
    n_clusters_ : int
        The number of clusters fitted: ``n_clusters``, or the one ``"auto"`` selected.
    cv_results_ : dict of ndarray
        Only with ``n_clusters="auto"``: the search's ``GridSearchCV.cv_results_`` (for
        each k, ``mean_test_score``, ``std_test_score`` and the folds' scores).
    mixture_ : object or None
        The mixture behind :meth:`score` for hard k-means of dense data (with the
        Euclidean attention), fitted to the training points' clusters when first used:
        ``weights_``, ``means_``, ``covariances_`` (of shape (n_clusters, n_features,
        n_features), or (n_clusters, n_features) where they are diagonal), ``profile_``
        (the radial density: ``("gaussian", 0)``, ``("t", degrees of freedom)`` or
        ``("power", beta)``), ``background_weight_`` and its ``box_``. None where the
        score's mixture is the isotropic one (soft k-means, CSR data, dask arrays,
        :meth:`partial_fit`).
    mixture_weights_, covariances_ : ndarray of shape (n_clusters,)
        The isotropic mixture: each cluster's share of the weight and variance (soft
        k-means: equal weights and ``temperature / 2``).
    n_iter_ : int
        Layers run by the best initialization (:meth:`partial_fit`: batches seen).
    counts_ : ndarray of shape (n_clusters,)
        Only after :meth:`partial_fit`: the weight each center has averaged so far.
    n_steps_ : int
        Only after :meth:`partial_fit`: the number of batches seen.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
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
        **COMMON_CONSTRAINTS,
        "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "temperature": [None, Interval(Real, 0, None, closed="neither")],
        "attention": [StrOptions(set(SCORES))],
        "weights": [None, str, os.PathLike, LearnedKMeansLayer],
        "swaps": [StrOptions({"auto"}), Interval(Integral, 0, None, closed="left")],
        "algorithm": [StrOptions({"auto", "lloyd", "elkan", "hamerly"})],
        "copy_x": ["boolean"],
    }

    def __init__(self, n_clusters=8, *, temperature=None, attention="euclidean",
                 weights=None, init="k-means++", n_init="auto", max_iter=300, tol=1e-4,
                 device="auto", random_state=None, verbose=0, batch_size=None,
                 swaps="auto", algorithm="auto", copy_x=True):
        self.n_clusters = n_clusters
        self.temperature = temperature
        self.attention = attention
        self.weights = weights
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.batch_size = batch_size
        self.swaps = swaps
        self.algorithm = algorithm
        self.copy_x = copy_x

    @property
    def _attention(self):
        return self.attention

    def _make_update(self, indices, generator):
        return Mean(soft=self.temperature is not None, algorithm=self._algorithm())

    def _algorithm(self):
        """``algorithm`` as the layers read it: ``"elkan"`` is ``"hamerly"``, and bounds
        with one cluster are Lloyd's."""
        if self.algorithm in ("elkan", "hamerly") and self.n_clusters == 1:
            return "lloyd"
        return {"elkan": "hamerly"}.get(self.algorithm, self.algorithm)

    def _in_place(self):
        return not self.copy_x

    def _assignment_temperature(self):
        return self.temperature

    def _check_fit_params(self, X, sample_weight):
        if self.algorithm in ("elkan", "hamerly") and self.n_clusters == 1:
            warnings.warn(f"algorithm='{self.algorithm}' doesn't make sense for a single "
                          "cluster. Using 'lloyd' instead.", RuntimeWarning, stacklevel=4)
        if self.weights is None:
            return
        if sp.issparse(X):
            raise TypeError("Learned weights (weights=...) take dense X; sparse X is "
                            "clustered by the exact circuit (weights=None).")
        if self.temperature is not None:
            raise ValueError("temperature applies to the exact circuit; with learned weights "
                             "leave it None (the layer's attention is learned).")
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported with learned weights: the "
                             "layer was trained on unweighted tasks.")
        layer = resolve_weights(self.weights)
        if (layer.n_features, layer.n_clusters) != (X.shape[1], self.n_clusters):
            raise ValueError(
                f"The learned weights are for n_features={layer.n_features} and "
                f"n_clusters={layer.n_clusters}, but X has n_features={X.shape[1]} and "
                f"n_clusters={self.n_clusters}. Train a layer for these with "
                f"sktransformer.cluster.LayerTrainer(n_features={X.shape[1]}, "
                f"n_clusters={self.n_clusters}).fit().layer_ and pass it as weights."
            )

    _array_attributes = ("cluster_centers_", "labels_", "counts_") + MIXTURE_ATTRIBUTES

    def _dask_update(self):
        if self.weights is not None:
            raise ValueError("Learned weights (weights=...) run in memory only: their "
                             "points-to-points block needs all points at once. On dask "
                             "input use weights=None (the exact circuit).")
        return {"update": "mean", "temperature": self.temperature}

    def _max_swaps(self):
        if self.temperature is not None:
            return 0
        if self.swaps != "auto":
            return self.swaps
        return self.n_clusters if isinstance(self.init, str) or callable(self.init) else 0

    def _run(self, points, sample_weight, centers, update, tol, runner):
        if self.weights is None:
            result = super()._run(points, sample_weight, centers, update, tol, runner)
            max_swaps = self._max_swaps()
            if max_swaps:
                def run(start, max_iter):  # (a swap's trial: the layers again, silently)
                    return _lloyd.run_layers(points, sample_weight, start, update=update,
                                             max_iter=max_iter, tol=tol, runner=runner)

                result = swap_centers(points, sample_weight, result, run, max_swaps=max_swaps,
                                      max_layers=self.max_iter)
            return result
        return run_learned(resolve_weights(self.weights), points, centers,
                           max_iter=self.max_iter, tol=tol, verbose=self.verbose,
                           runner=runner)

    def fit(self, X, y=None, sample_weight=None):
        # a fresh fit forgets the streaming state of earlier partial_fit calls
        self.__dict__.pop("counts_", None)
        self.__dict__.pop("n_steps_", None)
        self.__dict__.pop("cv_results_", None)
        if isinstance(self.n_clusters, str):
            return self._fit_auto(X, sample_weight)
        return super().fit(X, y, sample_weight)

    fit.__doc__ = BaseCircuitClustering.fit.__doc__

    def _fit_auto(self, X, sample_weight):
        """``n_clusters="auto"``: the k of the best mean held-out score over
        ``1..AUTO_MAX_CLUSTERS`` (shuffled ``AUTO_FOLDS``-fold cross-validation), then
        the fit at that k on all of X."""
        self._validate_params()
        if _dask.is_dask(X):
            raise ValueError("n_clusters='auto' cross-validates in memory; compute the dask "
                             "array first (X.compute()) or pass an integer n_clusters.")
        if not (isinstance(self.init, str) or callable(self.init)):
            raise ValueError("n_clusters='auto' tries several k: init must be 'k-means++', "
                             "'random' or a callable, not an array of centers.")
        n_samples = X.shape[0] if hasattr(X, "shape") else len(X)
        if n_samples < AUTO_FOLDS:
            raise ValueError(f"n_clusters='auto' needs at least {AUTO_FOLDS} samples for "
                             f"its {AUTO_FOLDS}-fold cross-validation, got {n_samples}.")
        largest = min(AUTO_MAX_CLUSTERS, n_samples - -(-n_samples // AUTO_FOLDS))
        search = GridSearchCV(
            clone(self).set_params(n_clusters=1), {"n_clusters": range(1, largest + 1)},
            cv=KFold(AUTO_FOLDS, shuffle=True, random_state=self.random_state),
            error_score="raise")
        with warnings.catch_warnings():  # (a k beyond the distinct points, while trying)
            warnings.simplefilter("ignore", ConvergenceWarning)
            search.fit(X, sample_weight=sample_weight)
        fitted = search.best_estimator_
        params = fitted.get_params(deep=False)
        for name, value in vars(fitted).items():
            if name not in params:
                setattr(self, name, value)
        self.cv_results_ = search.cv_results_
        return self

    @logs_verbosely
    @fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None, sample_weight=None):
        """One mini-batch layer on X: the online k-means update.

        The assignment block runs on the batch as in :meth:`fit`; in the center update each
        center token also attends to itself, with the weight of every point it has averaged
        so far (``counts_``): ``c <- (counts c + sum_members w x) / (counts + sum w)``, the
        update of scikit-learn's ``MiniBatchKMeans`` (without its random reassignment of
        small clusters). Soft k-means weights the members by their soft assignments. The
        first call initializes the centers from its batch as :meth:`fit` would (or
        continues from a fitted model). For streaming data, e.g. with dask-ml's
        ``Incremental``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A batch; the first one needs at least ``n_clusters`` rows.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        if isinstance(self.n_clusters, str):
            raise ValueError("partial_fit needs an integer n_clusters: a stream cannot be "
                             "cross-validated over k; select k on a sample with "
                             "n_clusters='auto' first.")
        first = not hasattr(self, "cluster_centers_")
        space = output_space(X)
        X = check_data(self, X, reset=first, accept_sparse=True)
        check_squared_scale(X)
        if sp.issparse(X):
            check_sparse_width(X, self.n_clusters)
        if self.weights is not None:
            raise ValueError("partial_fit runs the exact circuit; learned weights (weights="
                             f"{self.weights!r}) are applied by fit only.")
        dtype = numpy_dtype(X)
        sample_weight = check_sample_weight(sample_weight, X.shape[0], dtype)
        device = resolve_device(self.device, data=X)
        with torch.inference_mode():
            wt = None if sample_weight is None else to_tensor(sample_weight, device)
            if first:
                if X.shape[0] < self.n_clusters:
                    raise ValueError(f"The first batch has n_samples={X.shape[0]}; it should "
                                     f"be >= n_clusters={self.n_clusters}.")
                init = self._check_init(X, check_random_state(self.random_state))
                # (the initial centers' draws, on the CPU wherever the data are: as the
                # fit's, the same centers for a seed on any device)
                generator = make_generator(self.random_state)
                points = self._tokens(X, device)
                centers, _ = self._initialize(points, init, generator, wt)
                self.cluster_centers_ = to_numpy(centers + points.shift)
            centers = to_tensor(self.cluster_centers_, device, dtype=torch_dtype(X))
            if not hasattr(self, "counts_"):  # a first batch, or after fit: its cluster sizes
                labels = np.empty(0, np.int32) if first else as_numpy(self.labels_)
                self.counts_ = np.bincount(labels[labels >= 0],
                                           minlength=self.n_clusters).astype(dtype)
                self.n_steps_ = 0
            points = self._tokens(X, device, shift=centers.mean(0))
            centers = centers - points.shift
            counts = to_tensor(self.counts_, device, dtype=centers.dtype)
            centers, total = _lloyd.online_step(points, wt, centers, counts,
                                                temperature=self.temperature)
            self.cluster_centers_ = to_numpy(centers + points.shift)
            self.counts_ = to_numpy(total)
            labels, min_dist = _lloyd.assign(points, centers)
            self.labels_ = to_numpy(labels.to(torch.int32))  # (half the copy off a GPU)
            self._set_mixture(self.labels_, to_numpy(min_dist), sample_weight)  # (the batch's)
            cost = min_dist if wt is None else min_dist * wt
            self.inertia_ = float(cost.sum())
        self.n_steps_ += 1
        if self.verbose:
            logger.info(f"partial_fit step {self.n_steps_}: inertia of the batch "
                        f"{self.inertia_}.")
        self.n_iter_ = self.n_steps_
        self._n_features_out = self.n_clusters_ = self.n_clusters
        self._publish(space)
        return self

    def _tokens(self, X, device, shift=None):
        """The point tokens of a batch (CSR or dense; dense ones shifted by ``shift``, by
        their mean when None)."""
        sparse = sp.issparse(X)
        rows = _lloyd.layer_rows(X.shape[0], self.n_clusters, 0 if sparse else X.shape[1],
                                 self.batch_size, device)
        if not sparse:
            X = to_tensor(X, device)
            shift = X.mean(0) if shift is None else shift
        return point_tokens(X, device, rows=rows, attention=self._attention, shift=shift)

    def _fit_mixture(self, weight, cost):
        self.__dict__.pop("_mixture", None)
        self.__dict__.pop("_mixture_rows", None)
        if self.temperature is None:
            return super()._fit_mixture(weight, cost)
        # the softmax's own mixture: equal weights, the variance the temperature sets
        self.mixture_weights_ = np.full(self.n_clusters, 1.0 / self.n_clusters)
        self.covariances_ = np.full(self.n_clusters, self.temperature / 2.0)

    def _set_mixture(self, labels, cost, sample_weight, X=None):
        super()._set_mixture(labels, cost, sample_weight)
        if (X is None or sp.issparse(X) or self.temperature is not None
                or self.attention != "euclidean"):
            return
        # hard k-means of dense data: the elliptical mixture (_elliptical.py), fitted when
        # first used (a fit that is never scored does not pay for it) to a copy of evenly
        # spaced rows (X may change after the fit)
        rows = min(X.shape[0], max(MIXTURE_MIN_ROWS, MIXTURE_VALUES // max(1, X.shape[1])))
        step = -(-X.shape[0] // rows)
        w = None if sample_weight is None else np.array(sample_weight[::step], np.float64)
        self._mixture_rows = (np.array(to_numpy(X[::step])), labels[::step].astype(np.intp), w)

    @property
    def mixture_(self):
        check_is_fitted(self, "cluster_centers_")
        pending = self.__dict__.get("_mixture_rows")
        if pending is not None:  # (the rows are dropped once the mixture is set: a thread
            # scoring meanwhile fits it too, never falls back to the isotropic one)
            X, labels, w = pending
            k, d = self.n_clusters_, X.shape[1]
            kind = "full" if d <= FULL_MAX_FEATURES and k * d * d <= FULL_MAX_ENTRIES else "diag"
            with one_blas_thread():  # (a product per cluster, each small)
                self._mixture = EllipticalMixture(kind).fit(X, labels, k, sample_weight=w)
            self.__dict__.pop("_mixture_rows", None)
        return self.__dict__.get("_mixture")

    def __getstate__(self):
        if "_mixture_rows" in self.__dict__:
            self.mixture_  # (fitted before pickling: the training rows are not kept)
        return super().__getstate__()

    def _log_likelihoods(self, X):
        mixture = self.mixture_
        if mixture is None:
            return super()._log_likelihoods(X)
        X = self._check(X)
        out = np.empty(X.shape[0])
        for sl in iter_chunks(X.shape[0], MIXTURE_MIN_ROWS):
            chunk = X[sl].toarray() if sp.issparse(X) else to_numpy(X[sl])
            out[sl] = mixture.score_samples(chunk)
        return out, None

    def _n_parameters(self):
        if self.mixture_ is not None:
            return self.mixture_.n_parameters()
        if self.temperature is None:
            return super()._n_parameters()
        return self.n_clusters_ * self.n_features_in_  # (only the centers are fitted)

    def _is_soft(self):
        return self.temperature is not None

    @available_if(_is_soft)
    @_dask.by_blocks(columns=True)
    @follows_input
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
            d2 = self._sq_distances(self._check(X))
            return torch.softmax(d2.mul_(-1.0 / self.temperature), dim=1)

    def get_circuit(self):
        """The token-level :class:`KMeansCircuit` with this estimator's settings.

        Its ``blocks`` hold the ``Q, K, V`` matrices of the paper's construction; running it
        from the same centers gives this estimator's layers (on small data: it materializes
        the ``n x n`` reset attention). With ``weights`` set, the learned layer instead.
        """
        check_is_fitted(self)
        if self.weights is not None:
            return resolve_weights(self.weights)
        if self.attention not in CIRCUIT_ATTENTIONS:
            raise ValueError(f"The token-level circuit is written for attention in "
                             f"{CIRCUIT_ATTENTIONS}; attention={self.attention!r} has the "
                             f"fast evaluation only.")
        return KMeansCircuit(
            self.n_features_in_, self.n_clusters_, temperature=self.temperature,
            attention=self.attention,
            center_update="softmax" if self.temperature is None else "linear",
        )
