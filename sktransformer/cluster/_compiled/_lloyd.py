"""Lloyd's loop compiled whole: the layers of hard k-means on NumPy or CSR data on the CPU.

The torch layers (``cluster/_lloyd.py``) cost dozens of torch calls per chunk and a hand-off
between worker threads per layer: microseconds each, which scikit-learn's Cython loop never
pays. Here one compiled call runs every layer of a fit, the convergence test included:

* each thread takes a contiguous span of rows, walked in chunks of ``CHUNK`` rows;
* dense: the points are shifted by their mean once a fit (one copy of X, as scikit-learn
  makes), and a chunk's scores are one GEMM, ``X_chunk @ C^T`` with ``C^T`` a contiguous
  copy made once a layer (an F-order view of ``C`` ran 5-8x slower), then the arg-max of
  ``x.c - ||c||^2 / 2`` and the sums of the members, into thread-local buffers;
* CSR: ``C^T`` is ``(d, k)``, so each stored value ``(j, v)`` of a row adds ``v C^T[j]`` to
  the row's k scores, and a member adds only its stored values to its center's sums;
* the thread-local sums are added once a layer, in thread order; then scikit-learn's update:
  empty clusters take the points farthest from their centers (which leave their old
  clusters), the means, strict convergence (no label changed) or the center shift within
  ``tol``, and, unless strictly converged, a last assignment to the final centers.

These are the same layers as the torch path's, so both give the same labels and the same
centers up to rounding (``tests/cluster/test_compiled.py``). BLAS runs one thread inside
(the caller holds it there, ``utils.one_blas_thread``): each of our threads makes its
own small products. Also here: greedy k-means++ (the torch seeding's draws, passed in), the
search for center swaps; the loops with ``max_iter=0`` give the assignment alone.
"""

import numpy as np
from numba import njit, prange

from ...utils import disk_cache

CHUNK = 256  # rows a thread scores at a time: a (256, k) tile stays in cache


def prange_only():
    """numba's parallel options for the loops: their explicit ``prange`` over the threads'
    spans runs in parallel, nothing else. Left on, numba also makes a parallel region of
    every array expression (``labels[:] = -1``, ``total += delta[t]``), even in a loop run on
    one thread; each then woke a team whose spinning, on a machine with other busy
    processes, took a 16,000-row fit from 0.3 to 0.7-5.8 s. (numba's options object, not a
    dict: numba empties a dict as it reads it, and compiled the next signature with every
    option on.)"""
    from numba.core.cpu import ParallelOptions

    return ParallelOptions({"prange": True, "comprehension": False, "reduction": False,
                            "inplace_binop": False, "setitem": False, "numpy": False,
                            "stencil": False, "fusion": False})


# Machine code is cached on disk where numba can (``utils.disk_cache``), else compiled in
# each process. (The loops are module functions: functions made inside a builder refer to
# each other through closure cells, whose contents numba's cache cannot key, so each
# process compiled them again.)
CACHE = disk_cache()


@njit(nogil=True, cache=CACHE)
def best_of(scores, half_sq):
    """The arg-max of ``scores - half_sq`` (ties: the lowest index) and its value."""
    best, label = scores[0] - half_sq[0], 0
    for j in range(1, scores.shape[0]):
        s = scores[j] - half_sq[j]
        if s > best:
            best, label = s, j
    return label, best


@njit(nogil=True, cache=CACHE)
def tile(k, dtype):
    """A thread's buffers for :func:`nearest`: the transposed scores (padded: a row
    length of a power of two put every column write in the same cache set), the best
    scores, the labels and the second-best scores of a chunk's rows."""
    return (np.empty((k, CHUNK + 8), dtype=dtype), np.empty(CHUNK, dtype=dtype),
            np.empty(CHUNK, dtype=np.int64), np.empty(CHUNK, dtype=dtype))


@njit(nogil=True, cache=CACHE)
def nearest(scores, count, half_sq, buffers, second):
    """:func:`best_of` for the first ``count`` rows of ``scores`` at once, into the best
    scores and labels of ``buffers`` (:func:`tile`), and with ``second``, the best score
    among the other centers into its last buffer. The scores are transposed first, so
    that the compare-and-selects run across rows, in vector registers: a row's own scan
    is a chain of dependent compares (2-3x slower, and most of a pass at k = 16)."""
    ST, best, label, runner = buffers
    k = scores.shape[1]
    whole = count - count % 8
    for lo in range(0, whole, 8):  # (by blocks of 8 rows: 0.75-0.95x the time of a
        for j in range(k):  # row or a column at a time, k = 3-256)
            for i in range(lo, lo + 8):
                ST[j, i] = scores[i, j]
    for i in range(whole, count):
        for j in range(k):
            ST[j, i] = scores[i, j]
    h = half_sq[0]
    for i in range(count):
        best[i] = ST[0, i] - h
        label[i] = 0
    if second:
        runner[:count] = -np.inf
    for j in range(1, k):
        h, row = half_sq[j], ST[j]
        if second:  # (two loops, so that neither inner loop holds a test)
            for i in range(count):
                s = row[i] - h
                better = s > best[i]
                runner[i] = best[i] if better else max(runner[i], s)
                best[i] = s if better else best[i]
                label[i] = j if better else label[i]
        else:
            for i in range(count):
                s = row[i] - h
                better = s > best[i]
                best[i] = s if better else best[i]
                label[i] = j if better else label[i]


@njit(nogil=True, cache=CACHE)
def center_keys(centers):
    """The keys a pass scores against: ``C^T`` (contiguous) and ``||c||^2 / 2``."""
    CT = np.ascontiguousarray(centers.T)
    half_sq = np.empty(centers.shape[0], dtype=centers.dtype)
    for j in range(centers.shape[0]):
        half_sq[j] = 0.5 * np.dot(centers[j], centers[j])
    return CT, half_sq


@njit(nogil=True, cache=CACHE)
def _keys(centers, sums, weights, accumulate):
    """:func:`center_keys`, and the sums zeroed for a new layer."""
    CT, half_sq = center_keys(centers)
    if accumulate:
        sums[:] = 0
        weights[:] = 0
    return CT, half_sq


@njit(nogil=True, cache=CACHE)
def _split(n, t, n_threads):
    """Thread ``t``'s contiguous span of ``n`` rows."""
    return (n * t) // n_threads, (n * (t + 1)) // n_threads


@njit(nogil=True, cache=CACHE, fastmath={"nnan", "nsz", "reassoc"})
def _extremes(X, start, stop, low, high):
    """The column minima and maxima of the rows ``start:stop`` into ``low`` and ``high``
    (vectorized: meaningless where X holds NaN, which its sums show; infinities, which
    start the extremes, are kept)."""
    for i in range(start, stop):
        for c in range(X.shape[1]):
            v = X[i, c]
            low[c] = min(low[c], v)
            high[c] = max(high[c], v)


@njit(nogil=True, cache=CACHE)
def _column_sums(X, mean, start, stop, deviations, extremes):
    """The column sums of the rows ``start:stop`` of ``X`` in float64, and their column
    minima and maxima into the rows of ``extremes`` (by chunks of rows, each read twice
    while in cache); or the sums of their squared deviations from ``mean`` (in X's
    dtype)."""
    d = X.shape[1]
    out = np.zeros(d)
    if deviations:
        for i in range(start, stop):
            for c in range(d):
                v = X[i, c] - mean[c]
                out[c] += v * v
        return out
    low, high = extremes[0], extremes[1]
    low[:] = np.inf
    high[:] = -np.inf
    for lo in range(start, stop, CHUNK):
        hi = min(lo + CHUNK, stop)
        for i in range(lo, hi):
            for c in range(d):
                out[c] += X[i, c]
        _extremes(X, lo, hi, low, high)
    return out


@njit(parallel=prange_only(), nogil=True, cache=CACHE)
def moments(X, variance, n_threads):
    """The column means of ``X`` (in its dtype, summed in float64), with ``variance`` the
    mean of the column variances (else 0.0), and the largest absolute value: two passes,
    no temporary, each thread summing its span of rows, the spans' sums added in order.
    (Where X is not finite, neither is the mean.)"""
    n, d = X.shape
    parts = np.empty((n_threads, d))
    extremes = np.empty((n_threads, 2, d), dtype=X.dtype)
    mean = np.zeros(d, dtype=X.dtype)
    largest = 0.0
    for deviations in (False, True):
        if deviations and not variance:
            return mean, 0.0, largest
        if n_threads == 1:
            parts[0] = _column_sums(X, mean, 0, n, deviations, extremes[0])
        else:
            for t in prange(n_threads):
                start, stop = _split(n, t, n_threads)
                parts[t] = _column_sums(X, mean, start, stop, deviations, extremes[t])
        total = parts.sum(axis=0)
        if not deviations:
            mean = (total / n).astype(X.dtype)
            largest = max(-np.float64(extremes[:, 0].min()), np.float64(extremes[:, 1].max()))
    return mean, total.sum() / (n * d), largest


@njit(nogil=True, cache=CACHE)
def _shift_span(X, shift, out, sq, start, stop):
    """The rows ``start:stop`` of :func:`shifted` (``out`` in its own dtype, the squared
    norms of ``X - shift`` in ``sq``'s)."""
    for i in range(start, stop):
        acc = sq.dtype.type(0)
        for c in range(X.shape[1]):
            v = X[i, c] - shift[c]
            out[i, c] = v
            acc += v * v
        sq[i] = acc


@njit(nogil=True, cache=CACHE, fastmath={"nnan", "ninf", "nsz", "reassoc"})
def _largest(X, shift, start, stop, top):
    """The largest ``|X - shift|`` of each column over the rows ``start:stop``, into
    ``top`` (vectorized: X is finite, and top starts at 0)."""
    for i in range(start, stop):
        for c in range(X.shape[1]):
            top[c] = max(top[c], abs(X[i, c] - shift[c]))


@njit(nogil=True, cache=CACHE)
def _single_span(X, shift, out, sq, start, stop):
    """The rows ``start:stop`` of :func:`shifted_single`, by chunks of rows (each read
    twice while in cache: 0.75x the time of one loop that also keeps the largest value);
    returns their largest absolute value."""
    top = np.zeros(X.shape[1])
    for lo in range(start, stop, CHUNK):
        hi = min(lo + CHUNK, stop)
        _shift_span(X, shift, out, sq, lo, hi)
        _largest(X, shift, lo, hi, top)
    return top.max() if top.shape[0] else 0.0


@njit(parallel=prange_only(), nogil=True, cache=CACHE)
def shifted(X, shift, n_threads):
    """``X - shift`` (a new array: its pages are first written by the threads, in
    parallel) and the squared norms of its rows, in one pass. (Allocated by NumPy, which
    asks for huge pages, the copy of 10^6 x 16 values took 21-114 ms from fit to fit;
    here 37-42.)"""
    n = X.shape[0]
    out = np.empty_like(X)
    sq = np.empty(n, dtype=X.dtype)
    if n_threads == 1:
        _shift_span(X, shift, out, sq, 0, n)
    else:
        for t in prange(n_threads):
            start, stop = _split(n, t, n_threads)
            _shift_span(X, shift, out, sq, start, stop)
    return out, sq


@njit(parallel=prange_only(), nogil=True, cache=CACHE)
def shifted_single(X, shift, n_threads):
    """:func:`shifted` rounded to float32 (the norms are X's, exact), and the largest
    absolute value of ``X - shift``."""
    n = X.shape[0]
    out = np.empty(X.shape, dtype=np.float32)
    sq = np.empty(n, dtype=X.dtype)
    tops = np.zeros(n_threads)
    if n_threads == 1:
        tops[0] = _single_span(X, shift, out, sq, 0, n)
    else:
        for t in prange(n_threads):
            start, stop = _split(n, t, n_threads)
            tops[t] = _single_span(X, shift, out, sq, start, stop)
    return out, sq, tops.max()


@njit(nogil=True, cache=CACHE)
def dense_span(X, x_sq, weight, CT, half_sq, labels, dist, acc, size, start, stop,
               accumulate):
    """The rows ``start:stop`` of a dense pass, by chunks of ``CHUNK`` rows. Accumulating,
    the new labels and the members' sums, and returns how many labels changed (no
    distances: a layer needs them only where a cluster empties, :func:`sq_dist`); else
    the labels and squared distances of the assignment. The weights are summed in a
    buffer of the thread's own (the threads' rows of ``weights`` share a cache line:
    summed there, a 2-thread pass took twice one thread's time)."""
    d = X.shape[1]
    own = np.zeros(size.shape[0], dtype=size.dtype)
    buffers = tile(CT.shape[1], X.dtype)
    _, best, label, _ = buffers
    changed = 0
    for lo in range(start, stop, CHUNK):
        hi = min(lo + CHUNK, stop)
        nearest(np.dot(X[lo:hi], CT), hi - lo, half_sq, buffers, False)
        if not accumulate:
            for i in range(hi - lo):
                labels[lo + i] = label[i]
                dist[lo + i] = max(x_sq[lo + i] - 2 * best[i], 0)
            continue
        for i in range(hi - lo):
            changed += labels[lo + i] != label[i]
            labels[lo + i] = label[i]
        for i in range(hi - lo):  # (a loop of its own: it vectorizes)
            j, w = label[i], weight[lo + i]
            own[j] += w
            for c in range(d):
                acc[j, c] += w * X[lo + i, c]
    size += own
    return changed


@njit(nogil=True, cache=CACHE)
def sq_to(X, i, centers, j):
    """``||X[i] - centers[j]||^2``, measured directly (in the points' dtype)."""
    out = X.dtype.type(0)
    for c in range(X.shape[1]):
        diff = X[i, c] - centers[j, c]
        out += diff * diff
    return out


@njit(nogil=True, cache=CACHE)
def sq_dist(X, centers, labels, dist, start, stop):
    """The rows' squared distances to their centers, into ``dist``."""
    for i in range(start, stop):
        dist[i] = sq_to(X, i, centers, labels[i])


@njit(nogil=True, cache=CACHE)
def csr_span(data, indices, indptr, weight, CT, half_sq, labels, dist, acc, size, start,
             stop, accumulate):
    """The rows ``start:stop`` of a CSR pass, row by row; accumulating, into ``acc``
    zeroed here (each thread its own: d is large)."""
    k = CT.shape[1]
    scores = np.empty(k, dtype=CT.dtype)
    own = np.zeros(k, dtype=size.dtype)  # (see dense_span)
    if accumulate:
        acc[:] = 0
    for i in range(start, stop):
        scores[:] = 0
        x_sq = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            v = data[p]
            x_sq += v * v
            row = CT[indices[p]]
            for j in range(k):
                scores[j] += v * row[j]
        label, best = best_of(scores, half_sq)
        labels[i] = label
        dist[i] = max(x_sq - 2.0 * best, 0.0)
        if accumulate:
            w = weight[i]
            own[label] += w
            target = acc[label]
            for p in range(indptr[i], indptr[i + 1]):
                target[indices[p]] += w * data[p]
    size += own


@njit(nogil=True, cache=CACHE)
def empty_clusters(weights):
    """The clusters no point joined this layer, and the layer's total sums' weights."""
    size = weights.sum(axis=0)
    return np.flatnonzero(size == 0), size


@njit(nogil=True, cache=CACHE)
def update(centers, total, size, empty, far, far_rows, labels, weight, sphere):
    """scikit-learn's center update from the layer's sums: the empty clusters move onto
    the farthest points ``far`` (rows ``far_rows``, shifted), which leave their old
    clusters; then the means (a center weighing nothing stays), with ``sphere`` scaled to
    unit norm (spherical k-means; a zero mean keeps the old center). Returns the new
    centers and their total squared shift."""
    for e in range(empty.shape[0]):
        j, i = empty[e], far[e]
        w = weight[i]
        old = labels[i]
        total[old] -= w * far_rows[e]
        size[old] -= w
        total[j] = w * far_rows[e]
        size[j] = w
    new = centers.copy()
    shift = 0.0
    for j in range(centers.shape[0]):
        if size[j] > 0:
            new[j] = total[j] / size[j]
            if sphere:
                norm = np.sqrt(np.sum(new[j] * new[j]))
                new[j] = new[j] / norm if norm > 0 else centers[j]
        for c in range(centers.shape[1]):
            diff = new[j, c] - centers[j, c]
            shift += diff * diff
    return new, shift


@njit(nogil=True, cache=CACHE)
def relocations(empty, dist):
    """The empty clusters that move and the points they move onto: the farthest from
    their centers, farthest first (ties: the lowest index); none where every point sits
    on its center (more clusters than distinct points: relocating would only trade one
    empty cluster for another, scikit-learn's rule)."""
    if empty.shape[0] == 0:
        return empty, empty
    far = np.argsort(-dist, kind="mergesort")[:empty.shape[0]]
    if dist[far[0]] == 0:
        return empty[:0], far[:0]
    return empty, far


@njit(nogil=True, cache=CACHE)
def _relocation(weights, dist):
    """The empty clusters, the points they move onto (:func:`relocations`), and the
    clusters' weights."""
    empty, size = empty_clusters(weights)
    empty, far = relocations(empty, dist)
    return empty, far, size


@njit(nogil=True, cache=CACHE)
def _stop(labels, labels_old, moved, tol, n_iter, max_iter):
    """After a layer: 0 to go on, 1 when the labels did not change (strict convergence:
    no last assignment), 2 when the shift is within ``tol`` or the layers are spent."""
    if np.array_equal(labels, labels_old):
        return 1
    if spent(moved, tol, n_iter, max_iter):
        return 2
    labels_old[:] = labels
    return 0


@njit(nogil=True, cache=CACHE)
def spent(moved, tol, n_iter, max_iter):
    """Whether the loop stops short of strict convergence: the shift within ``tol`` or
    the layers spent."""
    return moved <= tol or n_iter == max_iter


# The loops are the compiled entry points, each a parallel function with its passes inline:
# a cached function that calls a parallel one crashed when loaded from numba's cache in
# another process (it links the callee's threading code by a name made at compile time).
# One thread runs its pass outside any parallel region: an OpenMP team whose other thread
# only waits still spins it, which on a loaded machine took a digits fit from 3 to 100 ms.

@njit(parallel=prange_only(), nogil=True, cache=CACHE)
def dense_loop(X, x_sq, weight, centers, max_iter, tol, n_threads, labels, dist, sums,
               weights, sphere):
    """Every layer of one hard k-means run on dense rows (shifted; ``x_sq``, their squared
    norms). Returns the centers, the layers run and whether the labels converged strictly;
    ``labels`` and ``dist`` hold the final assignment. ``max_iter=0``: that assignment
    alone (``weight``, ``sums`` and ``weights`` are then not read).

    A layer reads X and the labels once and writes the labels: it counts the labels that
    change as it assigns (no copy of the last layer's to compare), and measures no
    distance unless a cluster empties (the relocation's); strictly converged, the
    labels' distances are measured directly."""
    n = X.shape[0]
    changed = np.zeros(n_threads, dtype=np.int64)
    labels[:] = -1
    n_iter, state = 0, 0 if max_iter > 0 else 2
    while True:
        accumulate = state == 0
        CT, half_sq = _keys(centers, sums, weights, accumulate)
        if n_threads == 1:
            changed[0] = dense_span(X, x_sq, weight, CT, half_sq, labels, dist, sums[0],
                                    weights[0], 0, n, accumulate)
        else:
            for t in prange(n_threads):
                start, stop = _split(n, t, n_threads)
                changed[t] = dense_span(X, x_sq, weight, CT, half_sq, labels, dist, sums[t],
                                        weights[t], start, stop, accumulate)
        if not accumulate:  # (the last assignment, to the final centers)
            break
        n_iter += 1
        converged = changed.sum() == 0  # (strictly: the update gives these centers again)
        empty, size = empty_clusters(weights)
        if converged or empty.shape[0]:
            if n_threads == 1:
                sq_dist(X, centers, labels, dist, 0, n)
            else:
                for t in prange(n_threads):
                    start, stop = _split(n, t, n_threads)
                    sq_dist(X, centers, labels, dist, start, stop)
        empty, far = relocations(empty, dist)
        centers, moved = update(centers, sums.sum(axis=0), size, empty, far, X[far], labels,
                                weight, sphere)
        if converged:  # (as scikit-learn: the updated centers, no last assignment)
            state = 1
            break
        state = 2 if spent(moved, tol, n_iter, max_iter) else 0
    return centers, n_iter, state == 1


@njit(nogil=True, cache=CACHE)
def _csr_rows(data, indices, indptr, rows, d, like):
    """The CSR rows ``rows``, dense, in the dtype of ``like``."""
    out = np.zeros((rows.shape[0], d), dtype=like.dtype)
    for e in range(rows.shape[0]):
        for p in range(indptr[rows[e]], indptr[rows[e] + 1]):
            out[e, indices[p]] = data[p]
    return out


@njit(parallel=prange_only(), nogil=True, cache=CACHE)
def csr_loop(data, indices, indptr, weight, centers, max_iter, tol, n_threads, labels,
             dist, sums, weights, sphere):
    """:func:`dense_loop` for CSR rows."""
    n, k, d = indptr.shape[0] - 1, centers.shape[0], centers.shape[1]
    labels_old = np.full(n, -2, dtype=labels.dtype)
    summed = np.empty((k if max_iter and n_threads > 1 else 0, d), dtype=centers.dtype)
    n_iter, state = 0, 0 if max_iter > 0 else 2
    while True:
        accumulate = state == 0
        CT, half_sq = center_keys(centers)
        if accumulate:
            weights[:] = 0  # (the sums: zeroed by the spans, each thread its own)
        if n_threads == 1:
            csr_span(data, indices, indptr, weight, CT, half_sq, labels, dist, sums[0],
                     weights[0], 0, n, accumulate)
        else:
            for t in prange(n_threads):
                start, stop = _split(n, t, n_threads)
                csr_span(data, indices, indptr, weight, CT, half_sq, labels, dist, sums[t],
                         weights[t], start, stop, accumulate)
        if not accumulate:
            break
        n_iter += 1
        total = sums[0]  # (one thread: its own sums, zeroed again by the next pass)
        if n_threads > 1:  # (the threads' sums added by column blocks, in thread order)
            for t in prange(n_threads):
                low, high = _split(d, t, n_threads)
                for j in range(k):
                    for c in range(low, high):
                        value = sums[0, j, c]
                        for u in range(1, n_threads):
                            value += sums[u, j, c]
                        summed[j, c] = value
            total = summed
        empty, far, size = _relocation(weights, dist)
        centers, moved = update(centers, total, size, empty, far,
                                _csr_rows(data, indices, indptr, far, d, centers), labels,
                                weight, sphere)
        state = _stop(labels, labels_old, moved, tol, n_iter, max_iter)
        if state == 1:
            break
    return centers, n_iter, state == 1


@njit(nogil=True, cache=CACHE)
def _two_closest(X, x_sq, centers):
    """Each row's closest center, its squared distance and that to the second-closest (by
    chunks of one GEMM each, as the pass)."""
    n = X.shape[0]
    CT, half_sq = center_keys(centers)
    labels = np.empty(n, dtype=np.int64)
    best = np.empty(n, dtype=np.float64)
    second = np.empty(n, dtype=np.float64)
    buffers = tile(centers.shape[0], X.dtype)
    _, top, label, top2 = buffers
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        nearest(np.dot(X[lo:hi], CT), hi - lo, half_sq, buffers, True)
        for i in range(hi - lo):
            labels[lo + i] = label[i]
            best[lo + i] = max(x_sq[lo + i] - 2 * top[i], 0.0)
            second[lo + i] = max(x_sq[lo + i] - 2 * top2[i], 0.0)
    return labels, best, second


@njit(nogil=True, cache=CACHE)
def _sq_diff(X, i, y):
    """``||X[i] - y||^2``, without a temporary."""
    out = 0.0
    for c in range(X.shape[1]):
        diff = X[i, c] - y[c]
        out += diff * diff
    return out


@njit(nogil=True, cache=CACHE, fastmath={"reassoc", "contract"})
def _split_cluster(X, weight, center, members, n_layers, n_power):
    """Two centers for a cluster's ``members`` by ``n_layers`` Lloyd layers from its center
    moved one standard deviation either way along the members' principal direction (by
    ``n_power`` power iterations from the farthest member), and the cost they save against
    the center alone. The members are gathered once, centered; then each power iteration
    and each layer is one pass over them, every member's dot products summed in vector
    registers (``reassoc``: the members are few, and a split only proposes a trial)."""
    m, d = members.shape[0], X.shape[1]
    Z = np.empty((m, d))
    w = np.empty(m)
    sq = np.empty(m)
    far, before, total = 0, 0.0, 0.0
    for i in range(m):
        row = members[i]
        w[i] = weight[row]
        acc = 0.0
        for c in range(d):
            z = X[row, c] - center[c]
            Z[i, c] = z
            acc += z * z
        sq[i] = acc
        before += w[i] * acc
        total += w[i]
        if acc > sq[far]:
            far = i
    v = Z[far].copy()
    variance = 0.0
    for _ in range(n_power):
        norm = np.sqrt(np.dot(v, v))
        if norm == 0:
            break
        u = v / norm
        v = np.zeros(d)
        spread = 0.0
        for i in range(m):
            t = 0.0
            for c in range(d):
                t += Z[i, c] * u[c]
            wt = w[i] * t
            spread += wt * t
            for c in range(d):
                v[c] += wt * Z[i, c]
        variance = spread / max(total, 1e-300)
    norm = np.sqrt(np.dot(v, v))
    step = np.sqrt(variance) / norm if norm > 0 else 0.0
    P = np.empty((2, d))  # the pair, centered
    for c in range(d):
        P[0, c] = step * v[c]
        P[1, c] = -step * v[c]
    after = before
    size = np.empty(2)
    sums = np.empty((2, d))
    for layer in range(n_layers + 1):
        last = layer == n_layers
        half0 = 0.5 * np.dot(P[0], P[0])
        half1 = 0.5 * np.dot(P[1], P[1])
        size[:] = 0
        sums[:] = 0
        after = 0.0
        for i in range(m):
            s0, s1 = 0.0, 0.0
            for c in range(d):
                s0 += Z[i, c] * P[0, c]
                s1 += Z[i, c] * P[1, c]
            s0 -= half0
            s1 -= half1
            h = 0 if s0 >= s1 else 1
            size[h] += w[i]
            after += w[i] * max(sq[i] - 2 * max(s0, s1), 0.0)
            if not last:
                for c in range(d):
                    sums[h, c] += w[i] * Z[i, c]
        if last or size[0] == 0 or size[1] == 0:
            break
        for h in range(2):
            for c in range(d):
                P[h, c] = sums[h, c] / size[h]
    pair = np.empty((2, d), dtype=X.dtype)
    for h in range(2):
        for c in range(d):
            pair[h, c] = center[c] + P[h, c]
    return pair, before - after


@njit(nogil=True, cache=CACHE)
def _merge_partners(centers, size):
    """Per center, the other center it merges into most cheaply and that merge's cost,
    Ward's ``n_a n_b / (n_a + n_b) ||c_a - c_b||^2`` (exact for fixed members)."""
    k = centers.shape[0]
    partner = np.full(k, -1, dtype=np.int64)
    cost = np.full(k, np.inf)
    for a in range(k):
        for b in range(k):
            if a == b or size[a] + size[b] == 0:
                continue
            c = size[a] * size[b] / (size[a] + size[b]) * _sq_diff(centers, a, centers[b])
            if c < cost[a]:
                partner[a], cost[a] = b, c
    return partner, cost


@njit(nogil=True, cache=CACHE)
def swap_trials(X, x_sq, weight, centers, n_candidates, n_layers, n_power):
    """:func:`sktransformer.cluster._swaps._trials` on dense rows: the swaps to try, the
    most promising first, as ``(trials (m, k, d), their estimated savings (m,))``."""
    k = centers.shape[0]
    labels, best, second = _two_closest(X, x_sq, centers)
    cluster_cost = np.zeros(k)
    removal = np.zeros(k)
    size = np.zeros(k)
    count = np.zeros(k, dtype=np.int64)
    for i in range(X.shape[0]):
        j = labels[i]
        cluster_cost[j] += weight[i] * best[i]
        removal[j] += weight[i] * (second[i] - best[i])
        size[j] += weight[i]
        count[j] += 1
    partner, merge = _merge_partners(centers, size)
    order = np.argsort(-cluster_cost, kind="mergesort")[:min(n_candidates, k)]
    trials = np.empty((order.shape[0], k, X.shape[1]), dtype=X.dtype)
    nets = np.empty(order.shape[0])
    # a split saves at most its cluster's cost: none below the cheapest removal can pay
    floor = np.inf
    for j in range(k):
        floor = min(floor, removal[j], merge[j])
    m = 0
    for split in order:
        if cluster_cost[split] <= floor:
            break
        if count[split] < 2:
            continue
        members = np.flatnonzero(labels == split)
        pair, saving = _split_cluster(X, weight, centers[split], members, n_layers, n_power)
        gone, cheapest, into = -1, np.inf, -1
        for j in range(k):
            if j == split:
                continue
            if removal[j] < cheapest:
                gone, cheapest, into = j, removal[j], -1
            if partner[j] != split and partner[j] >= 0 and merge[j] < cheapest:
                gone, cheapest, into = j, merge[j], partner[j]
        if gone < 0 or not saving - cheapest > 0:
            continue
        trials[m] = centers
        if into >= 0:
            total = size[gone] + size[into]
            for c in range(X.shape[1]):
                trials[m, into, c] = (size[gone] * centers[gone, c]
                                      + size[into] * centers[into, c]) / total
        trials[m, split] = pair[0]
        trials[m, gone] = pair[1]
        nets[m] = saving - cheapest
        m += 1
    ranked = np.argsort(-nets[:m], kind="mergesort")
    return trials[:m][ranked], nets[:m][ranked]


@njit(nogil=True, cache=CACHE)
def _sq_dist_to(X, x_sq, rows):
    """Squared distances of every row of ``X`` to the rows ``rows``, (len(rows), n)."""
    scores = np.dot(X, np.ascontiguousarray(X[rows].T))
    out = np.empty((rows.shape[0], X.shape[0]), dtype=X.dtype)
    for t in range(rows.shape[0]):
        c_sq = x_sq[rows[t]]
        for i in range(X.shape[0]):
            out[t, i] = max(x_sq[i] + c_sq - 2 * scores[i, t], 0)
    return out


@njit(nogil=True, cache=CACHE)
def kmeans_plusplus(X, x_sq, weight, first, draws):
    """Greedy k-means++ on dense rows, from the caller's uniform draws (``first``, and
    ``draws`` of shape (k - 1, trials), as :func:`sktransformer.cluster._init.kmeans_plusplus`
    draws them): each new center is the best, by potential, of the candidates sampled in
    proportion to ``w D^2``. Returns the chosen rows' indices."""
    n = X.shape[0]
    k = draws.shape[0] + 1
    indices = np.empty(k, dtype=np.int64)
    cumulative = np.cumsum(weight)
    indices[0] = min(np.searchsorted(cumulative, first * cumulative[-1]), n - 1)
    closest = _sq_dist_to(X, x_sq, indices[:1])[0]
    w_points = weight.astype(X.dtype)
    for c in range(1, k):
        cumulative = np.cumsum(weight * closest)
        candidates = np.empty(draws.shape[1], dtype=np.int64)
        for t in range(draws.shape[1]):
            candidates[t] = min(np.searchsorted(cumulative, draws[c - 1, t] * cumulative[-1]),
                                n - 1)
        dist = _sq_dist_to(X, x_sq, candidates)
        best, best_potential = 0, np.inf
        for t in range(candidates.shape[0]):
            potential = 0.0
            for i in range(n):
                if closest[i] < dist[t, i]:
                    dist[t, i] = closest[i]
                potential += dist[t, i] * w_points[i]
            if potential < best_potential:
                best, best_potential = t, potential
        closest = dist[best].copy()
        indices[c] = candidates[best]
    return indices
