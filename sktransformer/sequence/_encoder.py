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


def sinusoidal_positions(max_len, d_model):
    """Fixed position encodings ``(max_len, d_model)``: the sines and cosines of Vaswani et
    al. (2017) at geometric frequencies from 1 to 1/10,000, scaled to unit norm per
    position.

    Unit norm, not Vaswani's ``sqrt(d_model / 2)``: at full size they outweigh the
    weight-decayed token embeddings (Rotten Tomatoes reviews, one split: 0.762 at full
    size, 0.771 at unit norm, 0.777 with learned positions; three splits: 0.758 at unit
    norm, 0.757 for the learned positions), and at a tenth of unit norm the order task did
    not always start learning. Fixed, they let a model of 2,000 sequences tell which of
    two tokens comes first at length 128 (learned ones stayed at chance).
    """
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32)
                          * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)[:, :d_model // 2]
    return table / table.norm(dim=1, keepdim=True)


class SequenceEncoder(nn.Module):
    """Sequences to class logits.

    ``n_tokens``: integer tokens through an embedding (one extra row for ids unseen in
    training); otherwise ``n_inputs`` float features per position through a linear map.
    Position encodings up to ``max_len``: :func:`sinusoidal_positions`, held fixed
    (``position.weight`` does not train; a model saved with learned ones loads them).
    """

    def __init__(self, *, n_classes, max_len, n_tokens=None, n_inputs=None, d_model=32,
                 n_heads=2, n_layers=1, n_components=32, kernel="favor+", attention="kernel",
                 causal=False, tie_qk=False, n_neighbors=32, gradient="exact"):
        super().__init__()
        self.embed = (nn.Embedding(n_tokens + 1, d_model) if n_tokens is not None
                      else nn.Linear(n_inputs, d_model))
        self.position = nn.Embedding(max_len, d_model)
        self.position.weight.requires_grad_(False)
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


def training_bytes(*, n_classes, max_len, n_tokens, n_inputs, d_model, n_heads, n_layers,
                   n_components, batch_size, **attention):
    """About the memory a model of this configuration takes to train on batches of
    ``batch_size`` (float32): its weights, their gradients and Adam's two moments, and a
    batch's activations (per layer about ten ``d_model`` values and the attention features
    of each head, per position). An estimate made before anything is built."""
    width = n_tokens + 1 if n_tokens is not None else n_inputs
    weights = d_model * (width + max_len + n_classes) + n_layers * (
        8 * d_model * d_model + 2 * n_components * d_model)
    activations = batch_size * max_len * n_layers * (10 * d_model + n_heads * n_components)
    return 4 * (4 * weights + activations)


def build(generator, device, **kwargs):
    """A :class:`SequenceEncoder` whose weights are drawn from ``generator`` alone: built on
    the meta device (no draw from torch's global generator), then initialized as torch
    would (uniform ``+-1/sqrt(fan_in)`` linear weights and biases, normal token embeddings,
    unit LayerNorms) and with fresh particles, from the local generator; the position
    encodings are the fixed sinusoids."""
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
            elif module is model.position:
                module.weight.copy_(sinusoidal_positions(*module.weight.shape))
            elif isinstance(module, nn.Embedding):
                module.weight.copy_(draw(module.weight.shape, normal=True))
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
            elif isinstance(module, KernelAttention):
                module.reset_particles(generator)
    return model
