"""Point tokens of a sparse matrix: the circuit on CSR data, never densified.

The score of a chunk is a sparse x dense matmul, ``X_chunk @ C^T`` (plus the score's slots,
a ``(k, n_slots)`` product), on the device; the center update adds each stored value to its
center's column by ``index_put`` (hard) or ``index_add`` of the soft weights (soft), so
time and memory follow the non-zeros. Centers are dense. The points are not shifted by
their mean (that would fill X in), so the float32 precision of the dense path's centering
is not available: pass float64 for data far from the origin.
"""

import warnings

import numpy as np
import scipy.sparse as sp
import torch

from ..attention import get_score
from ..utils import iter_chunks, to_tensor
from ._lloyd import PointTokens, rows_out


class _Chunk:
    """Rows ``sl`` of the CSR data: the torch CSR tensor and its coordinates, and what the
    layer reads of a dense chunk (:class:`~._lloyd.Chunk`): ``sl`` and ``x_sq``."""

    def __init__(self, sl, x_sq, crow, cols, values, shape):
        self.sl, self.x_sq = sl, x_sq
        self.crow, self.cols, self.values, self.shape = crow, cols, values, shape
        with warnings.catch_warnings():  # torch calls its CSR support "beta"
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support")
            self.csr = torch.sparse_csr_tensor(crow, cols, values, shape,
                                               check_invariants=False)
        counts = crow[1:] - crow[:-1]
        self.rows = torch.repeat_interleave(torch.arange(shape[0], device=crow.device), counts)

    def image_of(self, scores):
        """(The scores are a fresh tile: :func:`~._lloyd.hard_assign` reads it itself.)"""
        return None

    def outs(self, labels, min_dist):
        """(A chunk made for one layer: its views are made each time.)"""
        return rows_out(self.sl, labels, min_dist)


class SparsePointTokens(PointTokens):
    """:class:`PointTokens` of a scipy CSR matrix, held on ``device`` in CSR form."""

    compiled = False  # (the updates' compiled passes read dense rows)

    def __init__(self, X, device, *, rows, attention="euclidean"):
        X = sp.csr_matrix(X)
        if not X.has_sorted_indices:
            X = X.sorted_indices()  # (a copy: the caller's matrix is never changed)
        self.indptr = X.indptr.astype(np.int64)  # on the host: chunk bounds without a sync
        self.crow = to_tensor(self.indptr, device)
        self.cols = to_tensor(X.indices.astype(np.int64), device)
        self.values = to_tensor(X.data, device)
        self.X, self.rows, self.score = None, rows, get_score(attention)
        self.n, self.d = X.shape
        self.shift = self.values.new_zeros(self.d)
        self.x_sq = self.values.new_empty(self.n)
        for sl in iter_chunks(self.n, rows):
            self.x_sq[sl] = self.score.from_sq_norms(self.sq_norms(sl))
        self.width = self.d + self.score.n_slots
        self.weight_column = self.width - 1

    @property
    def _values(self):
        return self.values

    def sq_norms(self, sl):
        """``||x||^2`` of the rows ``sl`` (a chunk)."""
        chunk = self._chunk(sl)
        return self.values.new_zeros(chunk.shape[0]).index_add_(0, chunk.rows,
                                                                  chunk.values.square())

    def _chunk(self, sl):
        lo, hi = int(self.indptr[sl.start]), int(self.indptr[sl.stop])
        crow = self.crow[sl.start:sl.stop + 1] - lo
        return _Chunk(sl, self.x_sq[sl], crow, self.cols[lo:hi], self.values[lo:hi],
                      (sl.stop - sl.start, self.d))

    def chunks(self, keys, start, stop):
        """Yield ``(chunk, scores (k, m))`` (``chunk``: for :meth:`member_sums`' adds and
        :meth:`add_soft`)."""
        slots = self.values.new_empty(min(self.rows, max(stop - start, 1)),
                                      self.score.n_slots)
        for sl in iter_chunks(stop, self.rows, start):
            chunk = self._chunk(sl)
            m = chunk.shape[0]
            extra = self.score.slots(chunk.x_sq, slots[:m])
            scores = torch.addmm((chunk.csr @ keys[:, :self.d].T).T, keys[:, self.d:],
                                 extra.T)
            yield chunk, scores

    def member_sums(self, acc, labels, sample_weight=None):
        """:meth:`PointTokens.member_sums` of CSR chunks: each stored value into its
        center's column by ``index_put``."""
        def add(chunk, within=None):
            w = self._weights(chunk, sample_weight)
            assignment = labels[chunk.sl]
            if within is not None:  # (the others into acc's last row, to discard)
                dist, radius = within
                bound = radius if len(radius) == 1 else radius.index_select(0, assignment)
                assignment = assignment.masked_fill(dist > bound, acc.shape[0] - 1)
            acc[:, :self.d].index_put_((assignment[chunk.rows], chunk.cols),
                                       chunk.values * w[chunk.rows], accumulate=True)
            acc[:, self.weight_column].index_add_(0, assignment, w)
        return add

    def add_soft(self, acc, chunk, weights, sample_weight=None):
        """:meth:`PointTokens.add_soft` of a CSR chunk: column c of center j gains
        ``sum_i R[j, i] w_i x_ic``."""
        w = self._weights(chunk, sample_weight)
        acc[:, :self.d].T.index_add_(
            0, chunk.cols, (chunk.values * w[chunk.rows]).unsqueeze(1) * weights.T[chunk.rows])
        acc[:, self.weight_column] += weights @ w

    def weighted_sums(self, labels, weights, n_clusters):
        """:func:`~._lloyd.weighted_sums` of CSR rows: ``sum_i weights_i x_i`` per label,
        each stored value into its center's column."""
        acc = self.values.new_zeros(n_clusters, self.d)
        for sl in iter_chunks(self.n, self.rows):
            chunk = self._chunk(sl)
            acc.index_put_((labels[sl][chunk.rows], chunk.cols),
                           chunk.values * weights[sl][chunk.rows], accumulate=True)
        return acc

    def dots_with_own(self, vectors, labels, sl):
        """``x_i . vectors[labels_i]`` for the rows ``sl`` (a chunk), over the stored
        values."""
        chunk = self._chunk(sl)
        own = vectors[labels[sl][chunk.rows], chunk.cols]
        return self.values.new_zeros(chunk.shape[0]).index_add_(0, chunk.rows,
                                                                  chunk.values * own)

    def gram_keys(self, index):
        """The points ``index`` as the right factor of :meth:`gram` (``X[index]^T``, CSR)."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support")
            return self._csr_rows(index).t().to_sparse_csr()

    def gram(self, index, keys):
        """``X[index] keys`` as a dense ``(len(index), n_keys)`` block: dot products of
        the points ``index`` with those of :meth:`gram_keys` (a CSR product: only the
        stored values are read)."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support")
            return (self._csr_rows(index) @ keys).to_dense()

    def _csr_rows(self, index):
        """The rows ``index`` as a torch CSR tensor."""
        index = index.to(self.crow.device)
        start, counts = self.crow[index], self.crow[index + 1] - self.crow[index]
        crow = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
        which = torch.repeat_interleave(torch.arange(len(index), device=index.device), counts)
        position = start[which] + torch.arange(int(crow[-1]), device=index.device) \
            - crow[:-1][which]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support")
            return torch.sparse_csr_tensor(crow, self.cols[position], self.values[position],
                                           (len(index), self.d), check_invariants=False)

    def _weights(self, chunk, sample_weight):
        return (self.values.new_ones(chunk.shape[0]) if sample_weight is None
                else sample_weight[chunk.sl])

    def rows_of(self, index):
        """Dense rows ``index`` (a few: initial centers, relocations)."""
        if index.dim() == 0:
            return self.rows_of(index.reshape(1))[0]
        return self._csr_rows(index).to_dense()


def point_tokens(X, device, *, rows, attention, shift=None):
    """The point tokens of validated X: dense (a tensor on ``device``, shifted by ``shift``)
    or sparse (:class:`SparsePointTokens`, never shifted)."""
    if sp.issparse(X):
        return SparsePointTokens(X, device, rows=rows, attention=attention)
    return PointTokens(to_tensor(X, device), rows=rows, attention=attention, shift=shift)


def mean_and_mean_variance(X):
    """Column means (X's dtype) and the mean column variance of a sparse matrix, in
    float64 on the host (``O(nnz)``)."""
    X64 = X.astype(np.float64)
    mean = np.asarray(X64.mean(0)).ravel()
    second = np.asarray(X64.multiply(X64).mean(0)).ravel()
    return mean.astype(X.dtype), float(np.maximum(second - mean ** 2, 0).mean())
