"""Lloyd's loop with Hamerly's bounds: the attention that skips the keys it proves lose.

Every point keeps an upper bound ``u`` on its distance to its own center and a lower bound
``l`` on its distance to every other center (Hamerly 2010). After an update moves each
center by ``p_j``, the triangle inequality keeps them bounds: ``u += p_own`` and
``l -= max_j p_j`` (the second largest move for the point of the center that moved most).
A point with ``u <= max(l, s_own)``, where ``s_j`` is half the distance from center ``j``
to its nearest other center, cannot have changed center: no score is computed for it.
Otherwise ``u`` is made exact; only if the test still fails does the point score every
center. The points scored in a chunk of ``CHUNK`` rows are gathered and scored by one GEMM
(the whole chunk when most of it must be); their new bounds come from the scores, widened
by the scores' rounding.

The scores are made in single precision (the points' float32 copy, shifted: half the
bytes of float64 points to read, twice the values a vector instruction takes), and only
decide where they can: a row whose best score leads its second by more than twice the
scores' rounding bound takes that label; any other is scored again in float64, from its
exact row. So the labels are those of float64 scores, and a pass over float64 points reads
a float32 copy of them (0.6-0.7 of a float64 pass's time at 10^5-10^6 rows, k d = 256 to
32,768). The exact rows (the points themselves, shifted by ``shift`` as they are read) give
the sums, the distances and the bounds made exact.

The labels are Lloyd's at every layer, up to ties within rounding: the relocation of empty
clusters, the update and both stops are the plain loop's (``_lloyd.py``). The clusters'
sums are kept in float64 and changed only by the points that change cluster, so a layer
costs ``O(n)`` for the bounds plus the scores of the points near a boundary, instead of
``O(n k d)``. An adaptive mode (``"auto"``) keeps to plain passes while most points move.
The bounds are kept in float64 whatever the points' dtype.
"""

import numpy as np
from numba import njit, prange

from ._lloyd import (
    CACHE,
    CHUNK,
    _split,
    center_keys,
    nearest,
    prange_only,
    relocations,
    spent,
    sq_to,
    tile,
    update,
)


@njit(nogil=True, cache=CACHE)
def _geometry(centers, previous):
    """How far each center moved from ``previous`` (Euclidean), the largest and second
    largest moves with the index of the largest, and half the distance from each center
    to its nearest other one."""
    k = centers.shape[0]
    moved = np.empty(k)
    for j in range(k):
        moved[j] = np.sqrt(sq_to(centers, j, previous, j))
    top, second, mover = 0.0, 0.0, -1
    for j in range(k):
        if moved[j] > top:
            second, top, mover = top, moved[j], j
        elif moved[j] > second:
            second = moved[j]
    half = np.full(k, np.inf)
    for a in range(k):
        for b in range(a + 1, k):
            h = 0.5 * np.sqrt(sq_to(centers, a, centers, b))
            half[a] = min(half[a], h)
            half[b] = min(half[b], h)
    return moved, top, second, mover, half


@njit(nogil=True, cache=CACHE)
def _keys(centers, S):
    """The keys a pass scores against, in the dtype of the scored copy ``S``: ``C^T`` and
    ``||c||^2 / 2`` of the centers rounded to it; and ``||c||^2 / 2`` in float64 (the exact
    scores') and the largest squared center norm (the rounding bound's)."""
    CT, half = center_keys(centers.astype(S.dtype))
    half64 = np.empty(centers.shape[0])
    top = 0.0
    for j in range(centers.shape[0]):
        h = 0.0
        for c in range(centers.shape[1]):
            h += np.float64(centers[j, c]) ** 2
        half64[j] = 0.5 * h
        top = max(top, h)
    return CT, half, half64, top


@njit(nogil=True, cache=CACHE)
def _exact_row(X, shift, i, centers, half64, row):
    """Row ``i``'s closest center, best and second-best score in float64, from its exact
    row (``X[i] - shift``, or ``X[i]`` with no shift, into ``row``); ties: the lowest
    index."""
    for c in range(X.shape[1]):
        row[c] = X[i, c] - (shift[c] if shift.shape[0] else 0.0)
    label, best, second = 0, -np.inf, -np.inf
    for j in range(centers.shape[0]):
        s = 0.0
        for c in range(X.shape[1]):
            s += row[c] * centers[j, c]
        s -= half64[j]
        if s > best:
            label, best, second = j, s, best
        elif s > second:
            second = s
    return label, best, second


@njit(nogil=True, cache=CACHE)
def _rounding(x_sq, norm_sq, eps, tiny, d):
    """A bound on the rounding of a score ``x.c - ||c||^2 / 2`` made in a dtype of
    ``eps`` and ``tiny`` (from float64 rows and centers rounded to it, summed in any
    order), and of the squared norm ``x_sq``, for a row of that squared norm and centers
    of squared norm at most ``norm_sq``: ``(d + 8) (eps (|x| |c| + |c|^2 / 2 + |x|^2) +
    tiny)``, with ``|x| |c| <= (|x|^2 + |c|^2) / 2`` (no square root a row)."""
    return (d + 8) * (eps * (1.5 * x_sq + norm_sq) + tiny)


@njit(nogil=True, cache=CACHE, inline="always")
def _score(X, shift, S, x_sq, centers, keys, lo, rows, count, G, buffers, upper, lower,
           bounds, row):
    """The closest centers of ``count`` rows (``lo >= 0``: the rows from ``lo`` on; else
    ``rows``, gathered into ``G``), into the labels of ``buffers``: from one GEMM over
    their scored copy ``S``; where S is less precise than X, only where the best score
    leads the second by more than twice their rounding, else from the exact row. With
    ``bounds``, their exact bounds: from the scores, widened by that rounding."""
    CT, half, half64, norm_sq = keys
    d = S.shape[1]
    if lo >= 0:
        scores = np.dot(S[lo:lo + count], CT)
    else:
        for e in range(count):
            for c in range(d):
                G[e, c] = S[rows[e], c]
        scores = np.dot(G[:count], CT)
    verify = S.itemsize < X.itemsize
    nearest(scores, count, half, buffers, bounds or verify)
    if not (bounds or verify):
        return
    _, best, label, runner = buffers
    eps, tiny = np.finfo(S.dtype).eps, np.finfo(S.dtype).tiny
    for e in range(count):
        i = lo + e if lo >= 0 else rows[e]
        x = np.float64(x_sq[i])
        err = _rounding(x, norm_sq, eps, tiny, d)
        top, top2 = np.float64(best[e]), np.float64(runner[e])
        if verify and not top - top2 > 2.0 * err:  # (too close to call in S's precision)
            label[e], top, top2 = _exact_row(X, shift, i, centers, half64, row)
            err = _rounding(x, norm_sq, np.finfo(np.float64).eps,
                            np.finfo(np.float64).tiny, d)
        if bounds:
            upper[i] = np.sqrt(max(x - 2.0 * top + 2.0 * err, 0.0))
            lower[i] = np.sqrt(max(x - 2.0 * top2 - 2.0 * err, 0.0))


@njit(nogil=True, cache=CACHE, inline="always", fastmath={"reassoc", "contract"})
def _sq_to(X, shift, i, centers, j):
    """``||(X[i] - shift) - centers[j]||^2``, summed in any order: in float64; with no
    shift given (``X[i]`` the exact row), in X's dtype, as the plain loop measures it."""
    if shift.shape[0]:
        out = 0.0
        for c in range(X.shape[1]):
            diff = (X[i, c] - shift[c]) - centers[j, c]
            out += diff * diff
        return out
    return np.float64(sq_to(X, i, centers, j))


@njit(nogil=True, cache=CACHE)
def _distances(X, shift, centers, labels, dist, start, stop):
    """The rows' squared distances to their centers, into ``dist``."""
    for i in range(start, stop):
        dist[i] = _sq_to(X, shift, i, centers, labels[i])


@njit(nogil=True, cache=CACHE)
def _rows(X, shift, rows):
    """The exact rows ``rows`` (``X - shift``), float64."""
    out = np.empty((rows.shape[0], X.shape[1]))
    for e in range(rows.shape[0]):
        for c in range(X.shape[1]):
            out[e, c] = X[rows[e], c] - (shift[c] if shift.shape[0] else 0.0)
    return out


@njit(nogil=True, cache=CACHE, inline="always")
def _move(X, shift, weight, i, old, new, delta, delta_size, delta_count):
    """Row ``i`` leaves cluster ``old`` (none if negative) for ``new``: the sums' change.
    (Inlined: a call passing these arrays cost more than the move, 3.6x at d = 16.)"""
    w = weight[i]
    if shift.shape[0]:
        for c in range(X.shape[1]):
            delta[new, c] += w * (X[i, c] - shift[c])
    else:
        for c in range(X.shape[1]):
            delta[new, c] += w * np.float64(X[i, c])
    delta_size[new] += w
    if w > 0:
        delta_count[new] += 1
    if old >= 0:
        if shift.shape[0]:
            for c in range(X.shape[1]):
                delta[old, c] -= w * (X[i, c] - shift[c])
        else:
            for c in range(X.shape[1]):
                delta[old, c] -= w * np.float64(X[i, c])
        delta_size[old] -= w
        if w > 0:
            delta_count[old] -= 1


# How a pass treats the rows: every row scored and its bounds set (SET), the rows the
# bounds cannot settle scored (BOUNDED), or every row scored and no bounds kept (PLAIN).
SET, BOUNDED, PLAIN = 0, 1, 2
SWITCH = 1 / 32  # (adaptive: the share of rows changing label below which bounds are set)


@njit(nogil=True, cache=CACHE)
def hamerly_span(X, shift, S, x_sq, weight, centers, keys, labels, upper, lower, geometry,
                 delta, delta_size, delta_count, start, stop, accumulate, mode, counts):
    """The rows ``start:stop`` of one pass, by chunks of ``CHUNK`` rows, as ``mode`` says;
    with ``accumulate``, the change of the sums the new labels make. ``counts`` gets the
    rows that changed label, the rows scored and the rows whose upper bound was made
    exact."""
    d = X.shape[1]
    buffers = tile(centers.shape[0], S.dtype)
    label = buffers[2]
    delta[:] = 0
    delta_size[:] = 0
    delta_count[:] = 0
    changed, scored, tightened = 0, 0, 0
    moved, top, second, mover, half = geometry
    rows = np.empty(CHUNK, dtype=np.int64)  # (the rows a chunk scores, gathered into G,
    G = np.empty((CHUNK if mode == BOUNDED else 0, d), dtype=S.dtype)  # and an exact row)
    row = np.empty(d)
    for lo in range(start, stop, CHUNK):
        hi = min(lo + CHUNK, stop)
        count = hi - lo
        if mode == BOUNDED:
            count = 0
            for i in range(lo, hi):
                a = labels[i]
                u = upper[i] + moved[a]
                lower[i] -= second if a == mover else top
                bound = max(half[a], lower[i])
                if u > bound:
                    u = np.sqrt(_sq_to(X, shift, i, centers, a))
                    tightened += 1
                upper[i] = u
                if u <= bound:
                    continue
                rows[count] = i
                count += 1
            if count == 0:
                continue
        whole = count > (hi - lo) // 2  # (most of the chunk: all of it, ungathered)
        if whole:
            count = hi - lo
        _score(X, shift, S, x_sq, centers, keys, lo if whole else -1, rows, count, G,
               buffers, upper, lower, mode != PLAIN, row)
        scored += count
        for e in range(count):
            i = lo + e if whole else rows[e]
            if labels[i] != label[e]:
                changed += 1
                if accumulate:
                    _move(X, shift, weight, i, labels[i], label[e], delta, delta_size,
                          delta_count)
                labels[i] = label[e]
    counts[0], counts[1], counts[2] = changed, scored, tightened


@njit(nogil=True, cache=CACHE)
def _emptied(total, size, members):
    """The clusters left with no member, their sums set to exactly 0 (no rounding left
    behind). (A function of its own: an array expression in the parallel loop is compiled
    apart, with a warning that it has nothing to run in parallel.)"""
    empty = np.flatnonzero(members == 0)
    for j in empty:
        total[j] = 0
        size[j] = 0
    return empty


@njit(nogil=True, cache=CACHE)
def _bounds_pay(scored, tightened, width, single):
    """Whether a bounded pass that scored and tightened these shares of the rows cost
    less than a plain pass, for ``width = k d`` and scores made in float32 (``single``)
    or float64: a model in nanoseconds a row, fitted on uniform and clustered data
    (10^5-10^6 rows, k d = 256-32,768, 2-core AVX-512 Xeon): a plain pass ``23 + 0.027 k
    d`` in float32, ``20 + 0.06 k d`` in float64; a bounded one 7 for its book-keeping, 120
    for each bound made exact (one row read at random: a cache miss, whatever d) and 1.05
    plain rows for each row scored. (A rule of scoring fewer than half the rows keeps the
    bounds on uniform data at k = d = 16, where they cost 1.1-1.9 plain passes.)"""
    plain = 23.0 + 0.027 * width if single else 20.0 + 0.06 * width
    return 7.0 + 120.0 * tightened + 1.05 * scored * plain < plain


@njit(parallel=prange_only(), nogil=True, cache=CACHE)
def hamerly_loop(X, shift, S, x_sq, weight, centers, max_iter, tol, n_threads, labels, dist,
                 adaptive):
    """:func:`~sktransformer.cluster._compiled._lloyd.dense_loop` with the bounds: its
    results, from the exact rows ``X - shift`` (the points, or their shifted copy and a
    zero shift), their copy ``S`` that is scored (shifted; float32 for float64 points, or
    the exact rows themselves) and their squared norms, and the dense loop's other
    arguments but the sums' buffers. The clusters' sums are kept in float64 and changed
    only by the rows that change label.

    ``adaptive``: the bounds only where they pay. The passes are plain while more than
    ``SWITCH`` of the rows change label (the bounds would settle few); and when a bounded
    pass costs more than a plain one would (:func:`_bounds_pay`), plain again, until four
    times fewer change.
    """
    n, k, d = X.shape[0], centers.shape[0], X.shape[1]
    single = S.itemsize == 4
    labels[:] = -1
    upper = np.empty(n)
    lower = np.empty(n)
    total = np.zeros((k, d))
    size = np.zeros(k)
    members = np.zeros(k, dtype=np.int64)  # (of positive weight: empty when 0)
    delta = np.empty((n_threads, k, d))
    delta_size = np.empty((n_threads, k))
    delta_count = np.empty((n_threads, k), dtype=np.int64)
    counts = np.zeros((n_threads, 3), dtype=np.int64)
    previous = centers.copy()
    far = np.empty(0, dtype=np.int64)
    far_from = np.empty(0, dtype=np.int64)
    empty = np.empty(0, dtype=np.int64)
    switch = SWITCH
    n_iter, state, mode = 0, 0 if max_iter > 0 else 2, PLAIN if adaptive else SET
    while True:
        accumulate = state == 0
        keys = _keys(centers, S)
        geometry = _geometry(centers, previous)
        if n_threads == 1:  # (no team: see _lloyd.dense_loop)
            hamerly_span(X, shift, S, x_sq, weight, centers, keys, labels, upper, lower,
                         geometry, delta[0], delta_size[0], delta_count[0], 0, n,
                         accumulate, mode, counts[0])
        else:
            for t in prange(n_threads):
                lo, hi = _split(n, t, n_threads)
                hamerly_span(X, shift, S, x_sq, weight, centers, keys, labels, upper, lower,
                             geometry, delta[t], delta_size[t], delta_count[t], lo, hi,
                             accumulate, mode, counts[t])
        if not accumulate:
            break
        n_iter += 1
        # labels changed against the last pass's (the relocated rows were moved after it)
        changes, scored, tightened = counts[:, 0].sum(), counts[:, 1].sum(), counts[:, 2].sum()
        for e in range(far.shape[0]):
            i = far[e]
            changes += (labels[i] != far_from[e]) - (labels[i] != empty[e])
        if not adaptive:
            mode = BOUNDED
        elif mode == PLAIN:
            mode = SET if changes <= switch * n else PLAIN
        elif mode == BOUNDED and not _bounds_pay(scored / n, tightened / n, k * d, single):
            mode, switch = PLAIN, switch / 4
        else:
            mode = BOUNDED
        for t in range(n_threads):
            total += delta[t]
            size += delta_size[t]
            members += delta_count[t]
        empty = _emptied(total, size, members)
        if empty.shape[0]:  # (rare: exact distances for scikit-learn's relocation)
            _distances(X, shift, centers, labels, dist, 0, n)
        empty, far = relocations(empty, dist)
        far_from = labels[far]
        previous = centers
        centers, moved = update(centers, total, size, empty, far, _rows(X, shift, far),
                                labels, weight, False)
        state = 1 if changes == 0 else 2 if spent(moved, tol, n_iter, max_iter) else 0
        if state == 1:
            break
        for e in range(far.shape[0]):  # (the relocated rows hold their new centers)
            i = far[e]
            labels[i] = empty[e]
            upper[i] = np.inf
            lower[i] = -np.inf
            if weight[i] > 0:
                members[far_from[e]] -= 1
                members[empty[e]] += 1
    if n_threads == 1:
        _distances(X, shift, centers, labels, dist, 0, n)
    else:
        for t in prange(n_threads):
            lo, hi = _split(n, t, n_threads)
            _distances(X, shift, centers, labels, dist, lo, hi)
    return centers, n_iter, state == 1
