"""Trimmed k-means' per-layer bookkeeping in one compiled pass.

After each layer, trimming needs each group's radius (the ``ceil(q n_j)``-th smallest
squared distance of its ``n_j`` points), the points beyond it, and the points on the other
side of the last layer's radius. torch's path (``cluster._updates.Trim``) takes a few dozen
small operations, each of which pays 10-20 us right after a layer (whose product leaves
the caches to X). The loop here does it in one pass over the points and a few over those
near the last radius: the radius is selected among the points beyond ``wide`` (0.9 of the
last radius) when each group has enough of them, as
:func:`~sktransformer.attention.group_quantile` does with ``below``. In a loop of layers at
100,000 x 32, k = 64, the whole update then took 1.2 ms per layer against 2.1-2.2 by
torch's path with per-cluster trimming, 0.9 against 1.2-1.3 with global trimming (the
layer: about 4 ms).

The results are those of torch's path, to the bit: selection returns one of the values,
and the comparisons are the same.
"""

import math

import numpy as np
import torch

from ...utils import COMPILED_DTYPES as DTYPES
from ...utils import CompiledLoops
from ...utils import plain_tensors as plain


def _build(numba, cache):
    """numba's pass, compiled (or loaded from numba's cache) for float32 and float64. (One
    function: one that calls another compiled function misses numba's cache in every
    process.)"""

    @numba.njit(nogil=True, cache=cache, boundscheck=False)
    def trim_pass(dist, labels, n_groups, q, cutoff, wide, among, marked, x, shift, sums,
                  weight):
        n, per_group, warm = dist.shape[0], n_groups > 1, cutoff.shape[0] > 0
        counts = np.zeros(n_groups, np.int64)
        tail = np.zeros(n_groups, np.int64)
        # the points beyond ``wide``, appended without a branch (a mispredicted one per
        # point beyond cost more than the rest of the loop)
        n_among = 0
        if per_group:
            for i in range(n):
                g = labels[i]
                if g < 0 or g >= n_groups:  # (bounds unchecked but this one)
                    raise IndexError("label out of range")
                counts[g] += 1
                marked[i] = g
                beyond = warm and dist[i] > wide[g]
                among[n_among] = i
                n_among += beyond
                tail[g] += beyond
        else:  # (no count in memory to increment at every point)
            bound = wide[0] if warm else np.inf
            for i in range(n):
                marked[i] = labels[i]
                among[n_among] = i
                n_among += dist[i] > bound
            counts[0], tail[0] = n, n_among
        need = np.empty(n_groups, np.int64)  # the radius is the need-th largest distance
        enough = warm
        for j in range(n_groups):
            rank = max(1, math.ceil(q * counts[j] * (1 - 1e-9)))
            need[j] = counts[j] - rank + 1
            if counts[j] and tail[j] < need[j]:
                enough = False
        if not enough:
            n_among, tail = -1, counts  # (select among all points)
        n_seen = n if n_among < 0 else n_among
        # each group's need-th largest: its points gathered by group, then selected
        start = np.zeros(n_groups + 1, np.int64)
        for j in range(n_groups):
            start[j + 1] = start[j] + tail[j]
        fill = start[:n_groups].copy()
        values = np.empty(start[n_groups], dist.dtype)
        for t in range(n_seen):
            i = t if n_among < 0 else among[t]
            g = labels[i] if per_group else 0
            values[fill[g]] = dist[i]
            fill[g] += 1
        radius = np.full(n_groups, -np.inf, dist.dtype)
        for j in range(n_groups):
            if not counts[j]:
                continue
            # quickselect (Hoare's partition, middle pivot) of the segment, in place
            # (numba's np.partition took 18 s to compile)
            lo, hi, at = start[j], start[j + 1] - 1, start[j] + tail[j] - need[j]
            while lo < hi:
                pivot = values[(lo + hi) // 2]
                a, b = lo, hi
                while a <= b:
                    while values[a] < pivot:
                        a += 1
                    while values[b] > pivot:
                        b -= 1
                    if a <= b:
                        values[a], values[b] = values[b], values[a]
                        a += 1
                        b -= 1
                if at <= b:
                    hi = b
                elif at >= a:
                    lo = a
                else:  # between the two sides: equal to the pivot
                    break
            radius[j] = values[at]
        # the points trimmed (side 0), and those that crossed the last radius inwards (1)
        # or outwards (2), in one pass into arrays of the largest size
        found = np.empty((3, n_seen), np.int64)
        sizes = np.zeros(3, np.int64)
        for t in range(n_seen):
            i = t if n_among < 0 else among[t]
            g = labels[i] if per_group else 0
            out = dist[i] > radius[g]
            if out:
                found[0, sizes[0]] = i
                sizes[0] += 1
                marked[i] = -1
            if warm and out != (dist[i] > cutoff[g]):
                side = 2 if out else 1
                found[side, sizes[side]] = i
                sizes[side] += 1
        trimmed, entered, left = (found[0, :sizes[0]], found[1, :sizes[1]],
                                  found[2, :sizes[2]])
        # the sums over the members within the last radius (all points on the first
        # layer: the trimmed ones left), corrected by the points that crossed it (unless
        # most did: then the caller sums again)
        out_side = 2 if warm else 0
        if x.shape[0] and sizes[1] + sizes[out_side] <= n // 2:
            for side, sign in ((out_side, -1.0), (1, 1.0)):
                for t in range(sizes[side]):
                    i = found[side, t]
                    g = labels[i]
                    for c in range(x.shape[1]):
                        sums[g, c] += sign * (x[i, c] - shift[c])
                    weight[g] += sign
        return radius, trimmed, entered, left

    for dtype in (np.float32, np.float64):  # compiled (or loaded) here, all at once
        one, labels = np.ones(1, dtype), np.zeros(1, np.int64)
        x = np.zeros((1, 1), dtype)
        # the sums: a contiguous array, or a view of a layer's (layouts numba tells apart)
        for sums in (np.zeros((1, 1), dtype), np.zeros((3, 3), dtype)[:2, :2]):
            trim_pass(one, labels, 1, 0.5, one, one, labels.copy(), labels.copy(), x, one,
                      sums, one.copy())
    return trim_pass


_LOOPS = CompiledLoops(_build, "numba's trimming pass", "torch's")


def trim_pass_available(dist, labels):
    """Whether :func:`trim_pass` runs for these tensors: numba installed and the loop
    enabled, contiguous CPU tensors without gradient, float32 or float64 distances and
    int64 labels. The first call loads the loop."""
    return (plain(dist, labels) and dist.dtype in DTYPES and labels.dtype == torch.int64
            and _LOOPS.get() is not None)


def trim_pass(dist, labels, n_groups, q, cutoff, wide, marked, scratch, corrections=None):
    """Trimmed k-means' radius and the points on each side of it, in one compiled pass.

    Parameters
    ----------
    dist : Tensor of shape (n,), float32 or float64
        Each point's squared distance to its center (non-negative).
    labels : Tensor of shape (n,), int64
        Each point's cluster; the group is the cluster when ``n_groups > 1``, else every
        point is in group 0 (global trimming).
    q : float
        The fraction of each group's points to keep.
    cutoff, wide : Tensor of shape (n_groups,) or None
        The last layer's radius, and ``0.9`` of it (None: the first layer).
    marked : Tensor of shape (n,), int64
        Written: ``labels``, with -1 for the trimmed points.
    scratch : Tensor of shape (n,), int64
        Work space (overwritten).
    corrections : tuple or None
        ``(x, shift, sums, weight)``: the points ``x (n, d)`` (contiguous) and their shift,
        and the sums ``(n_clusters, d)`` and weights ``(n_clusters,)`` of each cluster's
        points within ``cutoff`` (a layer's), in X's dtype; corrected in place by the
        points that crossed ``cutoff`` (``+ (x_i - shift)``, ``+ 1`` for those entered,
        the opposite for those left, in that order, as torch's ``index_add_`` would),
        unless more than half of the points crossed it.

    Returns
    -------
    radius : Tensor of shape (n_groups,)
        The ``ceil(q n_j)``-th smallest distance of each group (``-inf`` for an empty one).
    trimmed : Tensor of int64
        The points beyond their group's radius, in order.
    entered, left : Tensor of int64
        The points at most ``radius`` but beyond ``cutoff``, and the reverse (empty, and
        ``trimmed``, on the first layer), in order.
    """
    none = dist.new_empty(0)
    if corrections is None:
        corrections = (dist.new_empty(0, 1), none, dist.new_empty(0, 1), none)
    x, shift, sums, weight = (t.numpy() for t in corrections)  # (sums: a view, written)
    arrays = (dist, labels, cutoff if cutoff is not None else none,
              wide if wide is not None else none, scratch, marked)
    dist, labels, cutoff, wide, scratch, marked = (t.contiguous().numpy() for t in arrays)
    radius, trimmed, entered, left = _LOOPS.get()(
        dist, labels, n_groups, q, cutoff, wide, scratch, marked, x, shift, sums, weight)
    if not len(cutoff):
        left = trimmed
    return tuple(torch.from_numpy(a) for a in (radius, trimmed, entered, left))
