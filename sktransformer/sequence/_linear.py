"""The multi-head attention block of the sequence models: linear attention over particle
features (:func:`~sktransformer.attention.kernel_attention`), kNN attention
(:func:`~sktransformer.attention.knn_attention_grad`), or softmax attention as the
baseline, in one module."""

import math

import torch

from ..attention import (
    initial_particles,
    kernel_attention,
    knn_attention_grad,
    positive_features,
)

ATTENTIONS = ("kernel", "knn", "softmax")
_PAD_SCORE = 1e4  # how far below every real key a padding key scores in kNN attention


class KernelAttention(torch.nn.Module):
    """Multi-head attention whose kernel is ``<phi(q), phi(k)>``, of particle features.

    The particles ``W (n_components, d_head)`` are a buffer, not a parameter: they are set by
    Langevin dynamics on kernel-target alignment (phase A of
    :class:`~sktransformer.SequenceAttentionClassifier`), or stay the random draw (fixed
    FAVOR+ features), while the projections learn by backpropagation. One particle set is
    shared by the heads. ``attention="knn"`` restricts softmax attention to each query's
    ``n_neighbors`` best keys (the exact top-k by blocks of queries, never an ``L x L``
    matrix), with the exact top-k gradient or the sampled random-walk gradient of full
    softmax attention (``gradient``); padding keys score far below every real key.
    ``attention="softmax"`` is the same block with exact softmax attention (torch's
    ``scaled_dot_product_attention``), the baseline.

    Parameters
    ----------
    d_model, n_heads : int
    n_components : int
        Features (particles) per head.
    kernel : {"favor+", "porf", "softmax"}
    attention : {"kernel", "knn", "softmax"}
    causal : bool
    n_neighbors : int
        Keys kept per query (``attention="knn"``).
    gradient : {"exact", "sampled"}
        ``attention="knn"`` while training: the exact gradient of the top-k attention, or
        ``n_samples`` lazy-Gumbel draws per query (Rao-Blackwellized) for the forward and
        the random-walk estimate of the gradient of full softmax attention. In eval mode
        the top-k attention runs either way.
    n_samples : int
    tie_qk : bool
        ``Q = K``: one projection for queries and keys (a symmetric kernel).
    generator : torch.Generator or None
        Draws the initial particles (orthogonal Gaussian rows); None leaves zeros to be
        set by the caller.
    """

    def __init__(self, d_model, n_heads, n_components=64, *, kernel="favor+",
                 attention="kernel", causal=False, tie_qk=False, n_neighbors=32,
                 gradient="exact", n_samples=32, generator=None):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be a multiple of n_heads={n_heads}.")
        if attention not in ATTENTIONS:
            raise ValueError(f"attention={attention!r}; choose one of {ATTENTIONS}.")
        if gradient not in ("exact", "sampled"):
            raise ValueError(f"gradient={gradient!r}; choose 'exact' or 'sampled'.")
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.kernel, self.attention, self.causal = kernel, attention, causal
        self.n_neighbors, self.gradient, self.n_samples = n_neighbors, gradient, n_samples
        self.sampler = None  # the generator of the sampled gradient's draws
        self.query = torch.nn.Linear(d_model, d_model)
        self.key = self.query if tie_qk else torch.nn.Linear(d_model, d_model)
        self.value = torch.nn.Linear(d_model, d_model)
        self.out = torch.nn.Linear(d_model, d_model)
        self.register_buffer("particles", torch.zeros(n_components, self.d_head,
                                                      device=self.query.weight.device))
        if generator is not None:
            self.reset_particles(generator)

    @torch.no_grad()
    def reset_particles(self, generator):
        """Draw the particles afresh from ``generator`` (orthogonal Gaussian rows); a kNN
        block also seeds the generator of its sampled gradient from it."""
        W, _ = initial_particles(self.kernel, *self.particles.shape, gamma=1.0,
                                 generator=generator, dtype=self.particles.dtype)
        self.particles.copy_(W.to(self.particles.device))
        if self.attention == "knn":
            seed = int(torch.randint(0, 2**62, (1,), generator=generator,
                                     device=generator.device))
            self.sampler = torch.Generator(device=self.particles.device).manual_seed(seed)

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
        elif self.attention == "knn":
            out = self._knn(q, k, v, mask)
        else:
            fq = positive_features(self.kernel, q, self.particles, "query")
            fk = positive_features(self.kernel, k, self.particles, "key",
                                   None if mask is None else mask[:, None, :])
            out = kernel_attention(fq, fk, v, causal=self.causal)
        B, H, L, dh = out.shape
        return self.out(out.transpose(1, 2).reshape(B, L, H * dh))

    def _knn(self, q, k, v, mask):
        """kNN attention per head; padding keys get a last coordinate that puts their
        scores ``_PAD_SCORE`` below the real keys' (zero weight, never a neighbour while
        ``n_neighbors`` real keys remain)."""
        scale = 1.0 / math.sqrt(self.d_head)
        if mask is not None and not bool(mask.all()):
            pad = (~mask).to(q.dtype)[:, None, :, None].expand(*k.shape[:-1], 1)
            q = torch.cat([q, torch.ones_like(q[..., :1])], -1)
            k = torch.cat([k, -(_PAD_SCORE / scale) * pad], -1)
        sampled = self.training and self.gradient == "sampled"
        if sampled and (self.sampler is None or self.sampler.device != q.device):
            self.sampler = torch.Generator(device=q.device).manual_seed(0)
        return knn_attention_grad(
            q, k, v, min(self.n_neighbors, k.shape[-2]),
            backward="sampled" if sampled else "topk", scale=scale,
            n_samples=self.n_samples, generator=self.sampler, causal=self.causal)

