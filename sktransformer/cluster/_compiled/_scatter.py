"""Row sums by index, ``acc[index[i]] += w_i source[i]``: the center update's accumulation.

torch's CPU ``index_add_`` adds one row at a time, at 10-17 ns a row on the machines we
measure (a third of a k-means layer at d = 16). Large fits of the torch layers run a
compiled loop instead: 4-6 ns a row, the per-row weight folded
in, and the GIL released, so the layer's worker threads do not queue for it. The rows are
added in the same order, so the sums are the same to the bit.

The compiled loop costs a fresh process about 0.25 s to import numba and 0.2-0.4 s to load
its cached machine code (about 1 s to compile it, the first time ever), and about 100 MB of
memory for numba's compiler: callers ask for it (``compiled=True``) only for fits whose
every layer is large (see ``COMPILED_MIN_ELEMENTS``).
"""

import numpy as np
import torch

from ...utils import COMPILED_DTYPES as DTYPES
from ...utils import LANES, CompiledLoops, spread
from ...utils import plain_tensors as plain

# A fit uses the compiled loop from this many token elements (rows x width) a layer on
# (30,000 points of 32 features): smaller fits never load numba. The loop saves about 8 ns
# a row per layer of one thread, so the one-time load is repaid within a single fit only
# from about 10^8 rows x layers on (10^6 points, 100 layers); below that, over the
# process's later fits (a grid search, n_init, a notebook).
COMPILED_MIN_ELEMENTS = 1 << 20
# Once a process has loaded the loop (a large fit did), smaller fits use it too from this
# many elements on: a call costs about 10 us, which torch's index_add_ beats below about
# a thousand rows (150 x 5: 4.9 against 10 us; 1000 x 17: 27 against 13; 10000 x 5: 166
# against 49)
_LOADED_MIN_ELEMENTS = 1 << 14


def _build(numba, cache):
    """numba's loops, compiled (or loaded from numba's cache) for float32 and float64."""

    # (bounds unchecked but the index's: a wrong one raises instead of writing elsewhere)
    @numba.njit(nogil=True, cache=cache, boundscheck=False)
    def add_rows(acc, index, source, dist, radius):
        for i in range(source.shape[0]):
            j = index[i]
            if j < 0 or j >= acc.shape[0]:
                raise IndexError("index out of range")
            if radius.shape[0] and dist[i] > radius[0 if radius.shape[0] == 1 else j]:
                continue
            for c in range(source.shape[1]):
                acc[j, c] += source[i, c]

    @numba.njit(nogil=True, cache=cache, boundscheck=False)
    def add_weighted_rows(acc, index, source, dist, radius, weight, shift):
        for i in range(source.shape[0]):
            j, w = index[i], weight[i]
            if j < 0 or j >= acc.shape[0]:
                raise IndexError("index out of range")
            if radius.shape[0] and dist[i] > radius[0 if radius.shape[0] == 1 else j]:
                continue
            for c in range(source.shape[1]):
                acc[j, c] += w * (source[i, c] - shift[c])

    for dtype in (np.float32, np.float64):  # compiled (or loaded) here, all at once
        acc, index, one = np.zeros((1, 1), dtype), np.zeros(1, np.int64), np.ones(1, dtype)
        add_rows(acc, index, acc, one, one)
        add_weighted_rows(acc, index, acc, one, one, one, one)
    return add_rows, add_weighted_rows


_LOOPS = CompiledLoops(_build, "numba's row sums", "torch's index_add_")
_NONE = {torch.float32: np.empty(0, np.float32), torch.float64: np.empty(0, np.float64)}


def compiled_available():
    """Whether numba is installed (and the compiled loop enabled). The first call imports
    numba and loads the loops: a process's one-time cost (see the module's docstring)."""
    return _LOOPS.get() is not None


def use_compiled(n_elements):
    """Whether a fit of ``n_elements`` token elements a layer sums by the compiled loop:
    from ``COMPILED_MIN_ELEMENTS`` on, loading it if need be; from ``_LOADED_MIN_ELEMENTS``
    on once this process has loaded it (nothing left to pay)."""
    if n_elements >= COMPILED_MIN_ELEMENTS:
        return compiled_available()
    return n_elements >= _LOADED_MIN_ELEMENTS and _LOOPS.loaded


def index_add_rows(acc, index, source, weight=None, *, shift=None, within=None,
                   compiled=False, scratch=None):
    """``acc[index[i]] += weight[i] * (source[i] - shift)`` in place, for ``acc (k, w)``,
    ``index (m,)`` and ``source (m, w)`` (``weight (m,)`` or None for ones, ``shift (w,)``
    or None for zeros, given only with a weight); returns ``acc``.

    ``within=(dist, radius)``: only the rows with ``dist[i] <= radius[index[i]]`` (one radius
    for all when of shape (1,)); the others go to ``acc``'s last row, which the caller
    discards (they are skipped on the compiled path). ``compiled=True`` runs numba's loop
    when it can (numba installed; CPU tensors of one float dtype, contiguous, without
    gradient; int64 index), else torch's ``index_add_``: the same operations in the same
    order. ``scratch``: a ``(m, w)`` buffer that torch's path may write the shifted rows into.
    """
    return RowAdder(acc, index, weight, shift=shift, compiled=compiled)(
        slice(None), source, within=within, scratch=scratch)


class RowAdder:
    """:func:`index_add_rows` into one ``acc`` by the rows of one ``index`` (and ``weight``),
    a chunk at a time: ``adder(sl, source)`` adds the rows ``source`` of the points ``sl``.
    The checks and conversions that do not depend on the chunk are made once (a layer adds
    each chunk's members; through :func:`index_add_rows`, 9 us a call)."""

    def __init__(self, acc, index, weight=None, *, shift=None, compiled=False):
        self.acc, self.index, self.weight, self.shift = acc, index, weight, shift
        extra = [t for t in (weight, shift) if t is not None]
        self._arrays = None  # (numba's loop: the numpy views)
        if (compiled and acc.dtype in DTYPES and index.dtype == torch.int64
                and all(t.dtype == acc.dtype for t in extra) and plain(acc, index, *extra)
                and compiled_available()):
            weight_np = shift_np = None
            if weight is not None:  # (the weighted loop also takes the shift: zeros if none)
                weight_np = weight.numpy()
                shift_np = (acc.new_zeros(acc.shape[1]) if shift is None else shift).numpy()
            self._arrays = acc.numpy(), index.numpy(), weight_np, shift_np

    def __call__(self, sl, source, *, within=None, scratch=None):
        """Add the rows ``source`` of the points ``sl`` (``within``, ``scratch``: as
        :func:`index_add_rows`'s, for these rows); returns the accumulator."""
        acc = self.acc
        limits = () if within is None else within
        if (self._arrays is not None and all(t.dtype == acc.dtype for t in (source, *limits))
                and plain(source, *limits)):
            add_rows, add_weighted_rows = _LOOPS.get()
            acc_np, index, weight, shift = self._arrays
            none = _NONE[acc.dtype]
            limits = (none, none) if within is None else tuple(t.numpy() for t in within)
            if weight is None:
                add_rows(acc_np, index[sl], source.numpy(), *limits)
            else:
                add_weighted_rows(acc_np, index[sl], source.numpy(), *limits, weight[sl],
                                  shift)
            return acc
        index, weight, shift = self.index[sl], self.weight, self.shift
        if within is not None:  # (a negative distance is within any radius)
            dist, radius = within
            bound = radius if len(radius) == 1 else radius.index_select(0, index)
            index = index.masked_fill(dist > bound, acc.shape[0] - 1)
        if weight is not None:
            weight = weight[sl].unsqueeze(1)
            source = (source * weight if shift is None
                      else torch.sub(source, shift, out=scratch).mul_(weight))
        lanes = spread(index, acc.shape[0])
        if lanes is not None:
            partial = acc.new_zeros(acc.shape[0] * LANES, acc.shape[1]).index_add_(
                0, lanes, source)
            return acc.add_(partial.view(acc.shape[0], LANES, acc.shape[1]).sum(1))
        return acc.index_add_(0, index, source)
