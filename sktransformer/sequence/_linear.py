"""Kernel (linear) attention: softmax's ``exp(q . k)`` replaced by ``phi(q) . phi(k)``.

``out_i = phi(q_i) (sum_j phi(k_j)^T v_j) / (phi(q_i) . sum_j phi(k_j))``: the key
features and values are summed once, so time and memory are linear in the sequence
length. Causal attention keeps running sums, by chunks of tokens: within a chunk the
``(chunk, chunk)`` kernel is masked, earlier chunks arrive as one state of shape
``(n_features, d_v)``, so memory stays ``O(chunk^2 + n_features d_v)`` per head.
"""

import torch

from ..kernels._features import _favor_exponent, features, initial_particles

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
    offset = 0.0
    if kernel == "favor+":
        z = _favor_exponent(x, particles).detach()
        if mask is not None:
            z = z.masked_fill(~mask.unsqueeze(-1), -torch.inf)
        offset = z.amax(dim=-1 if role == "query" else (-2, -1), keepdim=True)
        offset = torch.where(torch.isfinite(offset), offset, 0.0)  # an all-pad sequence
    phi = features(kernel, x, particles, None, offset=offset)
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


class KernelAttention(torch.nn.Module):
    """Multi-head attention whose kernel is ``<phi(q), phi(k)>``, of particle features.

    The particles ``W (n_features, d_head)`` are a buffer, not a parameter: they are set by
    Langevin dynamics on kernel-target alignment (phase A of
    :class:`~sktransformer.ParticleAttentionClassifier`), or stay the random draw (fixed
    FAVOR+ features), while the projections learn by backpropagation. One particle set is
    shared by the heads. ``attention="softmax"`` is the same block with exact softmax
    attention (torch's ``scaled_dot_product_attention``), the baseline.

    Parameters
    ----------
    d_model, n_heads : int
    n_features : int
        Features (particles) per head.
    kernel : {"favor+", "porf", "softmax"}
    attention : {"kernel", "softmax"}
    causal : bool
    tie_qk : bool
        ``Q = K``: one projection for queries and keys (a symmetric kernel).
    generator : torch.Generator or None
        Draws the initial particles (orthogonal Gaussian rows); None leaves zeros to be
        set by the caller.
    """

    def __init__(self, d_model, n_heads, n_features=64, *, kernel="favor+",
                 attention="kernel", causal=False, tie_qk=False, generator=None):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be a multiple of n_heads={n_heads}.")
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.kernel, self.attention, self.causal = kernel, attention, causal
        self.query = torch.nn.Linear(d_model, d_model)
        self.key = self.query if tie_qk else torch.nn.Linear(d_model, d_model)
        self.value = torch.nn.Linear(d_model, d_model)
        self.out = torch.nn.Linear(d_model, d_model)
        self.register_buffer("particles", torch.zeros(n_features, self.d_head,
                                                      device=self.query.weight.device))
        if generator is not None:
            self.reset_particles(generator)

    @torch.no_grad()
    def reset_particles(self, generator):
        """Draw the particles afresh from ``generator`` (orthogonal Gaussian rows)."""
        W, _ = initial_particles(self.kernel, *self.particles.shape, gamma=1.0,
                                 generator=generator, dtype=self.particles.dtype)
        self.particles.copy_(W.to(self.particles.device))

    def _split(self, x):
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, L, dh)

    def queries_keys(self, x):
        """The per-head queries and keys of ``x (B, L, d_model)``, (B, H, L, d_head) each."""
        return self._split(self.query(x)), self._split(self.key(x))

    def forward(self, x, mask=None):
        """``x (B, L, d_model)``; ``mask (B, L)`` True on real tokens (pads are no keys)."""
        q, k = self.queries_keys(x)
        v = self._split(self.value(x))
        if self.attention == "softmax":
            attn_mask = None
            if mask is not None:
                attn_mask = mask[:, None, None, :]
                if self.causal:
                    L = x.shape[1]
                    attn_mask = attn_mask & torch.ones(L, L, dtype=torch.bool,
                                                       device=x.device).tril()
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, is_causal=self.causal and mask is None)
        else:
            fq = positive_features(self.kernel, q, self.particles, "query")
            fk = positive_features(self.kernel, k, self.particles, "key",
                                   None if mask is None else mask[:, None, :])
            out = kernel_attention(fq, fk, v, causal=self.causal)
        B, H, L, dh = out.shape
        return self.out(out.transpose(1, 2).reshape(B, L, H * dh))
