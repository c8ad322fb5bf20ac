"""KNNAttentionRegressor: a prediction is kNN attention over the training set."""

import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..attention import get_score, knn_attention, knn_attention_grad
from ..utils import (
    ArrayAPISupport,
    Interval,
    StrOptions,
    check_allocation,
    check_data,
    check_data_and_target,
    check_squared_scale,
    fit_context,
    follows_input,
    logger,
    logs_verbosely,
    make_generator,
    output_space,
    progress,
    resolve_device,
    to_numpy,
    to_tensor,
    torch_dtype,
)

# Euclidean attention as one matmul of augmented tokens: the registry's token algebra
_EUCLIDEAN = get_score("euclidean")


def _mean_and_scale(A):
    """Column means and standard deviations (1 where a column is constant)."""
    mean, scale = A.mean(0), A.std(0, unbiased=False)
    return mean, torch.where(scale > 0, scale, torch.ones_like(scale))


class KNNAttentionRegressor(ArrayAPISupport, RegressorMixin, BaseEstimator):
    """Regression by kNN attention over the training set, with a learned projection.

    A new point ``x`` is a query; the training points are the keys and their targets the
    values. The prediction is softmax attention restricted to the ``n_neighbors`` best keys,
    ``sum_{j in top-k} softmax_j(-||P x - P x_j||^2 / temperature) y_j`` (Euclidean
    attention, evaluated as dot-product attention on augmented tokens), with ``P`` a
    learned linear projection of the standardized features. ``fit`` learns ``P`` by
    minimizing the leave-one-out squared error of that prediction on the training set
    (Adam), which is how the key/query projection of an attention layer is trained: with
    exact gradients through the top-k attention, or with the sampled (random-walk)
    gradients of full softmax attention (``gradient="sampled"``). By default a tenth of
    the rows is held out to stop learning early and keep the best projection
    (``early_stopping``), as scikit-learn's ``MLPRegressor`` can.

    Parameters
    ----------
    n_neighbors : int, default=32
        Keys kept per query (``k``).
    temperature : float, default=4.0
        Softmax temperature on squared distances in the projected (standardized) space.
    approximation : {"truncated", "tail", "gumbel"}, default="truncated"
        How ``predict`` estimates the attention output from the top-k keys (see
        :func:`sktransformer.attention.knn_attention`).
    gradient : {"exact", "sampled"}, default="exact"
        ``"exact"``: the leave-one-out loss of the truncated (top-k) prediction and its
        exact gradient. ``"sampled"``: the loss of the full softmax prediction, estimated
        from ``n_samples`` lazy-Gumbel draws per query, and the random-walk estimates of
        its gradient (:class:`sktransformer.attention.KNNAttention`): unbiased, noisier,
        and it never forms the top-k gradient tensors.
    n_components : int or None, default=None
        Dimension of the projection; ``None`` keeps ``n_features``.
    max_iter : int, default=100
        Optimizer steps (0 keeps the identity projection: plain softmax-weighted kNN).
    early_stopping : bool, default=True
        Hold out ``validation_fraction`` of the training rows (neither queries nor keys
        while learning), score the projection on them after each step, stop once
        ``n_iter_no_change`` steps improved their error by no more than ``tol``, and keep
        the best projection seen, the identity (step 0) included. The keys of the fitted
        model are then all the training rows.
    validation_fraction : float, default=0.1
        Share of the training rows held out when ``early_stopping``.
    n_iter_no_change : int, default=10
        Steps without improvement before stopping early.
    tol : float, default=1e-4
        The least decrease of the validation error (standardized targets) that counts as
        an improvement.
    learning_rate : float, default=0.01
    batch_size : int or None, default=256
        Training queries per step (a fresh minibatch each step); ``None``: all.
    n_samples : int, default=32
        Samples per query of the ``"tail"`` and ``"gumbel"`` estimators, and draws per
        query of ``gradient="sampled"``.
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
    random_state : int, RandomState instance or None, default=None
        Seeds a local ``torch.Generator`` (initial projection, minibatches, sampling).
    verbose : int, default=0
        1: a progress bar over the steps; 2: also the loss of each step (logged).

    Attributes
    ----------
    projection_ : ndarray of shape (`n_features_in_`, n_components)
    loss_curve_ : list of float
        Leave-one-out mean squared error (standardized targets) of each step's minibatch;
        with ``gradient="sampled"``, its Monte Carlo estimate.
    n_iter_ : int
        Optimizer steps run.
    validation_loss_curve_ : list of float or None
        With ``early_stopping``: the mean squared error (standardized targets) of the
        held-out rows' predictions from the other rows, before the first step and after
        each; else None.
    best_validation_loss_ : float or None
        The least of ``validation_loss_curve_``: its projection was kept.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from sktransformer import KNNAttentionRegressor
    >>> X, y = make_friedman1(300, random_state=0)
    >>> reg = KNNAttentionRegressor(random_state=0, device="cpu").fit(X, y)
    >>> reg.loss_curve_[-1] < reg.loss_curve_[0]
    True
    """

    _parameter_constraints = {
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "approximation": [StrOptions({"truncated", "tail", "gumbel"})],
        "gradient": [StrOptions({"exact", "sampled"})],
        "n_components": [None, Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [None, Interval(Integral, 1, None, closed="left")],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_neighbors=32, *, temperature=4.0,
                 approximation="truncated",
                 gradient="exact", n_components=None, max_iter=100, early_stopping=True,
                 validation_fraction=0.1, n_iter_no_change=10, tol=1e-4,
                 learning_rate=0.01, batch_size=256, n_samples=32, device="auto",
                 random_state=None, verbose=0):
        self.n_neighbors = n_neighbors
        self.temperature = temperature
        self.approximation = approximation
        self.gradient = gradient
        self.n_components = n_components
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_samples = n_samples
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    _array_attributes = ("projection_", "_keys", "_values", "_x_mean", "_x_scale",
                         "_y_mean", "_y_scale")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _attend(self, Q, K, V, n_neighbors, estimator="truncated", generator=None):
        return knn_attention(_EUCLIDEAN.queries(Q), _EUCLIDEAN.keys(K), V, n_neighbors,
                             estimator=estimator,
                             scale=_EUCLIDEAN.logit_scale / self.temperature,
                             n_samples=self.n_samples, generator=generator)

    def _split(self, n, device, generator):
        """The rows to learn from and the held-out rows (None without early stopping, or
        with fewer than three rows: two to learn from, one held out)."""
        rows = torch.arange(n, device=device)
        n_held = math.ceil(self.validation_fraction * n)
        if not self.early_stopping or self.max_iter == 0 or n - n_held < 2:
            return rows, None
        order = torch.randperm(n, generator=generator, device=generator.device).to(device)
        return order[n_held:].sort().values, order[:n_held].sort().values

    @logs_verbosely
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Learn the projection by leave-one-out kNN attention error.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        self : KNNAttentionRegressor
        """
        space = output_space(X)
        X, y = check_data_and_target(self, X, y, multi_output=True, y_numeric=True)
        check_squared_scale(X, fit=True)
        if not np.isfinite(np.square(np.asarray(y, dtype=np.float64)).sum()):
            raise ValueError("y has values whose squares overflow float64; rescale y.")
        if len(X) < 2:
            raise ValueError(f"n_samples={len(X)}: leave-one-out needs at least 2 samples.")
        if self.gradient == "sampled":  # the draws of a step's queries: indices and values
            check_allocation("n_samples", self.n_samples,
                             16 * self.n_samples * min(self.batch_size or len(X), len(X)))
        device = resolve_device(self.device, data=X)
        dtype = torch_dtype(X)  # float32 data: float32 throughout
        generator = make_generator(self.random_state, device=device)
        self._y_1d = y.ndim == 1
        Xt = to_tensor(X, device, dtype=dtype)
        Y = to_tensor(y.reshape(len(y), -1).astype(np.float64), device, dtype=dtype)
        x_mean, x_scale = _mean_and_scale(Xt)
        y_mean, y_scale = _mean_and_scale(Y)
        Xs, Ys = (Xt - x_mean) / x_scale, (Y - y_mean) / y_scale
        d = X.shape[1]
        p = self.n_components or d
        # the projection, its gradient and Adam's moments, and the projected points with
        # their autograd intermediates (the peak resident memory of small fits, measured)
        check_allocation("n_components", p, dtype.itemsize * p * (6 * d + 8 * len(X)))
        P = torch.eye(d, p, dtype=dtype, device=device)
        if p != d:
            P = torch.randn(d, p, generator=generator, dtype=dtype,
                            device=device) / math.sqrt(d)
        P.requires_grad_(True)
        optimizer = torch.optim.Adam([P], lr=self.learning_rate)
        train, held_out = self._split(len(X), device, generator)
        n = len(train)
        Xtr, Ytr = Xs[train], Ys[train]
        k = min(self.n_neighbors, n - 1)
        backward = "topk" if self.gradient == "exact" else "sampled"
        self.loss_curve_ = []
        watch = None if held_out is None else _Validation(self, Xtr, Ytr, Xs[held_out],
                                                          Ys[held_out], P)
        bar = progress(self.max_iter, self.verbose, "steps")
        for _ in range(self.max_iter):
            rows = torch.arange(n, device=device)
            if self.batch_size is not None and self.batch_size < n:
                rows = torch.randperm(n, generator=generator,
                                      device=generator.device)[:self.batch_size].to(device)
            Z = Xtr @ P
            # leave one out: query i never sees its own key
            pred = knn_attention_grad(_EUCLIDEAN.queries(Z[rows]), _EUCLIDEAN.keys(Z), Ytr,
                                      k, backward=backward,
                                      scale=_EUCLIDEAN.logit_scale / self.temperature,
                                      n_samples=self.n_samples, generator=generator,
                                      exclude=rows)
            loss = (pred - Ytr[rows]).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            self.loss_curve_.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{self.loss_curve_[-1]:.4f}", refresh=False)
            if self.verbose > 1:
                logger.info(f"step {len(self.loss_curve_)}: leave-one-out MSE {float(loss):.5f}")
            if watch is not None and watch.stops(P):
                break
        bar.close()
        self.n_iter_ = len(self.loss_curve_)
        self.validation_loss_curve_ = None if watch is None else watch.curve
        self.best_validation_loss_ = None if watch is None else min(watch.curve)
        if watch is not None:
            P = watch.best
        self.projection_ = to_numpy(P.detach())
        self._keys = to_numpy(Xs @ P.detach())
        self._values = to_numpy(Ys)
        self._x_mean, self._x_scale = to_numpy(x_mean), to_numpy(x_scale)
        self._y_mean, self._y_scale = to_numpy(y_mean), to_numpy(y_scale)
        self._publish(space)
        return self

    @follows_input
    def predict(self, X):
        """Attention over the training set from each row of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_targets)
        """
        check_is_fitted(self)
        X = check_data(self, X, reset=False)
        check_squared_scale(X)
        if self.approximation != "truncated":  # the draws per query: indices and values
            check_allocation("n_samples", self.n_samples, 16 * self.n_samples)
        device = resolve_device(self.device, fallback=True, data=X)
        generator = make_generator(self.random_state, device=device)
        dtype = torch_dtype(self._keys)  # the fitted arrays' (X's in fit)

        def fitted(name):
            return to_tensor(getattr(self, name), device, dtype=dtype)

        with torch.inference_mode():
            Q = (to_tensor(X, device, dtype=dtype) - fitted("_x_mean")) / fitted("_x_scale")
            Q = Q @ fitted("projection_")
            out = self._attend(Q, fitted("_keys"), fitted("_values"),
                               min(self.n_neighbors, self._keys.shape[0]), self.approximation,
                               generator)
            y = (out * fitted("_y_scale") + fitted("_y_mean")).to(torch_dtype(X))
        return y.reshape(-1) if self._y_1d else y


class _Validation:
    """Early stopping: the held-out rows' error under each projection, the best one."""

    def __init__(self, estimator, keys, values, queries, targets, P):
        self.estimator, self.keys, self.values = estimator, keys, values
        self.queries, self.targets = queries, targets
        self.curve, self.best, self.waited = [], None, 0
        self.stops(P)  # the identity (or the initial projection): step 0

    def stops(self, P):
        """Score ``P``; whether ``n_iter_no_change`` steps have not improved by ``tol``."""
        est = self.estimator
        with torch.no_grad():
            P = P.detach()
            pred = est._attend(self.queries @ P, self.keys @ P, self.values,
                               min(est.n_neighbors, len(self.keys)))
            loss = float((pred - self.targets).square().mean())
        best = min(self.curve, default=math.inf)
        self.waited = self.waited + 1 if loss > best - est.tol else 0
        if loss < best or self.best is None:  # (a first loss of NaN keeps its P)
            self.best = P.clone()
        self.curve.append(loss)
        return self.waited >= est.n_iter_no_change
