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
    sq_dist,
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
def _score(X, x_sq, CT, half_sq, rows, count, G, buffers, labels, upper, lower):
    """The closest center of each of the ``count`` rows ``rows``, from one GEMM over the
    rows (gathered into ``G`` unless consecutive), and their exact bounds, from the
    scores, widened by their rounding (``d`` units of the dtype's epsilon relative to the
    terms)."""
    slack = X.shape[1] * np.finfo(X.dtype).eps
    if rows[count - 1] - rows[0] == count - 1:  # (consecutive rows: no gathering)
        scores = np.dot(X[rows[0]:rows[0] + count], CT)
    else:
        for e in range(count):
            for c in range(X.shape[1]):
                G[e, c] = X[rows[e], c]
        scores = np.dot(G[:count], CT)
    nearest(scores, count, half_sq, buffers, True)
    _, best, label, runner = buffers
    for e in range(count):
        i = rows[e]
        labels[i] = label[e]
        x, top, top2 = x_sq[i], best[e], runner[e]
        upper[i] = np.sqrt(max(x - 2.0 * top + slack * (x + abs(2.0 * top)), 0.0))
        lower[i] = np.sqrt(max(x - 2.0 * top2 - slack * (x + abs(2.0 * top2)), 0.0))


@njit(nogil=True, cache=CACHE)
def _move(X, weight, i, old, new, delta, delta_size, delta_count):
    """Row ``i`` leaves cluster ``old`` (none if negative) for ``new``: the sums' change."""
    w = weight[i]
    for c in range(X.shape[1]):
        x = w * np.float64(X[i, c])
        delta[new, c] += x
        if old >= 0:
            delta[old, c] -= x
    delta_size[new] += w
    if w > 0:
        delta_count[new] += 1
    if old >= 0:
        delta_size[old] -= w
        if w > 0:
            delta_count[old] -= 1


# How a pass treats the rows: every row scored and its bounds set (SET), the rows the
# bounds cannot settle scored (BOUNDED), or every row scored and no bounds kept (PLAIN).
SET, BOUNDED, PLAIN = 0, 1, 2
SWITCH = 1 / 32  # (adaptive: the share of rows changing label below which bounds are set)


@njit(nogil=True, cache=CACHE)
def hamerly_span(X, x_sq, weight, centers, CT, half_sq, labels, upper, lower, geometry, delta,
                 delta_size, delta_count, start, stop, accumulate, mode, counts):
    """The rows ``start:stop`` of one pass, by chunks of ``CHUNK`` rows, as ``mode`` says;
    with ``accumulate``, the change of the sums the new labels make. ``counts`` gets the
    rows that changed label, the rows scored and the rows whose upper bound was made
    exact."""
    buffers = tile(centers.shape[0], X.dtype)
    delta[:] = 0
    delta_size[:] = 0
    delta_count[:] = 0
    changed, scored, tightened = 0, 0, 0
    if mode == PLAIN:  # (every row scored, no bounds: the chunk's product as it stands)
        _, _, label, _ = buffers
        for lo in range(start, stop, CHUNK):
            hi = min(lo + CHUNK, stop)
            nearest(np.dot(X[lo:hi], CT), hi - lo, half_sq, buffers, False)
            for e in range(hi - lo):
                i, new = lo + e, label[e]
                if labels[i] != new:
                    changed += 1
                    if accumulate:
                        _move(X, weight, i, labels[i], new, delta, delta_size, delta_count)
                    labels[i] = new
        counts[0], counts[1], counts[2] = changed, stop - start, 0
        return
    moved, top, second, mover, half = geometry
    rows = np.empty(CHUNK, dtype=np.int64)  # (the rows a chunk scores, their old labels
    old = np.empty(CHUNK, dtype=np.int64)  # and, where not consecutive, the rows gathered)
    G = np.empty((CHUNK, X.shape[1]), dtype=X.dtype)
    for lo in range(start, stop, CHUNK):
        hi = min(lo + CHUNK, stop)
        count = 0
        for i in range(lo, hi):
            a = labels[i]
            if mode == BOUNDED:
                u = upper[i] + moved[a]
                lower[i] -= second if a == mover else top
                bound = max(half[a], lower[i])
                if u > bound:
                    u = np.sqrt(sq_to(X, i, centers, a))
                    tightened += 1
                upper[i] = u
                if u <= bound:
                    continue
            rows[count], old[count] = i, a
            count += 1
        if count == 0:
            continue
        if hi - lo > count > (hi - lo) // 2:  # (most of the chunk: all, ungathered)
            count = 0
            for i in range(lo, hi):
                rows[count], old[count] = i, labels[i]
                count += 1
        _score(X, x_sq, CT, half_sq, rows, count, G, buffers, labels, upper, lower)
        scored += count
        for e in range(count):
            i = rows[e]
            if labels[i] != old[e]:
                changed += 1
                if accumulate:
                    _move(X, weight, i, old[e], labels[i], delta, delta_size, delta_count)
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
def _bounds_pay(scored, tightened, width):
    """Whether a bounded pass that scored and tightened these shares of the rows cost
    less than a plain pass, for ``width = k d``: a model in nanoseconds a row, fitted on
    uniform and clustered data (10^5-10^6 rows, k d = 256-8,192, 2-core AVX-512 Xeon):
    a plain pass ``20 + 0.06 k d``; a bounded one 7 for its book-keeping, 120 for each
    bound made exact (one row read at random: a cache miss, whatever d) and 1.05 plain
    rows for each row scored. (A rule of scoring fewer than half the rows keeps the bounds
    on uniform data at k = d = 16, where they cost 1.1-1.4 plain passes.)"""
    plain = 20.0 + 0.06 * width
    return 7.0 + 120.0 * tightened + 1.05 * scored * plain < plain


@njit(parallel=prange_only(), nogil=True, cache=CACHE)
def hamerly_loop(X, x_sq, weight, centers, max_iter, tol, n_threads, labels, dist,
                 adaptive):
    """:func:`~sktransformer.cluster._compiled._lloyd.dense_loop` with the bounds: its
    results, from the same arguments but the sums' buffers. The clusters' sums are kept
    in float64 and changed only by the rows that change label.

    ``adaptive``: the bounds only where they pay. The passes are plain while more than
    ``SWITCH`` of the rows change label (the bounds would settle few); and when a bounded
    pass costs more than a plain one would (:func:`_bounds_pay`), plain again, until four
    times fewer change.
    """
    n, k, d = X.shape[0], centers.shape[0], X.shape[1]
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
        CT, half_sq = center_keys(centers)
        geometry = _geometry(centers, previous)
        if n_threads == 1:  # (no team: see _lloyd.dense_loop)
            hamerly_span(X, x_sq, weight, centers, CT, half_sq, labels, upper, lower,
                         geometry, delta[0], delta_size[0], delta_count[0], 0, n,
                         accumulate, mode, counts[0])
        else:
            for t in prange(n_threads):
                lo, hi = _split(n, t, n_threads)
                hamerly_span(X, x_sq, weight, centers, CT, half_sq, labels, upper, lower,
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
        elif mode == BOUNDED and not _bounds_pay(scored / n, tightened / n, k * d):
            mode, switch = PLAIN, switch / 4
        else:
            mode = BOUNDED
        for t in range(n_threads):
            total += delta[t]
            size += delta_size[t]
            members += delta_count[t]
        empty = _emptied(total, size, members)
        if empty.shape[0]:  # (rare: exact distances for scikit-learn's relocation)
            sq_dist(X, centers, labels, dist, 0, n)
        empty, far = relocations(empty, dist)
        far_from = labels[far]
        previous = centers
        centers, shift = update(centers, total, size, empty, far, X[far], labels, weight,
                                False)
        state = 1 if changes == 0 else 2 if spent(shift, tol, n_iter, max_iter) else 0
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
        sq_dist(X, centers, labels, dist, 0, n)
    else:
        for t in prange(n_threads):
            lo, hi = _split(n, t, n_threads)
            sq_dist(X, centers, labels, dist, lo, hi)
    return centers, n_iter, state == 1
