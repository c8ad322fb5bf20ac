"""kNN attention: softmax attention restricted to each query's top-k keys.

For query ``q_i``, ``P_i = softmax(q_i K^T * scale)`` is a distribution over the keys and the
attention output is ``o_i = E_{j ~ P_i}[v_j]`` (Haris, "kNN Attention Demystified", ICLR
2025). The top-k keys ``S_i`` are found by blocks of queries, exactly (on the CPU,
cache-sized score tiles merged into running top-ks by numba's loop where installed:
:func:`_compiled_topk`; else reduced to group maxima, whose best groups are scored again:
:func:`_filtered_topk`; ``torch.topk`` on a ``(block, n_keys)`` tile for few keys or on a
GPU), or by an approximate index (:class:`IVFIndex`); the estimators then run by blocks
of queries too, so memory is ``O(n k + tile)``, never ``n x n``. Three estimators of
``o_i`` from ``S_i``:

* ``"truncated"``: the softmax renormalized over ``S_i``; biased by the dropped tail mass.
* ``"tail"``: the partition sum and the numerator each corrected by ``l`` keys drawn
  uniformly from outside ``S_i`` (scaled by ``(n - k) / l``): unbiased sums, a ratio
  estimator for ``o_i``.
* ``"gumbel"``: exact samples from ``P_i`` by lazy Gumbel sampling (Mussmann et al., 2017)
  and their average, Rao-Blackwellized over ``S_i`` (or a median of such means): unbiased
  for ``o_i``, and exact when ``S_i`` holds all the mass.

Shapes: ``q (..., n_q, d)``, ``k (..., n_k, d)``, ``v (..., n_k, d_v)``; leading dimensions
(batch, heads) are broadcast as in ``torch.matmul``. ``exclude (n_q,)`` or ``(..., n_q)``
hides one key from each query (leave-one-out: query ``i`` never sees key ``exclude[i]``).
"""

import itertools
import math

import torch

from ..utils import ChunkRunner, merge_topk, topk_available
from ._matmul import matmul_nt, uses_onednn

ESTIMATORS = ("truncated", "tail", "gumbel")
_TILE = 1 << 25  # elements of one (query block, keys) score tile: 128 MB in float32
# the exact search's filter: score tiles of _CHUNK keys (a tile of queries x _CHUNK stays in
# cache), reduced to the maximum of each group of _GROUP keys, groups of _SUPER groups
_CHUNK, _GROUP, _SUPER = 1024, 4, 32
_CACHED = 1 << 19  # elements of a cache-sized score tile: 2 MB in float32
# oneDNN compiles a kernel per new product shape (about 1 ms, once per process): fewer
# queries than this keep torch.matmul, so small batches of varying size compile nothing
_ONEDNN_MIN_QUERIES = 256
# the compiled search (utils.merge_topk): each worker thread scores blocks of its own
# queries by tiles of _MERGED queries x _CHUNK keys (2 MB in float32; 256 or 1,024 queries
# measured within the noise of it) and merges each into its queries' running top-k. A
# search of fewer than _COMPILED_MIN_SCORES scores never loads numba (see _compiles)
_MERGED = 512
_COMPILED_MIN_SCORES = 1 << 24
# lazy draws of a query switch to its full row past this many tail candidates per key: a
# candidate scored by gathers costs about ten keys of a dense row (measured on the CPU)
_DENSE = 0.1


def _scale(q, scale):
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale


def _batch(*tensors):
    return math.prod(torch.broadcast_shapes(*(t.shape[:-2] for t in tensors))) or 1


def _blocks(n, rows):
    return (slice(a, a + rows) for a in range(0, n, rows))


def _positions(n_q, n_k, device):
    """The key position of each query: queries are aligned with the end of the keys."""
    return torch.arange(n_q, device=device) + (n_k - n_q)


def _visible(n_q, n_k, causal, device):
    """Number of keys each query may attend to, shape (n_q,)."""
    if not causal:
        return torch.full((n_q,), n_k, device=device)
    return _positions(n_q, n_k, device) + 1


def _hidden(indices, exclude, positions=None):
    """True where key ``indices (..., n_q, m)`` is hidden from its query: excluded, or later
    than the query's position (causal)."""
    hidden = torch.zeros(indices.shape, dtype=torch.bool, device=indices.device)
    if exclude is not None:
        hidden = hidden | (indices == exclude.unsqueeze(-1))
    if positions is not None:
        hidden = hidden | (indices > positions.unsqueeze(-1))
    return hidden


def topk_keys(q, k, n_neighbors, *, causal=False, scale=None, block=None, index=None,
              exclude=None):
    """Scores and indices of each query's ``n_neighbors`` highest-scoring keys.

    ``causal``: query ``i`` sees keys ``j <= i`` only (queries and keys aligned at the end
    when ``n_q < n_k``, as in decoding); a query with fewer than ``n_neighbors`` visible keys
    gets ``-inf`` scores for the missing ones, as do excluded keys.

    ``index``: ``None`` for the exact top-k (by blocks of ``block`` queries); or an
    approximate index such as :class:`IVFIndex` (not causal). Either way the scores of the
    selected keys are recomputed in ``q``'s dtype, so they are differentiable in ``q``
    and ``k``.

    Returns
    -------
    scores : Tensor (..., n_q, n_neighbors), sorted in decreasing order
    indices : Tensor (..., n_q, n_neighbors), long
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    kk = min(n_neighbors, n_k)
    s = _scale(q, scale)
    if index is not None and causal:
        raise ValueError("An approximate index searches all keys: it cannot be causal; "
                         "use index=None for causal attention.")
    if n_q == 0:
        shape = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), 0, kk)
        return (torch.empty(shape, dtype=torch.result_type(q, k), device=q.device),
                torch.empty(shape, dtype=torch.long, device=q.device))
    found = None if index is None else index.search(q, k, kk)
    compiled = found is None and _compiles(q, k, kk)
    filtered = found is None and not compiled and _filters(q, k, kk)
    batch = _batch(q, k)
    if block is None:  # a score tile, the filter's maxima, or (index) a block's keys
        if compiled:  # (memory: the results' size; the tiles are the workers')
            block = n_q
        elif filtered:
            block = min(_CACHED // _CHUNK, _TILE // (n_k // _GROUP)) // batch
        else:
            block = _TILE // ((n_k if found is None else kk * q.shape[-1]) * batch)
        block = max(1, block)
    positions = _positions(n_q, n_k, q.device) if causal else None
    # the search's values serve unless the scores must be differentiable
    reuse = not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad))
    search = _compiled_topk if compiled else _filtered_topk if filtered else _exact_topk
    scores, indices, buffers = [], [], None
    for sl in _blocks(n_q, block):
        ex = None if exclude is None else exclude[..., sl]
        pos = None if positions is None else positions[sl]
        sc = None
        if found is None:
            sc, idx, buffers = search(q[..., sl, :], k, kk, s, ex, pos, buffers)
        else:
            idx = found[..., sl, :]
        missing = idx < 0
        idx = idx.clamp(min=0)
        if sc is None or not reuse:
            sc = _scores_of(q[..., sl, :], k, idx, s)
        sc = sc.masked_fill(missing | _hidden(idx, ex, pos), -torch.inf)
        sc, order = sc.sort(-1, descending=True)
        scores.append(sc)
        indices.append(torch.gather(idx, -1, order))
    return torch.cat(scores, -2), torch.cat(indices, -2)


def _compiles(q, k, kk):
    """Whether the exact search runs compiled (:func:`_compiled_topk`): on the CPU, float32
    or float64, with numba, from ``_COMPILED_MIN_SCORES`` scores on, for ``kk <= 256``
    from ``max(4 _CHUNK, 64 kk)`` keys on. Measured against the group filter (2,048
    queries, d = 64, Gaussian keys, as ratios to faiss.knn's time): faster from 4,096 keys
    on at kk = 32-128 (65,536 keys, kk = 32: 0.74 against 0.98); slower for fewer keys (2,048
    keys, kk = 32: 1.89 against 1.56), and for kk of 512 and more at any number of keys
    (a deep heap per query: 65,536 keys, kk = 1,024: 2.22 against 1.92)."""
    return (q.device.type == "cpu" and k.device.type == "cpu" and q.dtype == k.dtype
            and q.dtype in (torch.float32, torch.float64) and 0 < kk <= 256
            and k.shape[-2] >= max(4 * _CHUNK, 64 * kk)
            and _batch(q, k) * q.shape[-2] * k.shape[-2] >= _COMPILED_MIN_SCORES
            and topk_available())


def _filters(q, k, kk):
    """Whether the exact search goes through the group filter: on the CPU, from ``256 kk``
    keys on when oneDNN scores the tiles (``512 kk`` when torch's BLAS does: other CPUs,
    fewer than ``_ONEDNN_MIN_QUERIES`` queries), where it measured faster than one top-k
    over the tile (``kk`` = 8 and 32, d = 64; with oneDNN, at 256 kk: 49 against 68 ms, at
    128 kk: 40 against 37). A GPU's ``topk`` is fast and its launches are not: one tile
    there."""
    if q.device.type != "cpu":
        return False
    with torch.no_grad():  # (the search runs without gradient)
        onednn = uses_onednn(q, k) and q.shape[-2] >= _ONEDNN_MIN_QUERIES
    return 0 < kk * (256 if onednn else 512) <= k.shape[-2]


def _hide(tile, start, exclude, positions):
    """Set to ``-inf`` the scores of a tile of keys from ``start`` that their queries may
    not see: later than the query (``positions``), or its ``exclude`` key."""
    if positions is not None:
        cols = torch.arange(start, start + tile.shape[-1], device=tile.device)
        tile.masked_fill_(cols > positions.unsqueeze(-1), -torch.inf)
    if exclude is not None:
        col = (exclude - start).unsqueeze(-1).expand(*tile.shape[:-1], 1)
        inside = (col >= 0) & (col < tile.shape[-1])
        col = col.clamp(0, tile.shape[-1] - 1)
        tile.scatter_(-1, col, tile.gather(-1, col).masked_fill(inside, -torch.inf))


def _buffer(buffer, shape, q, k):
    """``buffer`` when it has ``shape``, else a new one for scores of ``q`` and ``k``: blocks
    reuse their tiles (a fresh one per block costs page faults)."""
    if buffer is None or buffer.shape != shape:
        buffer = torch.empty(shape, dtype=torch.result_type(q, k), device=q.device)
    return buffer


@torch.no_grad()
def _exact_topk(q, k, kk, scale, exclude, positions, tile=None):
    """Scores and indices of the ``kk`` best keys of each query of a block, from one score
    tile over all the keys, and the tile (for the next block)."""
    shape = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
    tile = _buffer(tile, shape, q, k)
    torch.matmul(q * scale, k.transpose(-1, -2), out=tile)
    _hide(tile, 0, exclude, positions)
    return *torch.topk(tile, kk, dim=-1, sorted=False), tile


@torch.no_grad()
def _compiled_topk(q, k, kk, scale, exclude, positions, buffers=None):
    """:func:`_exact_topk` by tiles of ``_MERGED`` queries x ``_CHUNK`` keys of one head,
    each merged into its queries' running top-k by numba's loop
    (:func:`~sktransformer.utils.merge_topk`: a tile is read once, as group maxima, and
    only groups above a query's ``kk``-th best score so far are scanned). The worker
    threads (one per torch thread) take the queries by spans, each scoring its tiles
    single-threaded through 2-D products (oneDNN's; the products release the GIL, the loop
    too). Causal blocks stop at their last query's position. Returns the scores, the
    indices (``-1`` where a query has fewer than ``kk`` visible keys) and None (no buffers
    for the next block).
    """
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    n_q, n_k = q.shape[-2], k.shape[-2]
    values = torch.full((*lead, n_q, kk), -torch.inf, dtype=q.dtype)
    indices = torch.full((*lead, n_q, kk), -1, dtype=torch.long)
    qs = (q * scale).expand(*lead, n_q, q.shape[-1])
    keys = k.expand(*lead, n_k, k.shape[-1])
    if exclude is not None:
        exclude = exclude.expand(*lead, n_q)
    heads = list(itertools.product(*map(range, lead)))  # (one head: [()])
    onednn = n_q >= _ONEDNN_MIN_QUERIES  # (see _ONEDNN_MIN_QUERIES)

    def span(start, stop):
        padded = None  # the last chunk's tile, its missing keys at -inf
        for a in range(start, stop, _MERGED):
            sl = slice(a, min(a + _MERGED, stop))
            pos = None if positions is None else positions[sl]
            seen = n_k if pos is None else min(n_k, int(pos[-1]) + 1)
            for h in heads:
                block, best, best_keys = qs[h][sl], values[h][sl], indices[h][sl]
                ex = None if exclude is None else exclude[h][sl]
                for c in range(0, seen, _CHUNK):
                    chunk = keys[h][c:c + _CHUNK]
                    tile = matmul_nt(block, chunk, onednn=onednn)
                    if len(chunk) < _CHUNK:
                        if padded is None or padded.shape != (len(block), _CHUNK):
                            padded = torch.full((len(block), _CHUNK), -torch.inf,
                                                dtype=tile.dtype)
                        padded[:, :len(chunk)] = tile
                        tile = padded
                    _hide(tile, c, ex, pos)
                    merge_topk(tile, c, best, best_keys)
                    del tile

    with ChunkRunner.for_device(q.device, n_q, _MERGED) as runner:
        runner.map(span, n_q)
    return values, indices, None


@torch.no_grad()
def _filtered_topk(q, k, kk, scale, exclude, positions, buffers=None):
    """:func:`_exact_topk` by cache-sized tiles, with a group filter in place of a top-k
    over every score.

    The keys of each tile of ``_CHUNK`` fall in groups of ``_GROUP`` (strided, so the
    maxima are one vectorized reduction), and only each group's maximum is kept. The
    ``kk`` best keys lie in the ``kk`` groups of highest maximum: a group outranked by
    ``kk`` others has ``kk`` keys above its best one. The same holds one level up, so
    those groups are found among the ``kk`` best sets of ``_SUPER`` groups. Their
    ``kk * _GROUP`` keys are scored again and the best ``kk`` kept, all of them exact.
    Returns the scores, the indices and the buffers (for the next block).
    """
    n_k = k.shape[-2]
    per_chunk = _CHUNK // _GROUP
    shape = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2])
    tile, maxima = buffers or (None, None)
    tile = _buffer(tile, (*shape, _CHUNK), q, k)
    maxima = _buffer(maxima, (*shape, -(-n_k // _CHUNK) * per_chunk), q, k)
    qs = q * scale
    onednn = q.shape[-2] >= _ONEDNN_MIN_QUERIES
    for i, start in enumerate(range(0, n_k, _CHUNK)):
        keys = k[..., start:start + _CHUNK, :]
        if keys.shape[-2] == _CHUNK:
            tile = matmul_nt(qs, keys, out=tile, onednn=onednn)
        else:  # the last chunk's missing keys score -inf
            tile[..., :keys.shape[-2]] = matmul_nt(qs, keys, onednn=onednn)
            tile[..., keys.shape[-2]:] = -torch.inf
        _hide(tile, start, exclude, positions)
        _group_maxima(tile, maxima[..., i * per_chunk:(i + 1) * per_chunk])
    groups = _best_groups(maxima, kk)
    # group g (of chunk g // per_chunk) holds the keys at per_chunk steps from its first
    first = groups // per_chunk * _CHUNK + groups % per_chunk
    steps = torch.arange(_GROUP, device=q.device) * per_chunk
    idx = (first.unsqueeze(-1) + steps).flatten(-2)
    idx = idx.masked_fill(idx >= n_k, -1)
    sc = _scores_of(q, k, idx, scale)
    sc = sc.masked_fill((idx < 0) | _hidden(idx, exclude, positions), -torch.inf)
    sc, best = sc.topk(kk, sorted=False)
    return sc, idx.gather(-1, best), (tile, maxima)


def _group_maxima(tile, out):
    """``out[..., j]``: the maximum of ``tile[..., j::out.shape[-1]]``, by halving
    elementwise maxima (a reduction kernel would first fill ``out``)."""
    while tile.shape[-1] > 2 * out.shape[-1]:
        half = tile.shape[-1] // 2
        tile = torch.maximum(tile[..., :half], tile[..., half:])
    torch.maximum(tile[..., :out.shape[-1]], tile[..., out.shape[-1]:], out=out)


def _best_groups(maxima, kk):
    """Indices of the ``kk`` highest ``maxima``, through a top-k over the maxima of
    ``_SUPER`` strided sets of them (at least ``kk`` sets when :func:`_filters` holds)."""
    width = maxima.shape[-1] // _SUPER  # exact: _SUPER divides _CHUNK // _GROUP
    sets = maxima.unflatten(-1, (_SUPER, width)).amax(-2).topk(kk, sorted=False).indices
    steps = torch.arange(_SUPER, device=maxima.device) * width
    groups = (sets.unsqueeze(-1) + steps).flatten(-2)
    return groups.gather(-1, maxima.gather(-1, groups).topk(kk, sorted=False).indices)


def _gather_rows(v, indices):
    """``v[..., indices, :]`` with ``indices (..., n_q, m)`` -> (..., n_q, m, d_v).

    One ``index_select`` of whole rows on the flattened batch (much faster than
    ``torch.gather`` with an index expanded over the columns)."""
    lead = torch.broadcast_shapes(v.shape[:-2], indices.shape[:-2])
    n_k, d_v = v.shape[-2:]
    n_q, m = indices.shape[-2:]
    flat = indices.expand(*lead, n_q, m).reshape(-1, n_q * m)
    offsets = torch.arange(flat.shape[0], device=v.device).unsqueeze(-1) * n_k
    rows = v.expand(*lead, n_k, d_v).reshape(-1, d_v)
    out = rows.index_select(0, (flat + offsets).reshape(-1))
    return out.reshape(*lead, n_q, m, d_v)


def _scores_of(q, k, indices, scale):
    """``q_i . k_j * scale`` for ``indices (..., n_q, m)``."""
    keys = _gather_rows(k, indices.clamp(min=0))
    return (keys @ q.unsqueeze(-1)).squeeze(-1) * scale


def knn_attention(q, k, v, n_neighbors, *, estimator="truncated", causal=False, scale=None,
                  n_samples=32, n_groups=1, generator=None, block=None, index=None,
                  exclude=None):
    """kNN attention output, shape (..., n_q, d_v).

    Parameters
    ----------
    q, k, v : Tensor
        Queries (..., n_q, d), keys (..., n_k, d), values (..., n_k, d_v).
    n_neighbors : int
        ``k``, the keys kept per query.
    estimator : {"truncated", "tail", "gumbel"}, default="truncated"
        ``"truncated"``: error at most ``2 eps_i max_j ||v_j||`` where ``eps_i`` is the
        softmax mass of the keys outside the top-k (it vanishes once the top-k hold the
        mass: for ``Q, K, V ~ U[-B, B]`` at ``n = 1000``, from ``k`` of about 5).
        ``"tail"``: ``n_samples`` uniform tail keys per query correct both sums; each sum
        is unbiased with relative standard error ``O(sqrt((n - k) / l) * spread)``.
        ``"gumbel"``: the mean of ``n_samples`` exact draws from ``P_i``, Rao-Blackwellized
        over the top-k (:func:`rao_blackwell`; median of ``n_groups`` group means when
        ``n_groups > 1``): unbiased, exact when the top-k hold all the mass, and with
        ``P(||o_hat - o|| > t) <= ||V||_max^2 / (n_samples t^2)`` (Chebyshev; median of
        means turns it into ``exp(-c n_groups)``).
    causal : bool, default=False
    scale : float or None, default=None
        Score scale; ``None`` is ``1 / sqrt(d)``.
    n_samples : int, default=32
        Tail keys (``"tail"``) or draws (``"gumbel"``) per query.
    n_groups : int, default=1
        Median-of-means groups for ``"gumbel"``.
    generator : torch.Generator or None
        For the random estimators.
    block : int or None
        Queries per score tile of the exact search (``None``: tiles of ``2**25`` scores).
    index : None or an index with ``search(q, k, n_neighbors)``, e.g. :class:`IVFIndex`
        Approximate top-k for very long sequences. ``"truncated"`` then drops the keys the
        index missed too; ``"tail"`` stays unbiased (its correction holds for any set);
        ``"gumbel"`` needs the exact top-k and refuses an index.
    exclude : LongTensor of shape (n_q,) or (..., n_q), or None
        One key hidden from each query.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"Unknown estimator {estimator!r}; choose one of {ESTIMATORS}.")
    if estimator == "gumbel" and index is not None:
        raise ValueError("estimator='gumbel' draws exact samples, which needs the exact "
                         "top-k; use index=None, or estimator='truncated' or 'tail'.")
    s = _scale(q, scale)
    scores, idx = topk_keys(q, k, n_neighbors, causal=causal, scale=s, block=block,
                            index=index, exclude=exclude)
    visible = _visible(q.shape[-2], k.shape[-2], causal, q.device)
    width = idx.shape[-1] + (0 if estimator == "truncated" else n_samples)
    rows = max(1, _TILE // (8 * width * max(q.shape[-1], v.shape[-1]) * _batch(q, k, v)))
    out = []
    for sl in _blocks(q.shape[-2], rows):
        part = q[..., sl, :], scores[..., sl, :], idx[..., sl, :]
        ex = None if exclude is None else exclude[..., sl]
        if estimator == "truncated":
            out.append(_truncated(v, *part[1:]))
        elif estimator == "tail":
            out.append(_tail(*part, k, v, visible[sl], s, n_samples, generator, ex))
        else:
            out.append(_gumbel(*part, k, v, visible[sl], s, n_samples, n_groups, generator,
                               ex))
    return torch.cat(out, -2)


def _truncated(v, scores, idx):
    w = torch.softmax(scores, dim=-1)
    return (w.unsqueeze(-2) @ _gather_rows(v, idx)).squeeze(-2)


def _members_gaps(top_idx, top_scores, n_k):
    """``u_j = t_j - j`` for each query's sorted top indices ``t`` (the number of non-top
    keys below ``t_j``), (..., n_q, kk). Top entries with a ``-inf`` score (hidden keys)
    are not in the set: they get ``u`` above every position."""
    kk = top_idx.shape[-1]
    t = torch.where(torch.isfinite(top_scores), top_idx, n_k + kk).sort(-1).values
    return t - torch.arange(kk, device=t.device)


def _complement(top_idx, top_scores, positions, n_k):
    """The ``positions``-th keys (0-based) among the ``n_k`` keys not in each query's top
    set.

    ``top_idx, top_scores (..., n_q, k)``; ``positions (..., n_q, m)``. The ``p``-th
    non-member is ``p + #{j : u_j <= p}`` (:func:`_members_gaps`): one ``searchsorted``."""
    u = _members_gaps(top_idx, top_scores, n_k)
    return positions + torch.searchsorted(u, positions.contiguous(), right=True)


def _n_tail(top_scores, visible):
    """Visible keys outside the top set, per query (..., n_q)."""
    return visible - torch.isfinite(top_scores).sum(-1)


def _rand(shape, generator, device):
    gen_device = generator.device if generator is not None else device
    return torch.rand(shape, dtype=torch.float64, generator=generator,
                      device=gen_device).to(device)


def _bernoulli_positions(n, p, generator):
    """Each segment's successes in ``n`` independent Bernoulli(``p``) trials, as flat
    ``(segment, position)`` pairs: the gaps between successes are geometric, drawn in
    rounds (sized to cover a segment's trials with high probability) until every segment
    has passed its last trial. ``n`` long and ``p`` float64, both (n_segments,)."""
    device = n.device
    segs = torch.nonzero((n > 0) & (p > 0)).squeeze(-1)
    start = torch.zeros_like(n)  # first trial not yet covered
    log_fail = torch.log1p(-p.clamp(max=1.0))  # -inf where p = 1: no failures
    found_seg, found_pos = [], []
    while segs.numel():
        mean = (n[segs] - start[segs]).to(torch.float64) * p[segs]
        counts = (mean + 4 * mean.sqrt() + 1).ceil().long()
        seg = torch.repeat_interleave(segs, counts)
        u = _rand(seg.shape, generator, device).clamp(min=1e-300)
        limit = (n[seg] + 1).to(torch.float64)
        step = (u.log() / log_fail[seg]).floor().clamp(max=limit).long() + 1
        first = counts.cumsum(0) - counts
        total = step.cumsum(0)  # a cumulative sum within each segment:
        before = torch.repeat_interleave(total[first] - step[first], counts)
        pos = start[seg] + (total - before) - 1
        keep = pos < n[seg]
        found_seg.append(seg[keep])
        found_pos.append(pos[keep])
        last = pos[first + counts - 1]
        start[segs] = last + 1
        segs = segs[last < n[segs] - 1]
    if not found_seg:
        return n.new_zeros(0), n.new_zeros(0)
    return torch.cat(found_seg), torch.cat(found_pos)


def _tail(q, scores, idx, k, v, visible, scale, n_samples, generator, exclude):
    n_k = k.shape[-2]
    n_tail = _n_tail(scores, visible)
    u = _rand((*scores.shape[:-1], n_samples), generator, q.device)
    positions = (u * n_tail.unsqueeze(-1)).long()  # iid uniform over the tail
    tail = _complement(idx, scores, positions, n_k).clamp(max=n_k - 1)
    hidden = (n_tail == 0).unsqueeze(-1) | _hidden(tail, exclude)
    tail_scores = _scores_of(q, k, tail, scale).masked_fill(hidden, -torch.inf)
    shift = scores[..., :1]  # the top score: exp never overflows
    top_w = torch.exp(scores - shift)
    tail_w = torch.exp(tail_scores - shift) * (n_tail.to(q.dtype) / n_samples).unsqueeze(-1)
    num = (top_w.unsqueeze(-2) @ _gather_rows(v, idx)).squeeze(-2) + (
        tail_w.unsqueeze(-2) @ _gather_rows(v, tail)).squeeze(-2)
    den = top_w.sum(-1, keepdim=True) + tail_w.sum(-1, keepdim=True)
    return num / den


def _gumbel(q, scores, idx, k, v, visible, scale, n_samples, n_groups, generator, exclude):
    """Lazy Gumbel sampling: each draw is exact from the full softmax; the draws' average,
    Rao-Blackwellized over the top set (:func:`rao_blackwell`), or the median of
    ``n_groups`` such averages."""
    winners = _gumbel_winners(q, k, scores, idx, visible, scale, n_samples, generator,
                              exclude)
    groups = [(w.unsqueeze(-2) @ _gather_rows(v, j)).squeeze(-2)
              for j, w in (rao_blackwell(scores, idx, part)
                           for part in winners.chunk(max(1, n_groups), -1))]
    if len(groups) == 1:
        return groups[0]
    return torch.stack(groups, -2).median(-2).values


def rao_blackwell(scores, idx, draws):
    """Weights of an unbiased estimate of each query's softmax row from exact draws.

    ``scores, idx (..., n_q, k)`` are the top set, ``draws (..., n_q, S)`` draws of
    ``P_i``. A draw outside the top set puts ``1 / S`` on its key. Given that a draw lands
    in the top set, it lands on ``j`` with the top-k softmax ``w_ij``, so the ``m_i``
    draws that do are replaced by their conditional expectation ``(m_i / S) w_ij``: still
    unbiased for ``P_ij``, never of larger variance, and exact once the top-k hold the
    mass. Returns keys and weights, (..., n_q, k + S) each (``o_i = sum_j W_ij v_j``).
    """
    w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    in_top = (draws.unsqueeze(-1) == idx.unsqueeze(-2)).any(-1)  # (..., n_q, S)
    n_samples = draws.shape[-1]
    top_mass = in_top.sum(-1, keepdim=True).to(w.dtype) / n_samples
    walks = (~in_top).to(w.dtype) / n_samples
    return torch.cat([idx, draws], -1), torch.cat([top_mass * w, walks], -1)


def _gumbel_winners(q, k, scores, idx, visible, scale, n_samples, generator, exclude=None):
    """The index drawn by each of ``n_samples`` lazy Gumbel-max draws, (..., n_q, S).

    Every key gets an independent Gumbel; the max over the top set is drawn directly, and
    a tail key (score at most the smallest top score) can beat it only if its Gumbel
    exceeds ``bound``, independently with probability ``p = P(G > bound)``: those keys
    are the successes of a Bernoulli process over the tail (geometric gaps, so the work
    is the expected ``n_tail p`` candidates, not ``n_tail``), each scored with a Gumbel
    conditioned on exceeding ``bound``. An excluded key drawn this way never wins, which
    leaves the max over the other keys exact."""
    n_k, kk = k.shape[-2], idx.shape[-1]
    lead = scores.shape[:-1]
    # the max over the top set: its arg-max follows the top-k softmax and its value is a
    # Gumbel located at their logsumexp, independently (the Gumbel-max property)
    gen_device = generator.device if generator is not None else q.device
    w = torch.softmax(scores, -1).nan_to_num(1.0 / kk).reshape(-1, kk)
    arg_top = torch.multinomial(w.to(gen_device), n_samples, replacement=True,
                                generator=generator).to(q.device).reshape(*lead, n_samples)
    e = torch.empty((*lead, n_samples), dtype=torch.float64, device=gen_device)
    e.exponential_(generator=generator)
    best_top = (torch.logsumexp(scores, -1, keepdim=True)
                - e.clamp_(min=1e-300).log_().to(q.device, q.dtype))  # (..., n_q, S)
    winner = torch.gather(idx, -1, arg_top)
    finite = torch.isfinite(scores)
    s_min = torch.where(finite, scores, torch.inf).amin(-1, keepdim=True)
    bound = (best_top - s_min).to(torch.float64)  # a tail key can win only if G > bound
    p_tail = -torch.expm1(-torch.exp(-bound))  # P(G > bound)
    n_tail = _n_tail(scores, visible).unsqueeze(-1).expand_as(bound)
    d = q.shape[-1]
    qs = q.expand(*lead, d).reshape(-1, d)
    ks = k.expand(*lead[:-1], n_k, d).reshape(-1, d)
    ex = None if exclude is None else exclude.expand(lead).reshape(-1)
    winner = winner.reshape(-1, n_samples)
    # a query whose draws would score more than a tenth as many tail keys as it has keys
    # (flat scores, small k) draws from its full softmax row instead: one pass over its
    # keys, just as exact
    dense = (n_tail * p_tail).sum(-1) > _DENSE * visible
    dense = torch.nonzero(dense.reshape(-1)).squeeze(-1)
    if dense.numel():
        winner[dense] = _row_draws(qs, ks, dense, visible, ex, scale, n_samples, generator)
        p_tail = p_tail.reshape(-1, n_samples).index_fill(0, dense, 0.0)
    winner = winner.reshape(-1)
    # the tail keys whose Gumbel passes the bound: a Bernoulli process over each draw's
    # tail, as flat (draw, position) pairs, by runs of draws of a bounded expected number
    # of candidates; only these keys are scored
    n_tail, p_tail, bound = n_tail.reshape(-1), p_tail.reshape(-1), bound.reshape(-1)
    expected = (n_tail * p_tail).cumsum(0) + torch.arange(1, len(bound) + 1, device=q.device)
    budget = max(1024, _TILE // (8 * q.shape[-1]))
    runs = torch.arange(1, math.ceil(float(expected[-1]) / budget), device=q.device)
    cuts = torch.searchsorted(expected, runs.to(expected.dtype) * budget)
    cuts = [0, *torch.unique(cuts).tolist(), len(bound)]
    u = _members_gaps(idx, scores, n_k).reshape(-1, kk)
    u = u + torch.arange(len(u), device=u.device).unsqueeze(-1) * (n_k + kk + 1)
    for a, b in zip(cuts[:-1], cuts[1:]):
        if a == b:
            continue
        draw, pos = _bernoulli_positions(n_tail[a:b], p_tail[a:b], generator)
        if not draw.numel():
            continue
        draw = draw + a
        query = draw // n_samples  # flat over (batch, n_q)
        # the pos-th non-top key: one searchsorted on the rows of u made disjoint
        shift = query * (n_k + kk + 1)
        cand = pos + torch.searchsorted(u.reshape(-1), pos + shift, right=True) - query * kk
        cs = (qs[query] * ks[query // q.shape[-2] * n_k + cand]).sum(-1) * scale
        if ex is not None:
            cs = cs.masked_fill(cand == ex[query], -torch.inf)
        low = torch.exp(-torch.exp(-bound[draw]))  # a Gumbel given G > bound
        g = low + (1 - low) * _rand(draw.shape, generator, q.device)
        total = cs + (-torch.log(-torch.log(g.clamp(max=1 - 1e-16)))).to(q.dtype)
        best_tail = total.new_full((b - a,), -torch.inf)
        best_tail.scatter_reduce_(0, draw - a, total, "amax")
        top = total == best_tail[draw - a]
        tail_winner = winner.new_zeros(b - a).scatter_(0, draw[top] - a, cand[top])
        wins = best_tail > best_top.reshape(-1)[a:b]
        winner[a:b] = torch.where(wins, tail_winner, winner[a:b])
    return winner.reshape(*lead, n_samples)


def sample_keys(q, k, n_neighbors, n_samples, *, causal=False, scale=None, generator=None,
                exclude=None, lazy=None):
    """``n_samples`` exact draws ``j ~ P_i`` per query, shape (..., n_q, n_samples).

    ``lazy=True``: lazy Gumbel sampling from the top ``n_neighbors`` keys (per query
    ``O(n_neighbors)`` for the top set, then per draw the few tail keys that can win; a
    query whose draws would score more tail keys than a tenth of its keys takes the full-row
    draw instead). ``lazy=False``: one pass of the full softmax per query and
    ``torch.multinomial`` (cost ``O(n_keys)`` per query).
    ``None`` picks lazy sampling when the keys outnumber ``4 n_samples n_neighbors``. Both
    are exact."""
    s = _scale(q, scale)
    n_k = k.shape[-2]
    if lazy is None:
        lazy = n_k > 4 * n_samples * min(n_neighbors, n_k)
    if not lazy:
        return _multinomial_keys(q, k, n_samples, causal, s, generator, exclude)
    scores, idx = topk_keys(q, k, n_neighbors, causal=causal, scale=s, exclude=exclude)
    return _lazy_draws(q, k, scores, idx, causal, s, n_samples, generator, exclude)


def _lazy_draws(q, k, scores, idx, causal, scale, n_samples, generator, exclude=None):
    """Lazy Gumbel draws (..., n_q, n_samples) from each query's top set ``scores, idx``,
    by blocks of queries."""
    n_q = q.shape[-2]
    visible = _visible(n_q, k.shape[-2], causal, q.device)
    rows = max(1, _TILE // (8 * n_samples * max(1, idx.shape[-1])))
    return torch.cat([_gumbel_winners(q[..., sl, :], k, scores[..., sl, :], idx[..., sl, :],
                                      visible[sl], scale, n_samples, generator,
                                      None if exclude is None else exclude[..., sl])
                      for sl in _blocks(n_q, rows)], -2)


def _multinomial_keys(q, k, n_samples, causal, scale, generator, exclude):
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2],)
    d, n_k = q.shape[-1], k.shape[-2]
    qs, ks = q.expand(*lead, d).reshape(-1, d), k.expand(*lead[:-1], n_k, d).reshape(-1, d)
    ex = None if exclude is None else exclude.expand(lead).reshape(-1)
    visible = _visible(q.shape[-2], n_k, causal, q.device)
    queries = torch.arange(len(qs), device=q.device)
    draws = _row_draws(qs, ks, queries, visible, ex, scale, n_samples, generator)
    return draws.reshape(*lead, n_samples)


def _row_draws(qs, ks, queries, visible, exclude, scale, n_samples, generator):
    """Draws from the full softmax rows of the flat ``queries`` (indices into ``qs``, flat
    over (batch, n_q)), by ``torch.multinomial``: one pass over the keys per query.
    ``ks`` is flat over (batch, n_k); ``visible (n_q,)`` keys per query position (causal);
    ``exclude`` flat over the queries, or None."""
    n_q = len(visible)
    n_k = len(ks) * n_q // len(qs)
    gen_device = generator.device if generator is not None else qs.device
    out = queries.new_empty(len(queries), n_samples)
    cols = torch.arange(n_k, device=qs.device)
    batch = queries // n_q
    for b in batch.unique().tolist():
        sel = torch.nonzero(batch == b).squeeze(-1)
        keys = ks[b * n_k:(b + 1) * n_k]
        for sl in _blocks(len(sel), max(1, _TILE // n_k)):
            f = queries[sel[sl]]
            hidden = cols >= visible[f % n_q].unsqueeze(-1)
            if exclude is not None:
                hidden = hidden | (cols == exclude[f].unsqueeze(-1))
            p = torch.softmax((qs[f] @ keys.T * scale).masked_fill(hidden, -torch.inf), -1)
            out[sel[sl]] = torch.multinomial(p.to(gen_device), n_samples, replacement=True,
                                             generator=generator).to(qs.device)
    return out
