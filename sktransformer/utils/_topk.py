"""A running top-k over tiles of scores: each row keeps its ``kk`` best keys so far.

The exact kNN search scores its keys by cache-sized tiles (``attention.topk_keys``); after
each tile's product, :func:`merge_topk` merges the tile into its rows' running top-k, a
min-heap per row whose root is the row's ``kk``-th best score so far. A row of the tile is
read once, into the maxima of ``GROUPS`` strided groups of its keys (elementwise halvings,
which vectorize); only a group whose maximum beats the root is scanned key by key. After
the first tiles few do: of ``n`` keys in random order, about ``kk (1 + ln(n / kk))`` ever
enter a row's heap.

numba compiles the loop (the ``fast`` extra; :mod:`._numba`). It releases the GIL, so
worker threads can merge their own rows' tiles at once. Without numba there is no loop:
callers check :func:`topk_available` and search another way.
"""

import numpy as np
import torch

from ._numba import DTYPES, CompiledLoops

GROUPS = 64  # strided groups of keys per row of a tile, whose width is GROUPS x 2^j, j >= 1


def _build(numba, cache):
    """numba's merge, compiled (or loaded from numba's cache) for float32 and float64."""

    @numba.njit(nogil=True, cache=cache, boundscheck=False)
    def merge(tile, start, values, indices):
        width, kk = tile.shape[1], values.shape[1]
        half = width // 2
        maxima = np.empty(half, tile.dtype)
        for r in range(tile.shape[0]):
            row, heap, keys = tile[r], values[r], indices[r]
            # maxima[g] = max of row[g::GROUPS] by halvings (NaN ignored: b unless a wins)
            for t in range(half):
                a, b = row[t], row[t + half]
                maxima[t] = a if a > b or b != b else b
            w = half // 2
            while w >= GROUPS:
                for t in range(w):
                    a, b = maxima[t], maxima[t + w]
                    maxima[t] = a if a > b or b != b else b
                w //= 2
            root = heap[0]
            for g in range(GROUPS):
                if maxima[g] > root:
                    for j in range(g, width, GROUPS):
                        value = row[j]
                        if value > root:  # it takes the root's place, then sinks
                            p = 0
                            while True:
                                c = 2 * p + 1
                                if c >= kk:
                                    break
                                if c + 1 < kk and heap[c + 1] < heap[c]:
                                    c += 1
                                if heap[c] >= value:
                                    break
                                heap[p], keys[p] = heap[c], keys[c]
                                p = c
                            heap[p], keys[p] = value, start + j
                            root = heap[0]

    for dtype in (np.float32, np.float64):  # compiled (or loaded) here, both at once
        merge(np.zeros((1, 2 * GROUPS), dtype), 0, np.full((1, 1), -np.inf, dtype),
              np.zeros((1, 1), np.int64))
    return merge


_LOOPS = CompiledLoops(_build, "numba's running top-k", "torch's top-k")


def topk_available():
    """Whether the compiled merge exists (numba installed, the loop enabled). The first
    call imports numba and loads the loop: a process's one-time cost."""
    return _LOOPS.get() is not None


def merge_topk(scores, start, values, indices):
    """Merge ``scores (rows, m)``, the scores of keys ``start .. start + m - 1``, into each
    row's running top-k ``values (rows, kk)`` and ``indices (rows, kk)``, in place.

    Start a search with ``values`` all ``-inf`` and ``indices`` all ``-1`` and merge its
    tiles in any order: then ``values`` holds each row's ``kk`` best scores (in heap
    order, not sorted) and ``indices`` their keys; a row with fewer than ``kk`` finite
    scores keeps ``-inf`` and ``-1`` for the rest. A key enters only above the row's
    ``kk``-th best score so far: of equal scores the one merged first stays, and NaN
    scores never enter. Needs :func:`topk_available`, CPU tensors without gradient,
    ``scores`` and ``values`` of one float dtype (float32 or float64), ``indices`` int64,
    all contiguous, and ``m`` ``GROUPS`` times a power of two from 2 on (pad a tile
    with ``-inf``).
    """
    rows, m = scores.shape
    if not topk_available():
        raise RuntimeError("merge_topk needs numba (pip install numba).")
    if (scores.dtype not in DTYPES or values.dtype != scores.dtype
            or indices.dtype != torch.int64):
        raise TypeError(f"merge_topk takes float32 or float64 scores and values and int64 "
                        f"indices, not {scores.dtype}, {values.dtype}, {indices.dtype}.")
    tensors = (scores, values, indices)
    if not all(t.device.type == "cpu" and t.is_contiguous() for t in tensors):
        raise ValueError("merge_topk takes contiguous CPU tensors.")
    groups = m // GROUPS
    if m % GROUPS or groups < 2 or groups & (groups - 1) or values.shape != indices.shape \
            or values.shape[0] != rows or values.shape[1] < 1:
        raise ValueError(f"merge_topk: scores {tuple(scores.shape)} (width {GROUPS} times "
                         f"a power of two from 2 on), values {tuple(values.shape)} and "
                         f"indices {tuple(indices.shape)} (the same rows).")
    _LOOPS.get()(scores.numpy(), start, values.numpy(), indices.numpy())
