"""The calls into the compiled Lloyd loop (:mod:`._lloyd`) from the torch-held points."""

import threading
import warnings

import numpy as np
import torch

from ...utils import CompiledLoops, one_blas_thread, thread_budget


def _build(numba, cache):
    from . import _hamerly, _lloyd, _mixture  # (numba imported, cached on disk where it can)

    return {"dense_loop": _lloyd.dense_loop, "csr_loop": _lloyd.csr_loop,
            "shifted": _lloyd.shifted, "shifted_single": _lloyd.shifted_single,
            "hamerly_loop": _hamerly.hamerly_loop, "swap_trials": _lloyd.swap_trials,
            "kmeans_plusplus": _lloyd.kmeans_plusplus, "moments": _lloyd.moments,
            "log_likelihoods": _mixture.log_likelihoods}


_LOOPS = CompiledLoops(_build, "numba's Lloyd loop", "torch's layers")
_DTYPES = (torch.float32, torch.float64)
_EUCLIDEAN = ("euclidean", "dot")  # the scores whose arg-max is the nearest center
_ROWS_PER_THREAD = 2048  # fewer rows a thread: one thread (a team costs more than it saves)

# The plain loop (algorithm="lloyd", spherical k-means) on dense float64 points of this
# many rows runs the torch layers (two workers, MKL's large products) from TORCH_MIN_WIDTH
# center coordinates (k x d) on. Fit times over scikit-learn's, 20 layers from the same
# start, the torch layers' against the loop's: float64, 0.79 against 0.91 at 200,000 x
# 128, k = 256 (k x d = 32,768); but 0.97 against 0.86 at 200,000 x 128, k = 128, 0.94
# against 0.79 at 200,000 x 64, k = 128, 1.15 against 0.81 at 200,000 x 32, k = 128;
# float32, 0.90 against 0.82 at 200,000 x 128, k = 512, 0.83 against 0.76 at 200,000 x
# 128, k = 256, 1.19 against 0.74 at 10^6 x 16, k = 16, 1.23 against 0.82 at 2 x 10^6 x
# 32, k = 16: float32 keeps the loop.
# The bounds' loop ("auto"), which scores float64 points in float32, stays compiled at any
# width: 0.53 against the torch layers' 0.82 at 200,000 x 128, k = 256, 0.48 against 0.91 at
# 200,000 x 32, k = 128, 0.60 against 1.08 at 200,000 x 128, k = 32.
TORCH_MIN_ROWS = 1 << 17
TORCH_MIN_WIDTH = 1 << 15
# and beyond this size of the loops' copy of X (shifted; the bounds' loop: float32): the
# torch layers shift chunk by chunk, so that a fit of data near the memory's size does not
# need it twice
TORCH_MIN_BYTES = 1 << 30
# "auto" takes the bounds from this many rows on: on fewer (fits of a few milliseconds)
# their book-keeping costs more than it saves: 0.74-0.92 of scikit-learn's time against
# 0.65-0.77 on iris, wine, digits and breast_cancer. algorithm="hamerly" asks for them at
# any size.
BOUNDS_MIN_ROWS = 10_000
_COPY_MAX = 1 << 22  # elements of the shifted copy an assignment alone may make (32 MiB)

def lloyd_available(points, sample_weight=None, *, n_clusters=None, bounds=None):
    """Whether the compiled loop can run a fit on these point tokens: on the CPU, float32
    or float64, scored by squared Euclidean distance, and numba's loops built; and CSR, or
    dense unless the fit is the torch layers' (:func:`_torch_fit`; never with
    ``bounds``)."""
    if points.device.type != "cpu" or points.dtype not in _DTYPES:
        return False
    if points.score.name not in _EUCLIDEAN:
        return False
    if not bounds and _torch_fit(points, n_clusters):
        return False
    if sample_weight is not None and sample_weight.device.type != "cpu":
        return False
    return _LOOPS.get() is not None


def _torch_fit(points, n_clusters):
    """Whether a fit of ``n_clusters`` centers (None: unknown) on dense points runs the
    torch layers: from ``TORCH_MIN_ROWS`` rows, in float64 with ``TORCH_MIN_WIDTH`` center
    coordinates (or an unknown number), or with a copy of ``TORCH_MIN_BYTES``."""
    if points.X is None or points.n < TORCH_MIN_ROWS:
        return False
    wide = n_clusters is None or n_clusters * points.d >= TORCH_MIN_WIDTH
    return ((points.dtype == torch.float64 and wide)
            or points.n * points.d * points.X.element_size() >= TORCH_MIN_BYTES)


def use_bounds(points, algorithm):
    """How a hard k-means fit on these points uses Hamerly's bounds (:mod:`._hamerly`):
    ``"always"`` (``algorithm="hamerly"``), ``"adaptive"`` (``"auto"``: from
    ``BOUNDS_MIN_ROWS`` rows on, with a float32 copy of X below ``TORCH_MIN_BYTES``) or
    ``None`` (the plain loop, or the torch layers; CSR points)."""
    if points.X is None or algorithm == "lloyd":
        return None
    if algorithm == "hamerly":
        return "always"
    if points.n < BOUNDS_MIN_ROWS or points.n * points.d * 4 >= TORCH_MIN_BYTES:
        return None
    return "adaptive"


def _serial_layer(numba):
    """Whether numba's threading layer takes parallel loops from one thread at a time
    (``workqueue``: another thread's launch aborts the process)."""
    try:
        return numba.threading_layer() == "workqueue"
    except ValueError:  # (no loop launched yet: the layer the configuration asks for)
        return numba.config.THREADING_LAYER == "workqueue"


def _threads(n_samples):
    """Threads for a pass over ``n_samples`` rows: within numba's and torch's counts (see
    :func:`~sktransformer.utils.thread_budget`: OMP_NUM_THREADS, threadpoolctl's limits
    and a joblib worker's share are followed), and ``_ROWS_PER_THREAD`` rows each."""
    import numba  # (built: numba is there)

    if _serial_layer(numba) and threading.current_thread() is not threading.main_thread():
        return 1  # (one thread's loops on the team at a time: the others' run serially)
    budget, torch_threads = thread_budget(), torch.get_num_threads()
    most = numba.get_num_threads()
    if torch.get_num_threads() != torch_threads:
        # numba's OpenMP layer, started by its first call, set the runtime it shares with
        # torch to every core: torch's count (OMP_NUM_THREADS, say) is put back
        torch.set_num_threads(torch_threads)
    return max(1, min(most, budget, n_samples // _ROWS_PER_THREAD))


def run_lloyd(points, sample_weight, centers, *, max_iter, tol, bounds=None, sphere=False):
    """Hard k-means layers from ``centers`` (shifted coordinates) until convergence, in one
    compiled call: what :func:`~sktransformer.cluster._lloyd.run_layers` returns for the
    mean update, ``(centers, labels, inertia, n_iter)`` as tensors and numbers. ``bounds``
    (:func:`use_bounds`): Hamerly's loop on dense points (:mod:`._hamerly`), the same
    layers. ``sphere``: the means scaled to unit norm (spherical k-means; no bounds)."""
    weight = (np.ones(points.n, dtype=_numpy(points.dtype)) if sample_weight is None
              else _array(sample_weight.to(points.dtype)))
    out, n_iter, labels, dist = _loop(points, weight, centers, max_iter, tol, bounds=bounds,
                                      sphere=sphere)
    # (not np.dot: numpy's BLAS threads, outside the limit, then spin against the loop's)
    inertia = float(np.sum(dist if sample_weight is None else dist * weight,
                           dtype=np.float64))
    out, labels, dist = torch.from_numpy(out), torch.from_numpy(labels), torch.from_numpy(dist)
    # the final assignment, for an assign() to these very centers (the mixture's spreads)
    points._compiled_final = out, labels, dist
    return out, labels, inertia, n_iter


def assign(points, centers):
    """The compiled assignment, ``(labels, squared distances)`` as tensors (to the final
    centers of the last compiled run on these points: that run's own, wherever the points
    are), or None where it cannot run, or where its shifted copy of dense points would be
    large (a fit's points have it already; the torch pass shifts chunk by chunk)."""
    final = points.__dict__.get("_compiled_final")
    if final is not None and final[0] is centers:
        return final[1:]
    if not lloyd_available(points):
        return None
    if (points.X is not None and "_compiled_rows" not in points.__dict__
            and points.n * points.d > _COPY_MAX):
        return None
    none = np.empty(0, dtype=_numpy(points.dtype))  # (the loop reads no weight then)
    _, _, labels, dist = _loop(points, none, centers, 0, 0.0)
    return torch.from_numpy(labels), torch.from_numpy(dist)


def _loop(points, weight, centers, max_iter, tol, bounds=None, sphere=False):
    """The compiled loop over the points (dense or CSR; ``bounds``: Hamerly's, dense):
    ``(centers, n_iter, labels, squared distances)`` as numpy arrays. ``max_iter=0``: the
    assignment alone."""
    loops = _LOOPS.get()
    start = _array(centers).copy()
    n, k = points.n, (start.shape[0] if max_iter else 0)  # (no sums for an assignment)
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n, dtype=start.dtype)
    n_threads = _threads(n)
    sums = np.empty((n_threads, k, points.d if k else 0), dtype=start.dtype)
    weights = np.empty((n_threads, k), dtype=start.dtype)
    # (held for every loop, CSR's too, which makes no product: see one_blas_thread)
    with one_blas_thread():
        if points.X is None:  # (CSR)
            out, n_iter, _ = loops["csr_loop"](
                _array(points.values), _array(points.cols), points.indptr, weight, start,
                max_iter, float(tol), n_threads, labels, dist, sums, weights, sphere)
        elif bounds:
            X, shift, S, x_sq = _scored(points)
            out, n_iter, _ = loops["hamerly_loop"](X, shift, S, x_sq, weight, start,
                                                   max_iter, float(tol), n_threads, labels,
                                                   dist, bounds == "adaptive")
        else:
            X, x_sq = _shifted(points)
            out, n_iter, _ = loops["dense_loop"](X, x_sq, weight, start, max_iter, float(tol),
                                                 n_threads, labels, dist, sums, weights,
                                                 sphere)
    return out, n_iter, labels, dist


def swap_trials(points, sample_weight, centers, *, n_candidates, n_layers, n_power):
    """The compiled :func:`~sktransformer.cluster._swaps._trials` (a list of center
    tensors, the most promising first), or None where it cannot run (CSR points, or where
    the compiled loop cannot)."""
    if points.X is None or not lloyd_available(points, sample_weight):
        return None
    X, x_sq = _shifted(points)
    weight = (np.ones(points.n, dtype=X.dtype) if sample_weight is None
              else _array(sample_weight.to(points.dtype)))
    trials, _ = _LOOPS.get()["swap_trials"](X, x_sq, weight, _array(centers), n_candidates,
                                             n_layers, n_power)
    return list(torch.from_numpy(trials))


def kmeans_plusplus(points, n_clusters, *, generator, sample_weight, n_local_trials):
    """The compiled :func:`~sktransformer.cluster._init.kmeans_plusplus` (``(centers,
    indices)``, the same draws from ``generator``), or None where it cannot run."""
    if points.X is None or not lloyd_available(points, sample_weight):
        return None
    X, x_sq = _shifted(points)
    weight = (np.ones(points.n) if sample_weight is None
              else _array(sample_weight.to(torch.float64)))
    # the draws as the torch seeding makes them: one, then n_local_trials per center
    first = float(torch.rand(1, dtype=torch.float64, generator=generator))
    draws = np.empty((n_clusters - 1, n_local_trials))
    for c in range(n_clusters - 1):
        draws[c] = torch.rand(n_local_trials, dtype=torch.float64, generator=generator)
    indices = torch.from_numpy(_LOOPS.get()["kmeans_plusplus"](X, x_sq, weight, first, draws))
    return torch.from_numpy(X[indices.numpy()]), indices


def mean_and_mean_variance(X, variance=True):
    """The column means of the tensor ``X`` (its dtype) and the mean of its column
    variances (0.0 without ``variance``), compiled, or None where the loops cannot take X
    (not on the CPU, not float32/64 or not contiguous). (Both, at 10^6 x 16: 11 ms,
    against 34 for torch's reductions by chunks; at 1,198 x 64, 0.07 against 0.39 ms,
    mostly torch's temporary X - mean.)"""
    if (X.device.type != "cpu" or X.dtype not in _DTYPES or not X.is_contiguous()
            or X.shape[0] == 0):
        return None
    found = summary(X.detach().numpy(), variance)
    return None if found is None else (torch.from_numpy(found[0]), found[1])


def summary(X, variance=True):
    """One fit's passes over the dense numpy ``X`` (float32 or float64, C-contiguous):
    ``(column means, mean column variance, largest absolute value)`` as
    :func:`mean_and_mean_variance` and :func:`~sktransformer.utils.check_squared_scale`
    need them (the means not finite where X is not), or None where the loops cannot run.
    """
    loops = _LOOPS.get()
    if loops is None or X.dtype not in (np.float32, np.float64) or X.shape[0] == 0:
        return None
    moments, args = loops["moments"], (np.ascontiguousarray(X), variance, _threads(X.shape[0]))
    if moments.signatures:
        mean, mean_var, largest = moments(*args)
    else:  # (its first compile: numba warns that parallel=True made no parallel loop of
        # an inner function it compiles with the flag; the prange runs in parallel)
        import numba

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", numba.NumbaPerformanceWarning)
            mean, mean_var, largest = moments(*args)
    return mean, float(mean_var), float(largest)


def _shifted(points):
    """The points shifted by ``points.shift`` (a copy, made once for the fit's runs; where
    the shift is zero, as for spherical k-means or X shifted in place by ``copy_x=False``,
    the points themselves) and their squared norms, which are the point tokens' too (the
    same for both scores here)."""
    cached = points.__dict__.get("_compiled_rows")
    if cached is None:
        X = _array(points.X)
        if points.shift.any():
            X, x_sq = _LOOPS.get()["shifted"](X, _array(points.shift), _threads(points.n))
        else:
            x_sq = np.einsum("ij,ij->i", X, X)
        cached = points._compiled_rows = X, _norms(points, x_sq)
    return cached


def _norms(points, x_sq):
    """The points' squared norms: those the point tokens have made already (the same
    norms, up to rounding), else ``x_sq``, which become theirs."""
    if "x_sq" in points.__dict__:
        return _array(points.x_sq)
    points.x_sq = torch.from_numpy(x_sq)
    return x_sq


# float64 points are scored in float32 where their shifted values lie within this range
# (their squares and products far from float32's overflow and underflow); else in float64
SINGLE_RANGE = (2.0 ** -40, 2.0 ** 40)


def _scored(points):
    """The rows of the bounds' loop (:mod:`._hamerly`): ``(X, shift, S, x_sq)``, the exact
    rows ``X - shift`` (the points as they are; or, with no shift, their shifted copy
    where a fit has made it, or points whose shift is zero), the copy ``S`` the loop
    scores (shifted: float32 for float64 points, made once a fit; float32 points' shifted
    copy, which is also X) and the squared norms of the exact rows."""
    cached = points.__dict__.get("_compiled_scored")
    if cached is not None:
        return cached
    none = np.zeros(0)
    if points.dtype == torch.float32:
        X, x_sq = _shifted(points)
        cached = X, none, X, x_sq
    else:
        copy = points.__dict__.get("_compiled_rows")
        X = copy[0] if copy is not None else _array(points.X)
        shift = (_array(points.shift) if copy is None and points.shift.any()
                 else np.zeros(points.d))
        S, x_sq, top = _LOOPS.get()["shifted_single"](X, shift, _threads(points.n))
        if top > 0 and not SINGLE_RANGE[0] <= top <= SINGLE_RANGE[1]:
            X, x_sq = _shifted(points)
            cached = X, none, X, x_sq
        else:
            cached = X, shift if shift.any() else none, S, _norms(points, x_sq)
    points._compiled_scored = cached
    return cached


def _array(tensor):
    return np.ascontiguousarray(tensor.detach().numpy())


def _numpy(dtype):
    return np.float32 if dtype == torch.float32 else np.float64


# the compiled score serves up to this many distance terms (n x k x d): its distances are
# summed directly, the torch pass's by one GEMM a chunk, then a log-sum-exp in NumPy;
# score's time, compiled against torch: 0.46 against 0.82 ms at 600 x 64, k = 10, 8.8
# against 38 ms at 20,000 x 32, k = 16, 68 against 106 ms at 50,000 x 128, k = 32
# (2^27.6 terms); 126 against 116 ms at 20,000 x 128, k = 256 (2^29.3)
LIKELIHOOD_MAX = 1 << 28


def log_likelihoods(X, centers, mixture, *, attention, root=False, preprocess=None):
    """The mixture's per-row log-likelihood (numpy float64) of dense numpy ``X`` (float32
    or float64; ``preprocess(X)`` first where given) at ``centers`` (numpy), the costs its
    squared Euclidean distances (their square roots with ``root``), in one compiled pass;
    None where it cannot run (X not a numpy array, a score other than the Euclidean one,
    more than ``LIKELIHOOD_MAX`` terms, or no compiled loops)."""
    if (not isinstance(X, np.ndarray) or X.dtype not in (np.float32, np.float64)
            or attention not in _EUCLIDEAN
            or X.shape[0] * centers.shape[0] * X.shape[1] > LIKELIHOOD_MAX):
        return None
    loops = _LOOPS.get()
    if loops is None:
        return None
    X = X if preprocess is None else preprocess(X)
    log_weight, offset, slope = mixture
    return loops["log_likelihoods"](np.ascontiguousarray(X), np.ascontiguousarray(centers),
                                    np.asarray(log_weight + offset, dtype=np.float64),
                                    np.asarray(slope, dtype=np.float64), root,
                                    _threads(X.shape[0]))
