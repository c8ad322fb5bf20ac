"""The k-means circuit evaluated in the coordinates its projections make sparse.

In :class:`~sktransformer.cluster.KMeansCircuit` every ``Q, K, V`` is a block selection
``P_x`` or ``P_y``, so a layer never needs the ``D x D`` products:

* the assignment block is dot-product attention on augmented tokens (Theorem 2.2): one
  matmul of center tokens ``[c, -||c||^2 / 2]`` with point tokens ``[x, 1]`` scores
  ``x.c - ||c||^2 / 2``, the Euclidean score up to a per-point constant. Its arg-max output
  ``e_a(i)`` is stored as the integer ``a(i)`` (hard) or as the column of soft weights (soft);
* the reset blocks overwrite ``y`` and ``c`` (a token attending to itself subtracts itself);
* the center update averages the members: ``index_add`` of the points by label (hard), or
  ``R^T [X, 1]`` (soft: the linear update, sums and weights in one matmul).

Both blocks run in one pass over chunks of points, so the ``n x k`` score matrix exists only
one ``(rows, k)`` tile at a time and the ``n x n`` reset attention never exists. The
equivalence with the token-level circuit is what ``tests/cluster/test_lloyd.py`` pins.
All functions take valid tensors (no input validation) and return tensors.
"""

import functools
import math

import torch

from ..attention import get_score, group_sums, matmul_nt, uses_onednn
from ..utils import ChunkRunner, chunk_rows, iter_chunks, logger, progress
from . import _fused
from ._compiled import (
    RowAdder,
    index_add_rows,
    lloyd_available,
    nearest_members,
    nearest_members_available,
    run_lloyd,
    use_bounds,
    use_compiled,
)
from ._compiled import assign as compiled_assign

_ONEDNN_MIN_ROWS = 256  # chunks of fewer rows keep torch.mm (see PointTokens.chunks)


def layer_rows(n_samples, n_clusters, n_features=0, batch_size=None, device=None):
    """Rows per chunk of a layer: ``batch_size`` when given, else so that both the
    ``(rows, n_clusters)`` score tile and the ``(rows, n_features + 2)`` token buffer (and
    each ``(rows, n_features)`` temporary) stay about the size :func:`chunk_rows` allows.
    ``n_features=0`` for sparse points, whose tokens are never dense. (By the tile alone, 2
    clusters of 500 features took chunks of 262,144 rows: 1.7 GB of buffers over 572 MB of
    data.) ``device``: where the layer runs (larger tiles on a GPU)."""
    width = n_features + 2 if n_features else 0
    return chunk_rows(n_samples, max(n_clusters, width), batch_size, device=device)


class PointTokens:
    """The point tokens of one data set, and the center keys that score against them.

    The token algebra is the score's (:mod:`sktransformer.attention`'s registry,
    ``attention`` is its key): ``"euclidean"``: points ``[x, 1]``, centers
    ``[c, -||c||^2/2]``, score ``s = x.c - ||c||^2/2``, so ``||x - c||^2 = ||x||^2 - 2 s``
    and the softmax logit is ``2 s / t``; ``"dot"``: the paper's tokens ``[x, ||x||^2, 1]``
    and ``[2c, -1, -||c||^2]``, ``s = -||x - c||^2`` exactly, the logit ``s / t``. The last
    column of a point token is always 1: its sum is a cluster's weight. Points are centered
    by ``shift`` (precision in float32) when the score is translation invariant (else the
    shift is zero); centers live in the same shifted coordinates, ``points.shift``.

    Each chunk's tokens are built into a reused buffer, never all ``n`` at once. (Building
    them once per fit, as scikit-learn makes one centered copy of X, measured slower on the
    benchmark's first two configurations: the per-chunk copy lands in cache just before the
    matmul reads it.)

    Scores come as a ``(k, rows)`` tile: centers attend along rows, points along columns,
    which is the layout in which the arg-max over centers vectorizes across points.
    """

    def __init__(self, X, *, rows, attention="euclidean", shift=None):
        self.X, self.rows, self.score = X, rows, get_score(attention)
        if shift is None or not self.score.translation_invariant:
            shift = X.new_zeros(X.shape[1])
        self.shift = shift
        self.n, self.d = X.shape
        self.width = self.d + self.score.n_slots
        self.weight_column = self.width - 1  # the constant-1 slot: its sum is the weight
        # the update's sums by numba's loop when installed, for large fits, or once loaded
        # (utils._scatter; loaded here, in the calling thread, before the workers need it)
        self.compiled = use_compiled(self.n * self.width)
        self._cache = {}  # the spans' chunk records
        self._buffer_cache = {}  # and their token buffers and tiles

    @functools.cached_property
    def x_sq(self):
        """What the score needs of each point (for the Euclidean scores, ``||x - shift||^2``),
        by chunks, at first use: the compiled loop makes it with its shifted copy instead.
        (Two workers asking at once each make it: the same values.)"""
        out = self.X.new_empty(self.n)
        for sl in iter_chunks(self.n, self.rows):
            out[sl] = self.score.prepare(self.X[sl] - self.shift)
        return out

    @property
    def _values(self):
        return self.X

    @property
    def device(self):
        return self._values.device

    @property
    def dtype(self):
        return self._values.dtype

    def new_empty(self, *shape):
        return self._values.new_empty(*shape)

    def new_zeros(self, *shape):
        return self._values.new_zeros(*shape)

    def new_ones(self, *shape):
        return self._values.new_ones(*shape)

    def _chunks(self, start, stop, n_keys):
        """The :class:`Chunk` records of the rows ``start:stop`` for ``n_keys`` keys, made
        once and kept for the next layers (a worker's span is the same each layer, and each
        view is a torch call), over the span's buffers (:meth:`_buffers`)."""
        key = (start, stop, n_keys)
        if key not in self._cache:
            rows = min(self.rows, stop - start)
            buffer, tile = self._buffers(start, rows, n_keys)
            self._cache[key] = [Chunk(self, sl, buffer, tile)
                                for sl in iter_chunks(stop, rows, start)]
        return self._cache[key]

    def _buffers(self, start, rows, n_keys):
        """The token buffer (``rows`` rows, its constant slots written) and the score tile of
        the spans from ``start``, made once and kept for the next layers: new buffers per
        layer raised the fit's peak memory (spans from the same row share them)."""
        key = (start, rows, n_keys)
        if key not in self._buffer_cache:
            buffer = self.X.new_empty(rows, self.width)
            if self.score.constant_slots:
                self.score.slots(None, buffer[:, self.d:])
            # (untouched, so without memory, where oneDNN returns tiles of its own)
            self._buffer_cache[key] = buffer, self.X.new_empty(n_keys, rows)
        return self._buffer_cache[key]

    def keys(self, centers):
        """Center tokens ``(k, D)`` for centers in the shifted coordinates."""
        return self.score.keys(centers)

    def onednn(self, keys):
        """Whether full chunks' products with the center tokens ``keys`` go to oneDNN
        (see :meth:`chunks`)."""
        return self.width * keys.shape[0] >= 1024 and uses_onednn(keys, keys)

    def chunks(self, keys, start, stop):
        """Yield ``(chunk, scores (k, m))`` for the rows ``start:stop``: the :class:`Chunk`
        (its tokens built) and its scores against the keys.

        Tokens and scores are views into the span's buffers (kept for the next calls over
        the same span), overwritten by the next chunk: one generator per span at a time.
        Scores may be a fresh tile instead (the oneDNN product's): a caller drops it
        (``del``) once used, so that a worker holds one tile at a time.
        """
        # oneDNN's product (a fresh tile per chunk: the callers drop each before the next)
        # pays in the fit from width x k = 1024 on (paired fit times against torch.mm into
        # the reused tile: 0.86 at d = 32, k = 64; 0.88 at d = 16, k = 256; 0.67 at d = 128,
        # k = 32; but 1.18 at d = 8, k = 8, 1.03 at d = 2, k = 16, 0.94-1.02 at d = 32, k = 16)
        # oneDNN compiles a kernel for each new shape (about 1 ms, once per process): worth
        # it for the chunks a fit repeats each layer, not for a small batch to predict.
        # Where matmul_nt does not send the product to oneDNN (no AVX-512, float64), the
        # reused tile serves: a fresh tile per chunk from torch.matmul raised the first
        # configuration's peak memory to 1.25x scikit-learn's on an AVX2 machine
        onednn = self.onednn(keys)
        for chunk in self._chunks(start, stop, keys.shape[0]):
            torch.sub(chunk.x, self.shift, out=chunk.points)
            if not self.score.constant_slots:
                self.score.slots(chunk.x_sq, chunk.slots)
            if onednn and len(chunk.tokens) >= _ONEDNN_MIN_ROWS:
                scores = matmul_nt(keys, chunk.tokens)
            else:
                scores = torch.mm(keys, chunk.tokens_t, out=chunk.tile)
            yield chunk, scores
            del scores  # (before the next product allocates its tile)

    def member_sums(self, acc, labels, sample_weight=None):
        """The hard center update's sums over a span's chunks: ``add(chunk, within=None)``
        adds ``[tokens]`` of the chunk's points into ``acc (k + 1, width)`` by their
        ``labels`` (each weighted by ``sample_weight``; the last column sums the weights).
        ``within=(dist, radius)``: only the points within their cluster's radius, the
        others into ``acc``'s last row, to discard (:func:`~sktransformer.utils.index_add_rows`)."""
        adder = RowAdder(acc, labels, sample_weight, compiled=self.compiled)
        return lambda chunk, within=None: adder(chunk.sl, chunk.tokens, within=within)

    def add_soft(self, acc, chunk, weights, sample_weight=None):
        """The soft center update's sums: ``acc (k, width) += R [tokens]`` for the chunk's
        soft weights ``R (k, m)``, each point weighted by ``sample_weight``."""
        tokens = chunk.tokens
        if sample_weight is not None:
            tokens = tokens * sample_weight[chunk.sl].unsqueeze(1)
        acc += matmul_nt(weights, tokens.T)

    def sq_dist(self, chunk, best, out=None):
        """Squared distance of the chunk's points to the center of score ``best``
        (broadcasts over centers), into ``out`` when given (which may be ``best``)."""
        return self.score.sq_dist(best, chunk.x_sq, out=out)

    def logits(self, chunk, scores, temperature):
        """Soft-assignment logits of a chunk's ``(k, m)`` score tile (overwrites it)."""
        return self.score.logits(scores, chunk.x_sq, temperature)

    def rows_of(self, index):
        """Shifted coordinates of the points ``index``."""
        return self.X[index] - self.shift

    def sq_norms(self, sl):
        """``||x - shift||^2`` of the rows ``sl`` (a chunk)."""
        return (self.X[sl] - self.shift).square().sum(1)


class Chunk:
    """One chunk of a span's rows and its views, made once per span (:meth:`PointTokens._chunks`):
    each view is a torch call of 2-3 us, and a layer's chunk made a dozen of them. With two
    workers, whose Python holds the GIL in turn, making them once took layers from 7.68 to
    7.09 ms at 100,000 x 32, k = 64 and from 15.57 to 14.62 ms at 10^6 x 16, k = 16
    (alternating processes; the same results).

    ``sl``: the rows; ``x``, ``x_sq``: their points and what the score needs of them;
    ``tokens`` (its ``points`` and ``slots`` columns, and ``tokens_t``, its transpose): the
    span's token buffer, the chunk's rows of it; ``tile``: the span's score tile, its
    first ``k x rows`` values for the last, partial chunk (a fresh tile per layer for it
    had doubled a fit's peak memory at 200,000 x 128, k = 256: 35 against 17.7 MB),
    ``image``, the tile as :func:`hard_assign`'s pool reads it (on the CPU), and through
    :meth:`outs`, its rows of the layer's labels and distances.
    """

    __slots__ = ("sl", "x", "x_sq", "tokens", "points", "slots", "tokens_t", "tile", "image",
                 "_outs")

    def __init__(self, owner, sl, buffer, tile):
        m = sl.stop - sl.start
        self.sl, self.x, self.x_sq = sl, owner.X[sl], owner.x_sq[sl]
        self.tokens = buffer[:m]
        self.points, self.slots = self.tokens[:, :owner.d], self.tokens[:, owner.d:]
        self.tokens_t = self.tokens.T
        self.tile = tile.view(-1)[:len(tile) * m].view(len(tile), m)
        self.image = _pool_image(self.tile) if tile.device.type == "cpu" else None
        self._outs = {}

    def outs(self, labels, min_dist):
        """The chunk's rows of a layer's ``labels`` and ``min_dist`` as :func:`hard_assign`
        writes them (the pool's shape) and the distances' (m,) view: made once for each pair
        of buffers (a fit alternates two label buffers), as each view is a torch call, and
        each torch call a GIL round trip for the worker threads: made each layer, they took
        1.02-1.04x the layer's time (two workers, 100,000 x 32, k = 64; 1.01-1.02 at
        10^6 x 16, k = 16 and at 200,000 x 128, k = 256)."""
        key = labels.data_ptr(), min_dist.data_ptr()  # (the views keep those alive)
        outs = self._outs.get(key)
        if outs is None:
            if len(self._outs) >= 2:  # (the final assignment's new buffers)
                self._outs.clear()
            outs = self._outs[key] = rows_out(self.sl, labels, min_dist)
        return outs

    def image_of(self, scores):
        """The pool's image of this chunk's scores: made once for the span's tile (None
        for another tile: :func:`hard_assign` makes it)."""
        return self.image if scores is self.tile else None


def rows_out(sl, labels, min_dist):
    """The rows ``sl`` of ``labels`` and ``min_dist`` in the pool's shape (1, m, 1, 1), and
    of ``min_dist`` as (m,): where a chunk's arg-max and best score go."""
    best = min_dist[sl]
    return labels[sl].view(1, -1, 1, 1), best.view(1, -1, 1, 1), best


def _pool_image(scores):
    """A ``(k, m)`` tile read as one image of ``m`` channels and ``k`` pixels in
    channels-last memory (see :func:`hard_assign`)."""
    k, m = scores.shape
    return scores.as_strided((1, m, 1, k), (m * k, 1, m * k, m))


def hard_assign(scores, out=None, *, image=None):
    """Arg-max over centers of a ``(k, m)`` score tile, and the maxima: labels (m,), best (m,).

    The tile is read as an image with ``m`` channels and one row of ``k`` pixels in
    channels-last memory, so ``max_pool2d`` over the row returns the maximum and its index
    vectorized across points: several times faster than ``argmax`` over short rows on the
    CPU. Ties go to the lowest index (the pool keeps the first maximum), as in scikit-learn.
    ``out``: contiguous ``(labels, best)`` to write into, of shape (m,) or (1, m, 1, 1)
    (the pool's own shape: views of the layer's buffers made once per layer, as each op
    the worker threads call is a GIL round trip); returned as given. ``image``: the
    tile's image (:class:`Chunk`), when made already.
    """
    k, m = scores.shape
    if scores.device.type != "cpu":  # (the pool's reading is a CPU trick)
        return _max_over_centers(scores, out)
    if image is None:
        image = _pool_image(scores)
    if out is None:
        best, labels = torch.nn.functional.max_pool2d(image, (1, k), return_indices=True)
        return labels.view(m), best.view(m)
    labels, best = out
    if labels.dim() == 1:
        labels, best = labels.view(1, m, 1, 1), best.view(1, m, 1, 1)
    torch._C._nn.max_pool2d_with_indices(image, (1, k), (1, k), out=(best, labels))
    return out


def _max_over_centers(scores, out):
    """:func:`hard_assign` by ``torch.max`` over the tile's first dimension (the first
    maximum on ties, as the pool), off the CPU: the pool's channels-last reading is a CPU
    trick, measured there, and ``max`` is the reduction every backend optimizes. (On an
    H200 a Lloyd iteration with the pool ran at 1/11.7 of the matmul's rate; with this,
    at n = 10^6, k = 1024, the arg-max took 2.4 ms of a pass's 12 ms of kernels, reading
    the tiles at 1.7 TB/s: docs/benchmarks.md, "The second GPU run".)"""
    if out is None:
        best, labels = scores.max(0)
        return labels, best
    labels, best = out
    m = scores.shape[1]
    torch.max(scores, 0, out=(best.view(m), labels.view(m)))
    return out


_LOG2E = 1.0 / math.log(2.0)


def soft_assign(points, chunk, scores, best, temperature):
    """Softmax over centers of a chunk's ``(k, m)`` score tile (overwritten), given its column
    maxima ``best``: ``2^((l - max l) log2 e)`` normalized, for the logits ``l``.

    Every score's logit is linear in the score (``l = a s``, ``a`` per point for the cosine
    score), so ``(l - max l) log2 e`` is the logit of ``s - best`` at the temperature
    divided by ``log2 e``: the difference is taken before the scale, which keeps float32
    accurate at tiny temperatures (scaled first, 1e4 times the scores carried their rounding
    into the weights: 4e-4 relative at ``t = 1e-4``). torch's ``exp2`` runs about four
    times faster than its ``exp`` on the CPU (``torch.softmax`` over the tile's first
    dimension took 0.35 ms for 64 x 4096 scores, this 0.14).
    """
    logits = points.logits(chunk, scores.sub_(best), temperature / _LOG2E)
    weights = logits.exp2_()
    return weights.div_(weights.sum(0))


_SERIAL = ChunkRunner(1)


def assign(points, centers, *, runner=_SERIAL):
    """The assignment block alone: labels and squared distances to the closest center (the
    layer without its center update; compiled where :func:`run_layers`' loop is)."""
    if points.score.name in ("euclidean", "dot") and points.n:
        compiled = compiled_assign(points, centers)
        if compiled is not None:
            return compiled
    labels = torch.empty(points.n, dtype=torch.long, device=points.device)
    min_dist = points.new_empty(points.n)
    layer(points, None, centers, labels=labels, min_dist=min_dist, accumulate=False,
          runner=runner)
    return labels, min_dist


def sq_distances(points, centers, *, runner=_SERIAL, by_center=False):
    """Squared distances to every center, shape (n_samples, n_clusters), or
    (n_clusters, n_samples) with ``by_center``: each center's distances in one row,
    written straight from the score tiles (k-means++'s candidates: the points' rows
    gathered from the tiles' columns took 96 of k-means++'s 436 ms at 100,000 x 32,
    k = 64)."""
    k = centers.shape[0]
    out = points.new_empty(k, points.n) if by_center else points.new_empty(points.n, k)
    keys = points.keys(centers)

    def span(start, stop):
        for chunk, scores in points.chunks(keys, start, stop):
            if by_center:
                points.sq_dist(chunk, scores, out=out[:, chunk.sl])
            else:
                out[chunk.sl] = points.sq_dist(chunk, scores).T
            del scores

    runner.map(span, points.n)
    return out.clamp_(min=0.0)


_ROUNDING = 16  # eps's of |x|^2 + |c|^2 below which a matmul-form distance is rounding


def exact_near_zero(points, centers, sq):
    """``sq`` (the squared distances of all points to all centers, (n_samples,
    n_clusters)) with the entries that are rounding taken again by differences, in place.

    The matmul form ``|x|^2 + |c|^2 - 2 x.c`` cancels to about ``eps (|x|^2 + |c|^2)``: a
    point on a center is reported ``sqrt(eps) |x|`` away from it (6e-8 at unit scale in
    float64; scikit-learn's ``euclidean_distances`` is exact there only for X is Y). The
    entries within ``_ROUNDING`` of that are few (points on or next to a center)."""
    eps = torch.finfo(sq.dtype).eps
    c_sq = centers.square().sum(1)
    near = []
    for sl in iter_chunks(points.n, points.rows):
        bound = points.sq_norms(sl)[:, None] + c_sq
        i, j = torch.nonzero(sq[sl] <= bound.mul_(_ROUNDING * eps), as_tuple=True)
        near.append((i + sl.start, j))
    i, j = torch.cat([n[0] for n in near]), torch.cat([n[1] for n in near])
    sq[i, j] = _by_differences(points, i, centers[j])
    return sq


def _by_differences(points, index, vectors):
    """``||x_index - vectors||^2`` row by row, taking the differences (no cancellation),
    by chunks of about 2^20 coordinates (the rows of sparse points are made dense)."""
    out = points.new_empty(index.numel())
    for sl in iter_chunks(index.numel(), max(1, (1 << 20) // max(points.d, 1))):
        out[sl] = (points.rows_of(index[sl]) - vectors[sl]).square().sum(1)
    return out


def iter_sq_distances(points, centers):
    """Yield ``(rows, sq_dist)``: the squared distances of the chunk ``rows`` of the points
    to every center, shape (m, n_clusters), one chunk at a time (memory bounded by the
    chunk, as the layer's)."""
    keys = points.keys(centers)
    for chunk, scores in points.chunks(keys, 0, points.n):
        sq_dist = points.sq_dist(chunk, scores).T.clamp(min=0.0)
        del scores
        yield chunk.sl, sq_dist


def layer(points, sample_weight, centers, *, labels, min_dist, temperature=None,
          accumulate=True, cutoff=None, runner=_SERIAL):
    """One layer (one Lloyd step) from ``centers``.

    Parameters
    ----------
    points : PointTokens
    sample_weight : Tensor of shape (n_samples,) or None
    centers : Tensor of shape (n_clusters, n_features)
        Centers in the shifted coordinates of ``points``.
    labels, min_dist : Tensor of shape (n_samples,)
        Written in place: the arg-max assignment and the squared distance to that center
        (both with respect to the input ``centers``).
    temperature : float or None
        ``None`` is hard attention; otherwise soft weights ``softmax(-||x - c||^2 / t)``.
    accumulate : bool
        Whether to run the mean center update in the same pass. Variants whose update needs
        every point's distance first (sparsemax) skip it and return ``None``.
    cutoff : Tensor of shape (n_clusters,) or (1,), or None
        Hard mode: sum only the points within ``cutoff[label]`` (squared distance; one
        radius for all when of shape (1,)) of their center; the others go to a discarded
        row (trimming's last radius).
    runner : ChunkRunner
        Splits the rows among worker threads.

    Returns
    -------
    sums : Tensor of shape (n_clusters, n_features) or None
        Weighted sums of the members (hard) or ``R^T X`` (soft).
    weight_in_clusters : Tensor of shape (n_clusters,) or None

    Hard layers on the points the fused kernel serves (:mod:`._fused`: dense float32 on
    a GPU) assign there, without a score tile, and sum the members in a second pass.
    """
    k = centers.shape[0]
    if temperature is None and _fused.available(points):
        fused_labels, fused_dist = _fused.assign(points, centers)
        labels.copy_(fused_labels)
        min_dist.copy_(fused_dist)
        if not accumulate:
            return None, None
        w = points.new_ones(points.n) if sample_weight is None else sample_weight
        if cutoff is not None:  # (beyond its cluster's radius a point weighs nothing)
            w = w * (min_dist <= (cutoff if len(cutoff) == 1 else cutoff[labels]))
        return (weighted_sums(points, labels, w, k, runner=runner),
                group_sums(w, labels, k).to(points.dtype))
    keys = points.keys(centers)

    def span(start, stop):
        acc = points.new_zeros(k + 1, points.width)  # [sums, ..., weight]; row k: discarded
        add_members = (points.member_sums(acc, labels, sample_weight)
                       if accumulate and temperature is None else None)
        for chunk, scores in points.chunks(keys, start, stop):
            # the arg-max and the best score straight into labels and min_dist (each op is
            # a GIL round trip for the worker threads: fewer ops, faster layers)
            labels_out, dist_out, best = chunk.outs(labels, min_dist)
            hard_assign(scores, out=(labels_out, dist_out), image=chunk.image_of(scores))
            weights = None
            if accumulate and temperature is not None:  # (from the best score)
                weights = soft_assign(points, chunk, scores, best, temperature)
            del scores  # (soft: the weights are the tile, dropped below)
            dist = points.sq_dist(chunk, best, out=best)  # (clamped at 0 once per span)
            if not accumulate:
                continue
            if weights is None:
                add_members(chunk, within=None if cutoff is None else (dist, cutoff))
            else:
                points.add_soft(acc[:k], chunk, weights, sample_weight)
                del weights
        min_dist[start:stop].clamp_(min=0.0)
        return acc

    acc = sum(runner.map(span, points.n))
    if not accumulate:
        return None, None
    return acc[:k, :points.d], acc[:k, points.weight_column].clone()


def online_step(points, sample_weight, centers, counts, *, temperature=None,
                runner=_SERIAL):
    """One mini-batch layer: the online k-means update (scikit-learn's ``MiniBatchKMeans``
    step, without its random reassignment).

    The assignment block runs on the batch; in the center update each center attends to its
    new members and to itself, with the weight ``counts`` of every point it has averaged so
    far: ``c <- (counts c + sum_members w x) / (counts + sum w)``. Soft k-means weighs the
    members by their soft assignments. A center with no weight at all keeps its place.

    Returns
    -------
    centers : Tensor of shape (n_clusters, n_features)
    counts : Tensor of shape (n_clusters,)
        The weight each center has averaged, this batch included.
    """
    labels = torch.empty(points.n, dtype=torch.long, device=points.device)
    min_dist = points.new_empty(points.n)
    sums, weight = layer(points, sample_weight, centers, labels=labels, min_dist=min_dist,
                         temperature=temperature, runner=runner)
    total = counts + weight
    safe = total.clamp(min=torch.finfo(total.dtype).tiny).unsqueeze(1)
    moved = (counts.unsqueeze(1) * centers + sums) / safe
    return torch.where((total > 0).unsqueeze(1), moved, centers), total


def relocate_empty(points, sample_weight, sums, weight_in_clusters, labels, min_dist, *,
                   hard=True, excluded=None):
    """Move each empty cluster onto one of the points farthest from their centers.

    scikit-learn's rule: the ``n_empty`` points with the largest distance to their current
    center become the new centers, and (hard mode) leave the cluster they were counted in.
    ``excluded``: the indices of points that may not be chosen (trimming's outliers); they
    rank below every other. Where every point sits on its center (more clusters than
    distinct points) nothing moves: a relocation would only empty another cluster.
    Changes ``sums`` and ``weight_in_clusters`` in place.

    Returns
    -------
    empty, far : Tensor of shape (n_empty,)
        The empty clusters and the indices of the points they moved to.
    """
    empty = torch.nonzero(weight_in_clusters == 0).flatten()
    n_empty = empty.numel()
    if n_empty == 0:
        return empty, empty
    if excluded is not None:
        min_dist = min_dist.index_fill(0, excluded, -1.0)
    top = torch.topk(min_dist, n_empty)
    if float(top.values[0]) <= 0:  # every point on its center: more clusters than points
        return empty[:0], empty[:0]
    far = top.indices
    x = points.rows_of(far)
    w = x.new_ones(n_empty) if sample_weight is None else sample_weight[far]
    reseat(sums, weight_in_clusters, empty, x, w, labels[far] if hard else None)
    return empty, far


def reseat(sums, weight_in_clusters, empty, x, w, old=None):
    """The clusters ``empty`` take the points ``x`` of weights ``w`` as their only members;
    with ``old`` (hard mode) the points leave the clusters they were counted in. IN/OUT:
    ``sums``, ``weight_in_clusters``."""
    if old is not None:
        sums.index_add_(0, old, -x * w.unsqueeze(1))
        weight_in_clusters.index_add_(0, old, -w)
    sums[empty] = x * w.unsqueeze(1)
    weight_in_clusters[empty] = w


def average(sums, weight_in_clusters, old_centers):
    """``sums / weight``, keeping the old center where a cluster weighs nothing."""
    occupied = weight_in_clusters > 0
    safe = torch.where(occupied, weight_in_clusters, torch.ones_like(weight_in_clusters))
    return torch.where(occupied.unsqueeze(1), sums / safe.unsqueeze(1), old_centers)


def weighted_sums(points, labels, weights, n_clusters, *, runner=_SERIAL):
    """The value pass of a center update: ``sum_i weights_i (x_i - shift)`` per label.

    Every label is a cluster (``0 <= labels < n_clusters``): a point to leave out (trimmed)
    gets weight 0.
    """
    weights = weights.to(points.dtype)
    if points.X is None:  # (CSR)
        return points.weighted_sums(labels, weights, n_clusters)

    def span(start, stop):
        acc = points.new_zeros(n_clusters, points.d)
        buffer = None if points.compiled else points.new_empty(
            min(points.rows, stop - start), points.d)  # (torch's path: one per span)
        for sl in iter_chunks(stop, points.rows, start):
            index_add_rows(acc, labels[sl], points.X[sl], weights[sl], shift=points.shift,
                           compiled=points.compiled,
                           scratch=None if buffer is None else buffer[:sl.stop - sl.start])
        return acc

    return sum(runner.map(span, points.n))


def add_rows(points, sums, labels, index, sample_weight=None, *, alpha=1):
    """``sums[labels_i] += alpha w_i (x_i - shift)`` for the points ``index`` (IN/OUT:
    ``sums``), by chunks: trimming's correction of a layer's sums, without a second pass
    over X."""
    for sl in iter_chunks(index.numel(), points.rows):
        rows = index[sl]
        values = points.rows_of(rows)
        if sample_weight is not None:
            values = values * sample_weight[rows].unsqueeze(1)
        sums.index_add_(0, labels[rows], values, alpha=alpha)


def sq_dist_to_own(points, vectors, labels, *, runner=_SERIAL):
    """``||x_i - shift - vectors[labels_i]||^2`` for every point, shape (n_samples,).

    By differences (a point's distance to itself is exactly 0), through two reused
    ``(rows, d)`` buffers that together make a :func:`chunk_rows` tile (cache-sized on the
    CPU, where fresh temporaries per chunk of the layer's rows took about twice as long:
    1.1 against 0.6 ms at 20,000 x 32, k = 16; 6.7 against 2.9 at 100,000 x 32; 41 against
    19 at 200,000 x 128. On a GPU, 2 MiB chunks made 122 chunks of 10^6 x 32 points, each
    a few kernel launches). Where the layer's sums are compiled, numba's pass
    (:func:`~sktransformer.utils.nearest_members`) computes them: the differences in the
    same order, the sum over features reassociated."""
    compiled = nearest_to_own(points, vectors, labels, runner=runner)
    if compiled is not None:
        return compiled[0]
    out = points.new_empty(points.n)
    if points.X is None:  # CSR: the matmul form over the stored values, rounding redone
        v_sq = vectors.square().sum(1)
        for sl in iter_chunks(points.n, points.rows):
            x_sq, own = points.sq_norms(sl), v_sq[labels[sl]]
            dots = points.dots_with_own(vectors, labels, sl)
            out[sl] = (x_sq + own - 2 * dots).clamp_(min=0)
            near = torch.nonzero(out[sl] <= (x_sq + own) * (_ROUNDING * torch.finfo(
                out.dtype).eps)).flatten() + sl.start
            out[near] = _by_differences(points, near, vectors[labels[near]])
        return out

    def span(start, stop):
        rows = chunk_rows(stop - start, 2 * points.d, device=points.device)
        diff, own = points.new_empty(rows, points.d), points.new_empty(rows, points.d)
        for sl in iter_chunks(stop, rows, start):
            m = sl.stop - sl.start
            torch.index_select(vectors, 0, labels[sl], out=own[:m])
            torch.sub(points.X[sl], points.shift, out=diff[:m]).sub_(own[:m])
            torch.sum(diff[:m].square_(), 1, out=out[sl])

    runner.map(span, points.n)
    return out


def nearest_to_own(points, vectors, labels, *, runner=_SERIAL):
    """Where the layer's sums are compiled: :func:`~sktransformer.utils.nearest_members`
    of the points against their group's vector (each point's squared distance to it, each
    group's smallest and its member); None where numba's pass cannot run."""
    if points.compiled and nearest_members_available(points.X, labels):
        return nearest_members(points.X, points.shift, vectors, labels, runner=runner)
    return None


def distance_sums(points, labels, n_groups, sample_weight=None, *, runner=_SERIAL):
    """``sum_l w_l ||x_i - x_l||`` over the points ``l`` of the same group as ``i``.

    The in-cluster cost of the alternate k-medoids step for the Euclidean metric: the
    attention of a candidate over its cluster, with the (unsquared) distance as value.
    ``O(sum_j n_j^2 d)`` time; the ``(rows, n_j)`` distance tile is chunked so memory stays
    ``O(n + tile)``. Distances are taken in the matmul form ``|a|^2 + |b|^2 - 2 a.b`` of
    the group's points centered on their mean (distances do not move with the origin, and
    centered the form loses no more than rounding: its cancellation is ``eps |x|^2``, with
    ``x`` within the cluster's spread), a point's distance to itself set to exactly 0.
    ``|a|^2 + |b|^2`` is added first, so a pair's two distances differ only by the
    product's rounding; the caller counts costs within ``sqrt(eps)`` as equal.
    (Differences instead of the product, by ``torch.cdist`` without the matmul: 3-6x
    slower, docs/benchmarks.md.)
    """
    out = points.new_zeros(points.n)
    w = points.new_ones(points.n) if sample_weight is None else sample_weight
    if points.X is None:
        norms = torch.cat([points.sq_norms(sl) for sl in iter_chunks(points.n, points.rows)])
    for j in range(n_groups):
        members = torch.nonzero(labels == j).flatten()
        m = members.numel()
        if m == 0:
            continue
        wj = w[members]
        rows = max(1, min(m, (1 << 18) // m))
        if points.X is None:  # CSR: the products of the stored values, not centered
            Xj, sq, keys = None, norms[members], points.gram_keys(members)
        else:
            Xj, keys = points.rows_of(members), None
            Xj = Xj - Xj.mean(0)
            sq = Xj.square().sum(1)

        def span(start, stop, Xj=Xj, sq=sq, wj=wj, members=members, keys=keys):
            for sl in iter_chunks(stop, rows, start):
                block = sq[sl, None] + sq
                gram = points.gram(members[sl], keys) if Xj is None else Xj[sl] @ Xj.T
                block.sub_(gram, alpha=2).clamp_(min=0).sqrt_()
                block.diagonal(offset=sl.start).zero_()
                out[members[sl]] = block @ wj

        runner.map(span, m)
    return out


def nearest_rows(points, centers):
    """For each center, the index of the closest point (ties: the lowest index)."""
    keys = points.keys(centers)
    best_dist = torch.full((centers.shape[0],), torch.inf, dtype=points.dtype,
                           device=points.device)
    best_index = torch.zeros(centers.shape[0], dtype=torch.long, device=points.device)
    for chunk, scores in points.chunks(keys, 0, points.n):
        dist = points.sq_dist(chunk, scores)  # (k, m)
        del scores
        value, index = dist.min(1)
        better = value < best_dist
        best_dist = torch.where(better, value, best_dist)
        best_index = torch.where(better, index + chunk.sl.start, best_index)
    return best_index


def stop_reason(i, *, strict, center_shift, tol, verbose=0):
    """Why the loop stops after layer ``i``: ``"strict"`` (the labels did not change),
    ``"tol"`` (the total squared center shift is within ``tol``) or None; logged in
    scikit-learn's words when ``verbose``."""
    if strict:
        if verbose:
            logger.info(f"Converged at iteration {i}: strict convergence.")
        return "strict"
    if center_shift <= tol:
        if verbose:
            logger.info(f"Converged at iteration {i}: center shift {center_shift} within "
                        f"tolerance {tol}.")
        return "tol"
    return None


def run_layers(points, sample_weight, centers, *, update, temperature=None, max_iter, tol,
               verbose=0, runner=_SERIAL):
    """Apply the layer until convergence or ``max_iter`` layers (scikit-learn's Lloyd loop).

    Each layer is the assignment block (:func:`layer`; hard, or soft at ``temperature``)
    followed by ``update``, the center update block of the variant (see ``_updates.py``).
    Stops on strict convergence (the update's output labels unchanged, for updates whose
    result the labels determine) or when the total squared center shift is ``<= tol``.
    Then, unless strictly converged, runs the assignment block once more so that labels
    match the returned centers.

    Where the update is plain Lloyd's (``update.compiled``) on CPU points, the compiled
    loop (:mod:`sktransformer.cluster._compiled`) runs every layer in one call instead, with
    Hamerly's bounds where ``update.algorithm`` asks for them (with ``verbose``, the layers
    here log each one).

    Returns
    -------
    centers, labels, inertia (float), n_iter (int)
    """
    if temperature is None and not verbose and getattr(update, "compiled", False):
        k = centers.shape[0]
        bounds = use_bounds(points, update.algorithm)
        if lloyd_available(points, sample_weight, n_clusters=k, bounds=bounds):
            return run_lloyd(points, sample_weight, centers, max_iter=max_iter, tol=tol,
                             bounds=bounds, sphere=update.sphere)
    labels = torch.empty(points.n, dtype=torch.long, device=points.device)
    labels_old = torch.full_like(labels, -2)
    min_dist = points.new_empty(points.n)
    strict = False
    bar = progress(max_iter, verbose, "layers")
    for i in range(max_iter):
        sums, weight = layer(points, sample_weight, centers, labels=labels, min_dist=min_dist,
                             temperature=temperature, accumulate=update.accumulate,
                             cutoff=getattr(update, "cutoff", None), runner=runner)
        new_centers, marked, objective = update(points, sample_weight, centers, labels,
                                                min_dist, sums, weight, runner=runner)
        bar.update(1)
        if verbose:
            logger.info(f"Iteration {i}, inertia {objective()}.")
        shift_tot = float((new_centers - centers).square().sum())
        centers = new_centers
        reason = stop_reason(i, strict=update.strict and torch.equal(marked, labels_old),
                             center_shift=shift_tot, tol=tol, verbose=verbose)
        if reason:
            strict = reason == "strict"
            break
        if marked is labels:
            labels, labels_old = labels_old, labels
        else:
            labels_old = marked
    bar.close()
    if not strict:
        labels, min_dist = assign(points, centers, runner=runner)
    centers, labels, inertia = update.finalize(points, sample_weight, centers, labels,
                                               min_dist, runner=runner)
    return centers, labels, inertia, i + 1
