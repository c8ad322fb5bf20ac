"""Gradients of kNN attention: exact through the top-k, or random-walk estimates of the
gradients of full softmax attention (Haris, "kNN Attention Demystified", section 4)."""

import math

import torch

from ._knn import (
    _TILE,
    _blocks,
    _gather_rows,
    _lazy_draws,
    _scale,
    rao_blackwell,
    topk_keys,
)

BACKWARDS = ("topk", "sampled")
_NONE = (None,) * 7  # no gradient for the non-tensor arguments


class KNNAttention(torch.autograd.Function):
    """kNN attention with a choice of forward/backward pair.

    Both write the attention row of query ``i`` as weights ``W_ij`` on a few keys ``j``
    (``o_i = sum_j W_ij v_j``) and back-propagate through them with
    ``ds_ij = W_ij (dO_i . v_j - c_i)``, ``c_i = sum_j W_ij dO_i . v_j``:
    ``dQ_i = scale sum_j ds_ij k_j``, ``dK_j = scale sum_i ds_ij q_i``,
    ``dV_j = sum_i W_ij dO_i``.

    * ``"topk"``: ``W_i`` is the softmax renormalized over the top-k keys, so the forward
      is the truncated estimator and the backward its exact gradient.
    * ``"sampled"``: ``W_i`` is an unbiased estimate of the full softmax row ``P_i`` from
      ``n_samples`` exact lazy-Gumbel draws ``j ~ P_i``: one-step random walks from every
      query. Each walk that ends outside the top-k adds ``1 / S`` to ``W_ij``; the walks
      that end inside it are Rao-Blackwellized: given that a draw lands in the top-k, it
      lands on ``j`` with the renormalized top-k softmax ``w_ij``, so their count ``m_i``
      gives ``W_ij = (m_i / S) w_ij`` there. That is unbiased too, and exact once the top-k
      hold the mass. The backward takes fresh draws from the forward's top-k (which is
      deterministic), independent of the forward's draws, so that ``dO`` (computed from
      the forward estimate) and ``W`` multiply to an unbiased product: ``dV = W^T dO``
      and the linear parts of ``dK`` and ``dQ`` are unbiased, and ``c_i`` taken from the
      same draws adds a bias ``O(1 / S)``. The paper's walks start from a distribution
      proportional to a shifted column of ``dO``; these start from every query, which
      needs no shift and serves every column at once; and the author's ``dQ`` took its
      expectations over the top-k alone (biased when the top-k miss mass).

    ``dK`` was not in the author's code; the formula above is the derivative of
    ``o_i = sum_j softmax_j(scale q_i . k_j) v_j`` with respect to ``k_j``.

    Memory: the rows ``(idx, W)`` are ``O(n_q m)``; the output and the backward gather
    keys and values by blocks of queries, so nothing of size ``n_q m d`` is ever held.
    """

    @staticmethod
    def forward(ctx, q, k, v, n_neighbors, scale, backward, n_samples, generator, exclude,
                causal=False):
        """The attention output ``sum_j W_ij v_j``, (..., n_q, d_v)."""
        ctx.scale, ctx.mode, ctx.n_samples = scale, backward, n_samples
        ctx.n_neighbors, ctx.generator, ctx.exclude = n_neighbors, generator, exclude
        ctx.causal = causal
        scores, top = topk_keys(q, k, n_neighbors, scale=scale, exclude=exclude,
                                causal=causal)
        idx, w = _row_weights(q, k, scores, top, scale, backward, n_samples, generator,
                              exclude, causal)
        if backward == "topk":  # the backward reuses the forward's rows
            ctx.save_for_backward(q, k, v, idx, w)
        else:  # fresh draws in the backward, from the forward's top-k
            ctx.save_for_backward(q, k, v, scores, top)
        lead = torch.broadcast_shapes(v.shape[:-2], idx.shape[:-2])
        out = v.new_empty(*lead, idx.shape[-2], v.shape[-1])
        for sl in _query_blocks(idx, v.shape[-1]):
            out[..., sl, :] = (w[..., sl, :].unsqueeze(-2)
                               @ _gather_rows(v, idx[..., sl, :])).squeeze(-2)
        return out

    @staticmethod
    def backward(ctx, d_out):
        """``dQ, dK, dV`` from ``dO``, through the rows ``W`` (see the class)."""
        if ctx.mode == "topk":
            q, k, v, idx, w = ctx.saved_tensors
        else:
            q, k, v, scores, top = ctx.saved_tensors
            idx, w = _row_weights(q, k, scores, top, ctx.scale, "sampled", ctx.n_samples,
                                  ctx.generator, ctx.exclude, ctx.causal)
        s, n_k = ctx.scale, k.shape[-2]
        lead = torch.broadcast_shapes(idx.shape[:-2], d_out.shape[:-2])
        dq = q.new_empty(*lead, idx.shape[-2], q.shape[-1])
        dk = k.new_zeros(*lead, n_k, k.shape[-1])
        dv = v.new_zeros(*lead, n_k, v.shape[-1])
        for sl in _query_blocks(idx, max(k.shape[-1], v.shape[-1])):
            i, wb, g = idx[..., sl, :], w[..., sl, :], d_out[..., sl, :]
            vj, kj = _gather_rows(v, i), _gather_rows(k, i)  # (..., rows, m, .)
            dp = (vj @ g.unsqueeze(-1)).squeeze(-1)  # dO_i . v_j
            c = (wb * dp).sum(-1, keepdim=True)  # dO_i . o_i
            ds = wb * (dp - c)
            dq[..., sl, :] = s * (ds.unsqueeze(-2) @ kj).squeeze(-2)
            flat = i.reshape(*i.shape[:-2], -1)
            _scatter_rows(dk, flat, s * ds.unsqueeze(-1) * q[..., sl, :].unsqueeze(-2))
            _scatter_rows(dv, flat, wb.unsqueeze(-1) * g.unsqueeze(-2))
        return dq, dk, dv, *_NONE


def _row_weights(q, k, scores, idx, scale, mode, n_samples, generator, exclude, causal):
    """Keys and weights of each query's attention row, (..., n_q, m) each, from its top-k
    ``scores, idx``: the top-k softmax (``"topk"``), or the Rao-Blackwellized estimate of
    the full softmax row from ``n_samples`` draws (``"sampled"``, ``m = k + n_samples``).
    ``causal``: query ``i`` sees keys ``j <= i`` only."""
    if mode == "topk":
        return idx, torch.softmax(scores, dim=-1)
    with torch.no_grad():
        draws = _lazy_draws(q, k, scores, idx, causal, scale, n_samples, generator,
                            exclude)
    return rao_blackwell(scores, idx, draws)


def _query_blocks(idx, width):
    """Slices of the queries of ``idx (..., n_q, m)`` whose gathered ``(..., rows, m,
    width)`` rows hold about a quarter of a score tile: the backward's memory is bounded
    by blocks, not by ``n_q m``."""
    batch = math.prod(idx.shape[:-2]) or 1
    return _blocks(idx.shape[-2], max(1, _TILE // (4 * batch * idx.shape[-1] * width)))


def _scatter_rows(out, flat_index, values):
    """Add ``values (..., rows, m, c)`` into the rows ``flat_index (..., rows * m)`` of
    ``out (..., n_rows, c)``, in place."""
    vals = values.reshape(*values.shape[:-3], -1, values.shape[-1])
    out.scatter_add_(-2, flat_index.unsqueeze(-1).expand_as(vals), vals)


def knn_attention_grad(q, k, v, n_neighbors, *, backward="sampled", scale=None, n_samples=64,
                       generator=None, exclude=None, causal=False):
    """kNN attention, differentiable in ``q``, ``k`` and ``v``: ``"topk"`` (truncated, exact
    gradient) or ``"sampled"`` (Rao-Blackwellized lazy Gumbel, random-walk gradients of
    full softmax attention); see :class:`KNNAttention`. ``exclude (n_q,)`` hides one key
    from each query; ``causal`` lets query ``i`` see keys ``j <= i`` only."""
    if backward not in BACKWARDS:
        raise ValueError(f"Unknown backward {backward!r}; choose one of {BACKWARDS}.")
    return KNNAttention.apply(q, k, v, n_neighbors, _scale(q, scale), backward, n_samples,
                              generator, exclude, causal)
