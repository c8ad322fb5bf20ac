"""kNN attention: softmax attention restricted to each query's top-k keys.

For query ``q_i``, ``P_i = softmax(q_i K^T * scale)`` is a distribution over the keys and the
attention output is ``o_i = E_{j ~ P_i}[v_j]`` (Haris, "kNN Attention Demystified", ICLR
2025). The top-k keys ``S_i`` are found by blocks of queries (``torch.topk`` on a
``(block, n_keys)`` score tile), so memory is ``O(n k + block * n)``, never ``n x n``. Three
estimators of ``o_i`` from ``S_i``:

* ``"truncated"``: the softmax renormalized over ``S_i``; biased by the dropped tail mass.
* ``"tail"``: the partition sum and the numerator each corrected by ``l`` keys drawn
  uniformly from outside ``S_i`` (scaled by ``(n - k) / l``): unbiased sums, a ratio
  estimator for ``o_i``.
* ``"gumbel"``: exact samples from ``P_i`` by lazy Gumbel sampling (Mussmann et al., 2017)
  and their average (or median of means): unbiased for ``o_i``.

Shapes: ``q (..., n_q, d)``, ``k (..., n_k, d)``, ``v (..., n_k, d_v)``; leading dimensions
(batch, heads) are broadcast as in ``torch.matmul``.
"""

import math

import torch

ESTIMATORS = ("truncated", "tail", "gumbel")
_TILE = 1 << 22  # elements of one (query block, keys) score tile


def _scale(q, scale):
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale


def topk_keys(q, k, n_neighbors, *, causal=False, scale=None, block=None):
    """Scores and indices of each query's ``n_neighbors`` highest-scoring keys.

    ``causal``: query ``i`` sees keys ``j <= i`` only (queries and keys aligned at the end
    when ``n_q < n_k``, as in decoding); a query with fewer than ``n_neighbors`` visible keys
    gets ``-inf`` scores for the missing ones.

    Returns
    -------
    scores : Tensor (..., n_q, n_neighbors), sorted in decreasing order
    indices : Tensor (..., n_q, n_neighbors), long
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    kk = min(n_neighbors, n_k)
    s = _scale(q, scale)
    if block is None:
        batch = math.prod(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])) or 1
        block = max(1, _TILE // max(1, n_k * batch))
    scores, indices = [], []
    offset = n_k - n_q
    for start in range(0, n_q, block):
        tile = (q[..., start:start + block, :] @ k.transpose(-1, -2)) * s
        if causal:
            rows = torch.arange(start, start + tile.shape[-2], device=q.device) + offset
            cols = torch.arange(n_k, device=q.device)
            tile = tile.masked_fill(cols[None, :] > rows[:, None], -torch.inf)
        top = torch.topk(tile, kk, dim=-1)
        scores.append(top.values)
        indices.append(top.indices)
    return torch.cat(scores, -2), torch.cat(indices, -2)


def _gather_rows(v, indices):
    """``v[..., indices, :]`` with ``indices (..., n_q, m)`` -> (..., n_q, m, d_v)."""
    lead = torch.broadcast_shapes(v.shape[:-2], indices.shape[:-2])
    v = v.expand(*lead, *v.shape[-2:])
    flat = indices.expand(*lead, *indices.shape[-2:]).reshape(*lead, -1)
    out = torch.gather(v, -2, flat.unsqueeze(-1).expand(*flat.shape, v.shape[-1]))
    return out.reshape(*lead, *indices.shape[-2:], v.shape[-1])


def _visible(n_q, n_k, causal, device):
    """Number of keys each query may attend to, shape (n_q,)."""
    if not causal:
        return torch.full((n_q,), n_k, device=device)
    return torch.arange(n_q, device=device) + (n_k - n_q) + 1


def knn_attention(q, k, v, n_neighbors, *, estimator="truncated", causal=False, scale=None,
                  n_samples=32, n_groups=1, generator=None, block=None):
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
        ``"gumbel"``: the mean of ``n_samples`` exact draws from ``P_i`` (median of
        ``n_groups`` group means when ``n_groups > 1``): unbiased, with
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
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"Unknown estimator {estimator!r}; choose one of {ESTIMATORS}.")
    scores, idx = topk_keys(q, k, n_neighbors, causal=causal, scale=scale, block=block)
    if estimator == "truncated":
        w = torch.softmax(scores, dim=-1)
        return (w.unsqueeze(-1) * _gather_rows(v, idx)).sum(-2)
    if estimator == "tail":
        return _tail(q, k, v, scores, idx, causal, _scale(q, scale), n_samples, generator)
    return _gumbel(q, k, v, scores, idx, causal, _scale(q, scale), n_samples, n_groups,
                   generator)


def _complement(top_idx, top_scores, positions):
    """The ``positions``-th keys (0-based) among those not in each query's top set.

    ``top_idx, top_scores (..., n_q, k)``; ``positions (..., n_q, m)``. Top entries with a
    ``-inf`` score (causally invisible keys) are not in the set. Classic rank mapping: walk
    the sorted top indices and step over each one at or below the key.
    """
    big = torch.iinfo(torch.long).max
    t = torch.where(torch.isfinite(top_scores), top_idx, big).sort(-1).values
    key = positions
    for j in range(t.shape[-1]):
        key = key + (t[..., j:j + 1] <= key)
    return key


def _n_tail(top_scores, visible):
    """Visible keys outside the top set, per query (..., n_q)."""
    return visible - torch.isfinite(top_scores).sum(-1)


def _rand(shape, generator, device):
    gen_device = generator.device if generator is not None else device
    return torch.rand(shape, dtype=torch.float64, generator=generator,
                      device=gen_device).to(device)


def _distinct_positions(n_tail, m, generator, rounds=100):
    """Per row, ``m`` distinct positions uniform in ``[0, n_tail)`` (a uniform subset),
    padded with -1 to ``max(m)`` columns. When ``m`` is a sizeable part of the tail, the
    first ``m`` of a random permutation; otherwise rejection of duplicates on sorted rows
    (the rare duplicates left after ``rounds`` are dropped)."""
    width = int(m.max()) if m.numel() else 0
    device = n_tail.device
    col = torch.arange(width, device=device)
    used = col < m.unsqueeze(-1)
    span = n_tail.unsqueeze(-1).to(torch.float64)
    top = int(n_tail.max()) if n_tail.numel() else 0
    if width and top <= 4 * width:  # dense: the first m of a random permutation
        keys = _rand((*n_tail.shape, top), generator, device)
        keys = keys.masked_fill(torch.arange(top, device=device) >= n_tail.unsqueeze(-1), 2.0)
        pos = keys.argsort(-1)[..., :width]
        return torch.where(used, pos, -1)
    # unused columns get distinct sentinels above every real position
    sentinel = n_tail.unsqueeze(-1) + 1 + col
    pos = torch.where(used, (_rand(used.shape, generator, device) * span).long(), sentinel)
    for _ in range(rounds):
        pos = pos.sort(-1).values
        dup = torch.zeros_like(used)
        dup[..., 1:] = pos[..., 1:] == pos[..., :-1]
        if not dup.any():
            break
        fresh = (_rand(pos.shape, generator, device) * span).long()
        pos = torch.where(dup, fresh, pos)
    else:
        pos = pos.sort(-1).values
        dup = torch.zeros_like(used)
        dup[..., 1:] = pos[..., 1:] == pos[..., :-1]
        pos = torch.where(dup, n_tail.unsqueeze(-1) + 1 + col, pos)
    return torch.where(pos < n_tail.unsqueeze(-1), pos, -1)


def _scores_of(q, k, indices, scale):
    """``q_i . k_j * scale`` for ``indices (..., n_q, m)``."""
    keys = _gather_rows(k, indices.clamp(min=0))
    return (keys * q.unsqueeze(-2)).sum(-1) * scale


def _tail(q, k, v, scores, idx, causal, scale, n_samples, generator):
    n_q, n_k = q.shape[-2], k.shape[-2]
    n_tail = _n_tail(scores, _visible(n_q, n_k, causal, q.device))
    u = _rand((*scores.shape[:-1], n_samples), generator, q.device)
    positions = (u * n_tail.unsqueeze(-1)).long()  # iid uniform over the tail
    tail = _complement(idx, scores, positions)
    valid = (n_tail > 0).unsqueeze(-1).expand_as(tail)
    tail_scores = torch.where(valid, _scores_of(q, k, tail.clamp(max=n_k - 1), scale),
                              -torch.inf)
    shift = scores[..., :1]  # the top score: exp never overflows
    top_w = torch.exp(scores - shift)
    tail_w = torch.exp(tail_scores - shift) * (n_tail.to(q.dtype) / n_samples).unsqueeze(-1)
    num = (top_w.unsqueeze(-1) * _gather_rows(v, idx)).sum(-2) + (
        tail_w.unsqueeze(-1) * _gather_rows(v, tail.clamp(max=n_k - 1))).sum(-2)
    den = top_w.sum(-1, keepdim=True) + tail_w.sum(-1, keepdim=True)
    return num / den


def _gumbel(q, k, v, scores, idx, causal, scale, n_samples, n_groups, generator):
    """Lazy Gumbel sampling: each draw is exact from the full softmax. Runs over blocks of
    queries so that no buffer exceeds a tile."""
    winners = _draws(q, k, scores, idx, causal, scale, n_samples, generator)
    values = _gather_rows(v, winners)  # (..., n_q, n_samples, d_v)
    if n_groups <= 1:
        return values.mean(-2)
    groups = values.reshape(*values.shape[:-2], n_groups, -1, values.shape[-1]).mean(-2)
    return groups.median(-2).values


def _draws(q, k, scores, idx, causal, scale, n_samples, generator):
    """:func:`_gumbel_winners` over blocks of queries, (..., n_q, n_samples)."""
    visible = _visible(q.shape[-2], k.shape[-2], causal, q.device)
    rows = max(1, _TILE // (n_samples * max(1, idx.shape[-1]) * 4))
    return torch.cat([_gumbel_winners(q[..., sl, :], k, scores[..., sl, :], idx[..., sl, :],
                                      visible[sl], scale, n_samples, generator)
                      for sl in (slice(a, a + rows) for a in range(0, q.shape[-2], rows))],
                     -2)


def _gumbel_winners(q, k, scores, idx, visible, scale, n_samples, generator):
    """The index drawn by each of ``n_samples`` lazy Gumbel-max draws, (..., n_q, S)."""
    n_k, kk = k.shape[-2], idx.shape[-1]
    lead = scores.shape[:-1]
    e = torch.empty((*lead, n_samples, kk), dtype=torch.float64,
                    device=generator.device if generator is not None else q.device)
    e.exponential_(generator=generator)
    g_top = scores.unsqueeze(-2) + (-e.clamp_(min=1e-300).log_()).to(q.device, q.dtype)
    best_top, arg_top = g_top.max(-1)  # (..., n_q, S)
    winner = torch.gather(idx, -1, arg_top)
    finite = torch.isfinite(scores)
    s_min = torch.where(finite, scores, torch.inf).amin(-1, keepdim=True)
    bound = (best_top - s_min).to(torch.float64)  # a tail key can win only if G > bound
    n_tail = _n_tail(scores, visible).unsqueeze(-1).expand_as(bound)
    p_tail = -torch.expm1(-torch.exp(-bound))  # P(G > bound)
    m = torch.binomial(n_tail.to(torch.float64).contiguous(), p_tail.contiguous(),
                       generator=generator).long()
    if not m.numel() or int(m.max()) == 0:
        return winner
    # the tail keys whose Gumbel exceeds the bound: a uniform m-subset of the tail, each
    # with a Gumbel conditioned on G > bound (inverse CDF); by sub-blocks of queries
    width = int(m.max())
    sub = max(1, _TILE // (n_samples * width * max(1, q.shape[-1])))
    for start in range(0, q.shape[-2], sub):
        sl = slice(start, start + sub)
        positions = _distinct_positions(n_tail[..., sl, :], m[..., sl, :], generator)
        if positions.shape[-1] == 0:
            continue
        use = positions >= 0
        part = lead[:-1] + (positions.shape[-3],)
        flat = positions.clamp(min=0).reshape(*part, -1)
        cand = _complement(idx[..., sl, :], scores[..., sl, :], flat)
        cand = cand.reshape(positions.shape).clamp(max=n_k - 1)
        low = torch.exp(-torch.exp(-bound[..., sl, :])).unsqueeze(-1)
        u = low + (1 - low) * _rand(positions.shape, generator, q.device)
        g = (-torch.log(-torch.log(u.clamp(max=1 - 1e-16)))).to(q.dtype)
        cs = _scores_of(q[..., sl, :], k, cand.reshape(*part, -1), scale).reshape(cand.shape)
        total = torch.where(use, cs + g, -torch.inf)
        best_tail, arg_tail = total.max(-1)
        tail_winner = torch.gather(cand, -1, arg_tail.unsqueeze(-1)).squeeze(-1)
        winner[..., sl, :] = torch.where(best_tail > best_top[..., sl, :], tail_winner,
                                         winner[..., sl, :])
    return winner


def sample_keys(q, k, n_neighbors, n_samples, *, causal=False, scale=None, generator=None):
    """``n_samples`` exact draws ``j ~ P_i`` per query by lazy Gumbel sampling,
    shape (..., n_q, n_samples)."""
    s = _scale(q, scale)
    scores, idx = topk_keys(q, k, n_neighbors, causal=causal, scale=s)
    return _draws(q, k, scores, idx, causal, s, n_samples, generator)


class KNNAttention(torch.autograd.Function):
    """kNN attention with a choice of forward/backward pair.

    With ``ds_ij = P_ij (dO_i . v_j - dO_i . o_i)``:

    * ``"topk"``: forward is the renormalized softmax over each query's top-k keys, and
      backward its exact gradient (``P`` restricted to the top-k).
    * ``"sampled"``: forward is the lazy-Gumbel estimate (the mean of ``n_samples`` exact
      draws ``j ~ P_i``), and backward estimates the gradient of *full* softmax attention
      from fresh draws (independent of the forward's, so that ``dO``, computed from the
      forward estimate, and the walks multiply to an unbiased product). ``dV = P^T dO``
      and ``dK_j = scale sum_i P_ij (dO_i . v_j - dO_i . o_i) q_i`` are both ``P^T``-type
      products, estimated by one-step random walks ``i -> j ~ P_i`` (exact lazy-Gumbel
      draws, ``n_samples`` per query): each walk adds ``dO_i / S`` to ``dV_j`` and
      ``scale (dO_i . v_j - dO_i . o_i) q_i / S`` to ``dK_j`` (unbiased, variance
      ``O(1 / S)``). ``dQ_i = scale (E_{P_i}[k_j (dO_i . v_j)] - E_{P_i}[k_j] dO_i . o_i)``
      takes both expectations over the same draws (the author took them over the top-k,
      which is biased when the top-k miss mass), and ``dO_i . o_i`` is estimated from the
      draws too (bias ``O(1 / S)`` from the product of means). The paper's walks start from
      a distribution proportional to a shifted column of ``dO``; these start from every
      query, which needs no shift and serves every column at once.

    ``dK`` was not in the author's code; the formula above is the derivative of
    ``o_i = sum_j softmax_j(scale q_i . k_j) v_j`` with respect to ``k_j``.
    """

    @staticmethod
    def forward(ctx, q, k, v, n_neighbors, scale, backward, n_samples, generator):
        ctx.scale, ctx.mode, ctx.n_samples = scale, backward, n_samples
        ctx.n_neighbors, ctx.generator = n_neighbors, generator
        if backward == "sampled":  # the lazy-Gumbel estimate
            j = sample_keys(q, k, n_neighbors, n_samples, scale=scale, generator=generator)
            ctx.save_for_backward(q, k, v)
            return _gather_rows(v, j).mean(-2)
        scores, idx = topk_keys(q, k, n_neighbors, scale=scale)
        w = torch.softmax(scores, dim=-1)
        out = (w.unsqueeze(-1) * _gather_rows(v, idx)).sum(-2)
        ctx.save_for_backward(q, k, v, idx, w, out)
        return out

    @staticmethod
    def backward(ctx, d_out):
        s, n_k = ctx.scale, ctx.saved_tensors[1].shape[-2]
        if ctx.mode == "topk":
            q, k, v, idx, w, out = ctx.saved_tensors
            c = (d_out * out).sum(-1, keepdim=True)  # dO_i . o_i
            vt, kt = _gather_rows(v, idx), _gather_rows(k, idx)  # (..., n_q, kk, .)
            ds = w * ((vt * d_out.unsqueeze(-2)).sum(-1) - c)
            dq = s * (ds.unsqueeze(-1) * kt).sum(-2)
            flat = idx.reshape(*idx.shape[:-2], -1)
            dk = _scatter_rows(n_k, flat, s * ds.unsqueeze(-1) * q.unsqueeze(-2))
            dv = _scatter_rows(n_k, flat, w.unsqueeze(-1) * d_out.unsqueeze(-2))
            return dq, dk, dv, None, None, None, None, None
        q, k, v = ctx.saved_tensors
        S = ctx.n_samples
        # fresh draws: independent of the forward's, so that dO (from the forward estimate)
        # and the walks are independent and the product is unbiased
        j = sample_keys(q, k, ctx.n_neighbors, S, scale=s, generator=ctx.generator)
        vj, kj = _gather_rows(v, j), _gather_rows(k, j)  # (..., n_q, S, .)
        dpj = (vj * d_out.unsqueeze(-2)).sum(-1, keepdim=True)  # dO_i . v_j per walk
        c_hat = dpj.mean(-2, keepdim=True)  # dO_i . o_i of the full softmax, estimated
        dq = s * ((kj * dpj).mean(-2) - kj.mean(-2) * c_hat.squeeze(-2))
        walk_dv = d_out.unsqueeze(-2).expand_as(vj) / S
        walk_dk = (dpj - c_hat) * (s / S) * q.unsqueeze(-2)
        flat = j.reshape(*j.shape[:-2], -1)
        return (dq, _scatter_rows(n_k, flat, walk_dk), _scatter_rows(n_k, flat, walk_dv),
                None, None, None, None, None)


def _scatter_rows(n_rows, flat_index, values):
    """Sum ``values (..., n_q, m, c)`` into rows ``flat_index (..., n_q * m)`` of a
    ``(..., n_rows, c)`` tensor."""
    lead = flat_index.shape[:-1]
    vals = values.reshape(*lead, -1, values.shape[-1])
    out = vals.new_zeros(*lead, n_rows, values.shape[-1])
    return out.scatter_add_(-2, flat_index.unsqueeze(-1).expand_as(vals), vals)


def knn_attention_grad(q, k, v, n_neighbors, *, backward="sampled", scale=None, n_samples=64,
                       generator=None):
    """kNN attention, differentiable in ``q``, ``k`` and ``v``: ``"topk"`` (truncated, exact
    gradient) or ``"sampled"`` (lazy Gumbel, random-walk gradients); see
    :class:`KNNAttention`."""
    return KNNAttention.apply(q, k, v, n_neighbors, _scale(q, scale), backward, n_samples,
                              generator)
