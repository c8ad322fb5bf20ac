"""A small encoder classifier: embedding, pre-norm attention blocks, masked mean pooling,
a linear head. Its attention is :class:`KernelAttention` (particle features) or softmax."""

import math

import torch
from torch import nn

from ._linear import KernelAttention


def masked_mean(h, mask, dim):
    """Mean of ``h`` over ``dim`` where ``mask`` (broadcast to ``h``) is True."""
    m = mask.to(h.dtype)
    return (h * m).sum(dim) / m.sum(dim).clamp(min=1.0)


class Block(nn.Module):
    """Pre-norm residual block: ``x + attention(LN(x))``, then ``x + FFN(LN(x))``."""

    def __init__(self, d_model, n_heads, n_components, **attention):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attention = KernelAttention(d_model, n_heads, n_components, **attention)
        self.ffn = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(),
                                 nn.Linear(2 * d_model, d_model))

    def forward(self, x, mask):
        x = x + self.attention(self.norm1(x), mask)
        return x + self.ffn(self.norm2(x))


class SequenceEncoder(nn.Module):
    """Sequences to class logits.

    ``n_tokens``: integer tokens through an embedding (one extra row for ids unseen in
    training); otherwise ``n_inputs`` float features per position through a linear map.
    Learned position embeddings up to ``max_len``.
    """

    def __init__(self, *, n_classes, max_len, n_tokens=None, n_inputs=None, d_model=32,
                 n_heads=2, n_layers=1, n_components=32, kernel="favor+", attention="kernel",
                 causal=False, tie_qk=False, n_neighbors=32, gradient="exact"):
        super().__init__()
        self.embed = (nn.Embedding(n_tokens + 1, d_model) if n_tokens is not None
                      else nn.Linear(n_inputs, d_model))
        self.position = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, n_components, kernel=kernel, attention=attention,
                  causal=causal, tie_qk=tie_qk, n_neighbors=n_neighbors, gradient=gradient)
            for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def tokens(self, x):
        """The token vectors entering the first block, (B, L, d_model)."""
        positions = torch.arange(x.shape[1], device=x.device)
        return self.embed(x) + self.position(positions)

    def forward(self, x, mask, *, upto=None):
        """Logits (B, n_classes); with ``upto=l`` the input of block ``l`` instead."""
        h = self.tokens(x)
        for i, block in enumerate(self.blocks):
            if i == upto:
                return h
            h = block(h, mask)
        return self.head(masked_mean(self.norm(h), mask.unsqueeze(-1), 1))


def build(generator, device, **kwargs):
    """A :class:`SequenceEncoder` whose weights are drawn from ``generator`` alone: built on
    the meta device (no draw from torch's global generator), then initialized as torch
    would (uniform ``+-1/sqrt(fan_in)`` linear weights and biases, normal embeddings, unit
    LayerNorms) and with fresh particles, from the local generator."""
    with torch.device("meta"):
        model = SequenceEncoder(**kwargs)
    model = model.to_empty(device=device)

    def draw(shape, normal=False):
        fn = torch.randn if normal else torch.rand
        return fn(shape, generator=generator, device=generator.device).to(device)

    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                bound = 1.0 / math.sqrt(module.in_features)
                module.weight.copy_((2 * draw(module.weight.shape) - 1) * bound)
                module.bias.copy_((2 * draw(module.bias.shape) - 1) * bound)
            elif isinstance(module, nn.Embedding):
                module.weight.copy_(draw(module.weight.shape, normal=True))
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
            elif isinstance(module, KernelAttention):
                module.reset_particles(generator)
    return model
