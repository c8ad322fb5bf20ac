"""Kernel (linear) attention: softmax's ``exp(q . k)`` replaced by ``phi(q) . phi(k)``.

``out_i = phi(q_i) (sum_j phi(k_j)^T v_j) / (phi(q_i) . sum_j phi(k_j))``: the key
features and values are summed once, so time and memory are linear in the sequence
length. Causal attention keeps running sums, by chunks of tokens: within a chunk the
``(chunk, chunk)`` kernel is masked, earlier chunks arrive as one state of shape
``(n_features, d_v)``, so memory stays ``O(chunk^2 + n_features d_v)`` per head.
"""

import math

import torch

from ._features import favor_exponent, features

POSITIVE_MAPS = ("favor+", "porf", "softmax")


def positive_features(kernel, x, particles, role, mask=None):
    """``phi(x)`` of the rows of ``particles`` for a positive map, (..., n, n_features).

    FAVOR+ is ``exp``: its exponent's maximum is subtracted, per query (a factor that
    cancels in the query's ratio), or over each sequence's keys (a factor common to its
    keys, which cancels too), so the attention output is exactly that of the unshifted
    features. ``mask (..., n)``, for keys: False rows (pads) get zero features and no say
    in the maximum.
    """
    if kernel not in POSITIVE_MAPS:
        raise ValueError(f"Linear attention needs a positive feature map; got {kernel!r}, "
                         f"choose one of {POSITIVE_MAPS}.")
    if kernel == "favor+":  # the exponent once, for the offset and the features
        z = favor_exponent(x, particles)
        top = z.detach()
        if mask is not None:
            top = top.masked_fill(~mask.unsqueeze(-1), -torch.inf)
        offset = top.amax(dim=-1 if role == "query" else (-2, -1), keepdim=True)
        offset = torch.where(torch.isfinite(offset), offset, 0.0)  # an all-pad sequence
        phi = torch.exp(z - offset) / math.sqrt(particles.shape[0])
    else:
        phi = features(kernel, x, particles, None)
    return phi if mask is None else phi * mask.unsqueeze(-1).to(phi.dtype)


def kernel_attention(fq, fk, v, *, causal=False, chunk=128, eps=1e-12):
    """Linear attention from features ``fq (..., L_q, N)``, ``fk (..., L_k, N)`` and values
    ``v (..., L_k, d_v)``; returns (..., L_q, d_v).

    Non-causal: ``out = fq (fk^T v) / (fq . sum_j fk_j)``. Causal (``L_q == L_k``): query
    ``i`` sums over keys ``j <= i`` only. A padded key is one whose features are zero.
    """
    if not causal:
        kv = fk.transpose(-1, -2) @ v  # (..., N, d_v)
        z = fk.sum(-2)  # (..., N)
        return (fq @ kv) / ((fq * z.unsqueeze(-2)).sum(-1, keepdim=True) + eps)
    L = fq.shape[-2]
    state = fk.new_zeros(*fk.shape[:-2], fk.shape[-1], v.shape[-1])
    norm = fk.new_zeros(*fk.shape[:-2], fk.shape[-1])
    mask = torch.ones(chunk, chunk, dtype=torch.bool, device=fq.device).tril()
    out = []
    for a in range(0, L, chunk):
        q, k, vv = fq[..., a:a + chunk, :], fk[..., a:a + chunk, :], v[..., a:a + chunk, :]
        m = mask[:q.shape[-2], :q.shape[-2]]
        inner = (q @ k.transpose(-1, -2)).masked_fill(~m, 0.0)  # (..., c, c)
        num = q @ state + inner @ vv
        den = (q * norm.unsqueeze(-2)).sum(-1, keepdim=True) + inner.sum(-1, keepdim=True)
        out.append(num / (den + eps))
        state = state + k.transpose(-1, -2) @ vv
        norm = norm + k.sum(-2)
    return torch.cat(out, -2)
