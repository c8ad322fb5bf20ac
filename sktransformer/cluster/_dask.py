"""Full Lloyd on a Dask array: every layer runs on the workers, only ``k x d`` comes back.

The driver of :meth:`BaseCircuitClustering.fit` for dask input. X is never gathered: each
pass maps a function of ``_dask_blocks`` over the row blocks, keeps what it learns per row
(labels, distances) on the workers, and reduces the per-block summaries (center sums,
weights, costs, label changes) in a tree, so the client receives ``O(k d)`` numbers per
pass. The loop is ``_lloyd.run_layers``'s: the same relocation of empty clusters, the same
tolerance and strict convergence, so from the same initial centers the fit equals the
in-memory one up to the order of floating-point sums.

Initialization is k-means|| (Bahmani et al., 2012), as in dask-ml and Spark: a few passes
that each draw about ``2 k`` rows in proportion to their squared distance to the rows drawn
so far, then weighted k-means++ and Lloyd on those candidates in the client (about ``10 k``
rows), the best of five restarts (cheap next to a pass over the data). It needs
``2 * INIT_ROUNDS + 2`` passes over the data, where greedy k-means++ would need ``k``.
Trimmed k-means seeds trimmed k-means++ on the candidates.
"""

import functools
import sys

import numpy as np
import torch
from sklearn.utils import check_random_state

from ..attention import get_score
from ..utils import (
    logger,
    make_generator,
    progress,
    sample_stride,
    squared_scale_error,
)
from . import _dask_blocks as blocks
from . import _likelihood, _lloyd
from ._init import kmeans_plusplus
from ._updates import Mean, Trim, normalize_rows

SUPPORTED = ("TransformerKMeans (the exact circuit, hard or soft), SphericalTransformerKMeans "
             "and TrimmedTransformerKMeans(trimming='global')")
INIT_ROUNDS = 5  # k-means|| rounds (Bahmani et al. find 5 with l = 2k enough)
OVERSAMPLING = 2.0  # l = OVERSAMPLING * n_clusters rows drawn per round, as dask-ml
CANDIDATE_RESTARTS = 5  # k-means++ and layers on the few candidates: the best of these
SELECTION_BINS = 256  # histogram bins per round of the trimming threshold's selection
SELECTION_GATHER = 4096  # distances gathered for the last round of that selection


def is_dask(X):
    """Whether X is a Dask collection (without importing dask when it is not loaded)."""
    if "dask" not in sys.modules:
        return False
    import dask

    return dask.is_dask_collection(X)


class PerBlock(list):
    """An argument with one value per block (the seeds of random draws)."""


def _fold(merge, items):
    return functools.reduce(merge, items)


class Blocks:
    """The row blocks of X and of the weights, with a state per block on the workers."""

    def __init__(self, X, w):
        self.X = list(X.to_delayed().ravel())
        self.w = [None] * len(self.X) if w is None else list(w.to_delayed().ravel())
        self.reset()

    def reset(self):
        self.state = [None] * len(self.X)

    def run(self, fn, merge, *args, keep=False, fan_in=8):
        """``fn(X_block, w_block, state, *args)`` on every block; the merged summary.

        With ``keep`` the new states are persisted where they were computed (on the
        workers under dask.distributed) and replace the old ones, which are released.
        """
        import dask

        shared = [dask.delayed(a) if isinstance(a, np.ndarray) else a for a in args]
        out = []
        for i, (x, w, s) in enumerate(zip(self.X, self.w, self.state)):
            call = [a[i] if isinstance(a, PerBlock) else a for a in shared]
            out.append(dask.delayed(fn, pure=False, nout=2)(x, w, s, *call))
        if keep:
            out = dask.persist(*out)
            self.state = [o[0] for o in out]
        parts = [o[1] for o in out]
        while len(parts) > 1:
            parts = [dask.delayed(_fold, pure=True)(merge, parts[i:i + fan_in])
                     for i in range(0, len(parts), fan_in)]
        return dask.compute(parts[0])[0]

    def labels(self, key, sizes):
        """The per-block labels as one lazy dask array (as dask-ml's ``labels_``)."""
        import dask
        import dask.array as da

        parts = [da.from_delayed(dask.delayed(dict.__getitem__)(s, key), (m,), np.int32)
                 for s, m in zip(self.state, sizes)]
        return da.concatenate(parts)


# -- validation --------------------------------------------------------------------------


def check_array(estimator, X, *, reset):
    """A 2-D float dask array with one column chunk and known row chunks (lazy)."""
    import dask.array as da

    names = None
    if hasattr(X, "to_dask_array"):  # a dask DataFrame
        names = np.asarray(X.columns, dtype=object)
        X = X.to_dask_array(lengths=True)
    if not isinstance(X, da.Array):
        raise TypeError(f"Expected a dask array or DataFrame, got {type(X).__name__}.")
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D dask array, got one of shape {X.shape}.")
    if X.dtype not in (np.float32, np.float64):
        if X.dtype.kind not in "biuf":
            raise ValueError(f"dask array of dtype {X.dtype}: expected numbers.")
        X = X.astype(np.float64)
    if any(np.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    X = X.rechunk({1: -1})
    n_features = X.shape[1]
    for size, what in ((X.shape[0], "sample"), (n_features, "feature")):
        if size == 0:  # (scikit-learn's words for numpy data)
            raise ValueError(f"Found array with 0 {what}(s) (shape={X.shape}) while a "
                             f"minimum of 1 is required by {type(estimator).__name__}.")
    if reset:
        estimator.n_features_in_ = n_features
        if names is not None and all(isinstance(c, str) for c in names):
            estimator.feature_names_in_ = names
        else:
            estimator.__dict__.pop("feature_names_in_", None)
    elif n_features != estimator.n_features_in_:
        raise ValueError(f"X has {n_features} features, but {type(estimator).__name__} is "
                         f"expecting {estimator.n_features_in_} features as input.")
    return X


def _check_weight(sample_weight, X):
    import dask.array as da

    if sample_weight is None:
        return None
    if not isinstance(sample_weight, da.Array):
        sample_weight = np.asarray(sample_weight, dtype=X.dtype)
        if sample_weight.ndim == 0:
            sample_weight = np.full(X.shape[0], sample_weight, dtype=X.dtype)
    if sample_weight.shape != (X.shape[0],):
        raise ValueError(f"sample_weight.shape == {sample_weight.shape}, expected "
                         f"({X.shape[0]},).")
    if not isinstance(sample_weight, da.Array):
        return da.from_array(sample_weight, chunks=(X.chunks[0],))
    return sample_weight.astype(X.dtype).rechunk((X.chunks[0],))


def _check_stats(stats, X, dtype):
    n, d = X.shape
    if stats["not_finite"]:
        raise ValueError("Input X contains NaN or infinity.")
    if stats["w_bad"]:
        raise ValueError("sample_weight contains NaN, infinity or negative values.")
    if not stats["w_total"] > 0:
        raise ValueError("Sample weights must contain at least one non-zero number.")
    error = squared_scale_error(stats["max_abs"][0], n, d, dtype, underflow=True)
    if error:
        raise ValueError(error)


# -- fitting -----------------------------------------------------------------------------


def fit(estimator, X, sample_weight):
    """Fit ``estimator`` (a supported clustering circuit) on the dask collection X."""
    kind = estimator._dask_update()
    X = check_array(estimator, X, reset=True)
    n, d = X.shape
    k = estimator.n_clusters
    if n < k:
        raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
    w = _check_weight(sample_weight, X)
    estimator._check_fit_params(X, w)
    n_init = estimator._n_init()
    random_state = check_random_state(estimator.random_state)
    init = estimator._check_init(X, random_state)
    generator = make_generator(estimator.random_state)
    X = X.map_blocks(estimator._preprocess, dtype=X.dtype)
    data = Blocks(X, w)
    spec = {"device": str(estimator.device), "n_clusters": k, "attention": estimator._attention,
            "batch_size": estimator.batch_size, "temperature": kind.get("temperature"),
            "update": kind["update"]}
    stats = data.run(blocks.stats, blocks.merge_stats, spec)
    _check_stats(stats, X, X.dtype)
    shift = np.zeros(d, dtype=X.dtype)
    if estimator._center_data and get_score(spec["attention"]).translation_invariant:
        shift = stats["mean"].astype(X.dtype)
    mean_var = float((stats["m2"] / n).mean())
    if kind["update"] == "trim":  # the median and a trimmed scale, as in memory
        sample = torch.as_tensor(np.asarray(X[::sample_stride(n, d)].compute()))  # bounded
        robust = estimator._location_and_scale(sample)
        if robust is not None:
            shift, mean_var = robust[0].numpy().astype(X.dtype), robust[1]
    tol = estimator._tol(mean_var)
    fitter = _Fitter(estimator, data, spec, kind, shift, X.dtype, stats["w_total"])
    best = None
    for run in range(n_init):
        if run > 0 and callable(estimator.init):
            init = estimator._check_init(X, random_state)
        data.reset()
        centers = fitter.initialize(init, generator, tol)
        result = fitter.run_layers(centers, tol)
        if best is None or result["inertia"] < best["inertia"]:
            best = {**result, "state": data.state}
    data.state = best["state"]
    estimator.cluster_centers_ = (best["centers"].numpy() + shift).astype(X.dtype)
    estimator.labels_ = data.labels("marked" if kind["update"] == "trim" else "labels",
                                    X.chunks[0])
    estimator.inertia_ = best["inertia"]
    estimator.n_iter_ = best["n_iter"]
    estimator._n_features_out = estimator.n_clusters_ = k
    if "thresholds" in best:
        estimator.thresholds_ = best["thresholds"]
    fit_mixture(estimator, X, sample_weight)
    return int((best["counts"] > 0).sum())


def _first_reaching(cumulative, target):
    """The first index where ``cumulative >= target`` (the last one if rounding left it
    just short)."""
    reached = np.flatnonzero(cumulative >= target)
    return int(reached[0]) if len(reached) else len(cumulative) - 1


class _Fitter:
    """One estimator's layers on the blocks: the loop of ``_lloyd.run_layers``, by passes."""

    def __init__(self, estimator, data, spec, kind, shift, dtype, total_weight):
        self.estimator, self.data, self.spec, self.kind = estimator, data, spec, kind
        self.shift, self.dtype, self.total_weight = shift, dtype, total_weight
        self.k = estimator.n_clusters

    def _tensor(self, array):
        return torch.as_tensor(np.asarray(array, dtype=self.dtype))

    # -- initial centers -------------------------------------------------------------

    def _seeds(self, generator):
        seed = int(torch.randint(0, 2 ** 62, (1,), generator=generator))
        sequence = np.random.SeedSequence(seed)
        return PerBlock(int(s.generate_state(1, np.uint64)[0] >> np.uint64(1))
                        for s in sequence.spawn(len(self.data.X)))

    def _random_rows(self, generator, n_rows):
        top = self.data.run(blocks.random_keys, blocks.random_merge, self.spec,
                            self._seeds(generator), n_rows)
        return top["rows"], int(top["positive"][0])

    def initialize(self, init, generator, tol):
        """Initial centers in the shifted coordinates (a tensor of X's dtype)."""
        if isinstance(init, np.ndarray):
            centers = self._tensor(init) - self._tensor(self.shift)
            return self.estimator._preprocess_centers(centers, None)
        if init == "random":
            rows, positive = self._random_rows(generator, self.k)
            if positive < self.k:
                raise ValueError(f"init='random' draws n_clusters={self.k} distinct rows in "
                                 f"proportion to sample_weight, but only {positive} rows "
                                 "have a positive weight.")
            return self._tensor(rows - self.shift)
        return self._kmeans_parallel(generator, tol)

    def _kmeans_parallel(self, generator, tol):
        """k-means||, then weighted (trimmed) k-means++ and the layers on the candidates."""
        first, _ = self._random_rows(generator, 1)
        new = (first - self.shift).astype(self.dtype)
        candidates = [new]
        budget = OVERSAMPLING * self.k
        for _ in range(INIT_ROUNDS):
            if len(new):  # the distances to the candidates drawn last
                potential = self.data.run(blocks.closest, blocks.add, self.spec, self.shift,
                                          new, keep=True)["potential"]
            if not potential > 0:
                break
            drawn = self.data.run(blocks.oversample, blocks.concat, self.spec,
                                  self._seeds(generator), budget / potential)["rows"]
            new = (drawn - self.shift).astype(self.dtype)
            candidates.append(new)
        candidates = np.concatenate(candidates)
        if len(candidates) < self.k:  # tiny data: top up with random rows
            rows, _ = self._random_rows(generator, self.k)
            candidates = np.concatenate([candidates, (rows - self.shift).astype(self.dtype)])
        weight = self.data.run(blocks.candidate_weights, blocks.add, self.spec, self.shift,
                               candidates)["weight"]
        self.data.reset()
        return self._cluster_candidates(candidates, weight, generator, tol)

    def _cluster_candidates(self, candidates, weight, generator, tol):
        X = self._tensor(candidates)
        w = torch.as_tensor(weight).to(X.dtype)
        rows = _lloyd.layer_rows(len(X), self.k, X.shape[1], device=X.device)
        points = _lloyd.PointTokens(X, rows=rows, attention=self.spec["attention"])
        trim = self.kind.get("trim", 0.0)
        best = None
        for _ in range(CANDIDATE_RESTARTS):
            centers, _ = kmeans_plusplus(points, self.k, generator=generator, sample_weight=w,
                                         trim=trim)
            update = (Trim(self.k, trim, "global") if self.kind["update"] == "trim" else
                      Mean(sphere=self.kind.get("sphere", False)))
            centers, _, inertia, _ = _lloyd.run_layers(
                points, w, centers, update=update, max_iter=self.estimator.max_iter, tol=tol)
            if best is None or inertia < best[1]:
                best = centers, inertia
        return best[0]

    # -- the layers ------------------------------------------------------------------

    def _layer(self, centers, update=None):
        spec = self.spec if update is None else {**self.spec, "update": update}
        return self.data.run(blocks.layer, blocks.add, spec, centers.numpy(), self.shift,
                             keep=True)

    def _threshold(self):
        """The trimming threshold: the least squared distance ``t`` such that the points
        within ``t`` carry ``1 - trim`` of the weight (``Trim``'s weighted inverted-CDF
        quantile), by an exact distributed selection: histogram rounds narrow a bracket
        until few distances are left in it, which are then gathered and sorted."""
        target = (1 - self.kind["trim"]) * self.total_weight * (1 - 1e-9)
        lo, hi = -1.0, np.inf
        for _ in range(1000):
            got = self.data.run(blocks.below, blocks.min_of, self.spec, lo, hi,
                                SELECTION_BINS)
            vmin, vmax = got["lo_hi"][0], -got["lo_hi"][1]
            if got["count"] <= SELECTION_GATHER or vmin == vmax:
                break
            if np.isinf(hi):
                hi = vmax
                continue
            edges = np.linspace(lo, hi, SELECTION_BINS + 1)
            j = _first_reaching(got["at_or_below"] + np.cumsum(got["hist"]), target)
            lo, hi = edges[j], edges[j + 1]
        else:  # pragma: no cover - each round splits the bracket
            raise RuntimeError("The trimming threshold's selection did not converge.")
        if vmin == vmax and got["count"] > SELECTION_GATHER:
            return float(vmin)
        inside = self.data.run(blocks.values_in, blocks.concat, self.spec, lo, hi)
        order = np.argsort(inside["values"], kind="stable")
        cumulative = got["at_or_below"] + np.cumsum(inside["weights"][order])
        return float(inside["values"][order][_first_reaching(cumulative, target)])

    def _relocate(self, sums, weight, *, hard, threshold=None):
        """``_lloyd.relocate_empty`` with the farthest points found by a distributed top-k."""
        empty = torch.nonzero(weight == 0).flatten()
        if empty.numel() == 0:
            return
        far = self.data.run(blocks.farthest, blocks.farthest_merge, self.spec, self.shift,
                            empty.numel(), threshold)
        if far["dist"][0] <= 0:  # (every point on its center: _lloyd.relocate_empty's rule)
            return
        _lloyd.reseat(sums, weight, empty, self._tensor(far["rows"]), self._tensor(far["w"]),
                      torch.as_tensor(far["labels"]).long() if hard else None)

    def _step(self, centers):
        """One layer: new centers, labels changed, the objective of ``centers``, counts."""
        layer = self._layer(centers)
        if self.kind["update"] == "mean":
            sums, weight = self._tensor(layer["sums"]), self._tensor(layer["weight"])
            soft = self.spec["temperature"] is not None
            self._relocate(sums, weight, hard=not soft)
            new = _lloyd.average(sums, weight, centers)
            if self.kind.get("sphere"):
                new = normalize_rows(new, centers)
            return new, layer["changed"], layer["cost"], layer["counts"]
        threshold = self._threshold()
        trimmed = self.data.run(blocks.trim_sums, blocks.trim_merge, self.spec,
                                centers.numpy(), self.shift, threshold, keep=True)
        sums, weight = self._tensor(trimmed["sums"]), self._tensor(trimmed["weight"])
        self._relocate(sums, weight, hard=True, threshold=threshold)
        return (_lloyd.average(sums, weight, centers), trimmed["changed"], trimmed["cost"],
                layer["counts"])

    def run_layers(self, centers, tol):
        verbose = self.estimator.verbose
        strict_capable = self.spec["temperature"] is None
        strict = False
        bar = progress(self.estimator.max_iter, verbose, "layers")
        for i in range(self.estimator.max_iter):
            new, changed, objective, counts = self._step(centers)
            bar.update(1)
            if verbose:
                logger.info(f"Iteration {i}, inertia {objective}.")
            shift_tot = float((new - centers).square().sum())
            centers = new
            reason = _lloyd.stop_reason(i, strict=strict_capable and changed == 0,
                                        center_shift=shift_tot, tol=tol, verbose=verbose)
            if reason:
                strict = reason == "strict"
                break
        bar.close()
        result = {"centers": centers, "n_iter": i + 1, "inertia": objective, "counts": counts}
        if self.kind["update"] == "mean":
            if not strict:
                last = self._layer(centers, update="assign")
                result.update(inertia=last["cost"], counts=last["counts"])
            return result
        if not strict:
            result["counts"] = self._layer(centers, update="assign")["counts"]
        threshold = self._threshold()
        final = self.data.run(blocks.trim_sums, blocks.trim_merge, self.spec, centers.numpy(),
                              self.shift, threshold, keep=True)
        radius = float(final["far_kept"][0]) if final["trimmed"] else np.inf
        result.update(inertia=final["cost"], thresholds=np.full(self.k, radius))
        return result


# -- using a fitted model ----------------------------------------------------------------


def map_rows(estimator, method, X, *, n_columns=None, dtype):
    """``method`` of the fitted estimator on each block of X, as a lazy dask array."""
    X = check_array(estimator, X, reset=False)
    if n_columns is None:
        return X.map_blocks(method, dtype=dtype, drop_axis=1, chunks=(X.chunks[0],))
    return X.map_blocks(method, dtype=dtype, chunks=(X.chunks[0], (n_columns,)))


def _block_sums(estimator, method, X, sample_weight):
    """``method(x, w)`` of each row block of X (a pair of floats), computed on the workers
    and added."""
    import dask

    X = check_array(estimator, X, reset=False)
    w = _check_weight(sample_weight, X)
    weights = [None] * X.numblocks[0] if w is None else list(w.to_delayed().ravel())
    parts = [dask.delayed(method)(x, sw) for x, sw in zip(X.to_delayed().ravel(), weights)]
    return np.sum(np.asarray(dask.compute(*parts), dtype=np.float64), axis=0)


def score(estimator, X, sample_weight):
    """The summed log-likelihood of the samples the score counts, and their weight."""
    return tuple(float(v) for v in _block_sums(estimator, estimator._score_sums, X,
                                               sample_weight))


def inertia(estimator, X, sample_weight):
    """The inertia of X, summed over its blocks."""
    return float(_block_sums(estimator, lambda x, w: [estimator.inertia(x, w)], X,
                             sample_weight)[0])


def _member_block(estimator, x, w):
    cost, labels = estimator._costs(x)
    k = estimator.n_clusters
    weight, summed = _likelihood.member_sums(labels, cost, w, k)
    return np.concatenate([weight, summed])


def fit_mixture(estimator, X, sample_weight):
    """The fitted estimator's mixture, from its members' costs summed over the blocks."""
    k = estimator.n_clusters
    sums = _block_sums(estimator, functools.partial(_member_block, estimator), X,
                       sample_weight)
    estimator._fit_mixture(sums[:k], sums[k:])


def by_blocks(*, columns):
    """Decorate ``predict``-like methods: on a dask array they map over its row blocks
    lazily (``columns``: one output column per cluster, else one label per row)."""
    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, X):
            if not is_dask(X):
                return method(self, X)
            if columns:
                return map_rows(self, functools.partial(method, self), X,
                                n_columns=self.n_clusters_, dtype=self.cluster_centers_.dtype)
            return map_rows(self, functools.partial(method, self), X, dtype=np.int32)
        return wrapper
    return decorate
