"""The attention block of the sequence models: padding, the softmax baseline, Q = K."""

import pytest
import torch

from sktransformer.sequence import KernelAttention


@pytest.mark.parametrize("attention", ["kernel", "softmax"])
@pytest.mark.parametrize("causal", [False, True])
def test_module_ignores_padding(attention, causal):
    """Whatever sits at padded positions, the real tokens' outputs do not change."""
    g = torch.Generator().manual_seed(0)
    block = KernelAttention(16, 2, 8, attention=attention, causal=causal, generator=g)
    x = torch.randn(3, 10, 16, generator=g)
    mask = torch.ones(3, 10, dtype=torch.bool)
    mask[1, 6:] = False
    x2 = x.clone()
    x2[1, 6:] = 50 * torch.randn(4, 16, generator=g)
    with torch.no_grad():
        a, b = block(x, mask), block(x2, mask)
    torch.testing.assert_close(a[mask], b[mask])


def test_softmax_block_is_scaled_dot_product_attention_and_qk_tying():
    g = torch.Generator().manual_seed(0)
    block = KernelAttention(8, 2, attention="softmax", tie_qk=True, generator=g)
    assert block.key is block.query
    x = torch.randn(2, 5, 8, generator=g)
    q, k = block.queries_keys(x)
    v = block._split(block.value(x))
    p = torch.softmax(q @ k.transpose(-1, -2) / 2.0, -1)
    expected = block.out((p @ v).transpose(1, 2).reshape(2, 5, 8))
    torch.testing.assert_close(block(x), expected)


@pytest.mark.parametrize("attention", ["kernel", "softmax"])
@pytest.mark.parametrize("causal", [False, True])
def test_an_all_padding_sequence_gives_finite_outputs_and_gradients(attention, causal):
    g = torch.Generator().manual_seed(0)
    block = KernelAttention(8, 2, 8, attention=attention, causal=causal, generator=g)
    x = torch.randn(2, 5, 8, generator=g, requires_grad=True)
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1] = False
    out = block(x, mask)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
