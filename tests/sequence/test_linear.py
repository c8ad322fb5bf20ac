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


@pytest.mark.parametrize("causal", [False, True])
def test_a_knn_block_with_k_the_length_is_the_softmax_block(causal):
    """Forward and gradients, with padding: kNN attention keeping every key is softmax."""
    x = torch.randn(2, 12, 16, generator=torch.Generator().manual_seed(0),
                    dtype=torch.float64)
    mask = torch.ones(2, 12, dtype=torch.bool)
    mask[1, 8:] = False
    softmax = KernelAttention(16, 2, 8, attention="softmax", causal=causal,
                              generator=torch.Generator().manual_seed(1)).double()
    knn = KernelAttention(16, 2, 8, attention="knn", n_neighbors=12, causal=causal,
                          generator=torch.Generator().manual_seed(1)).double()
    knn.load_state_dict(softmax.state_dict())
    a, b = softmax(x, mask), knn(x, mask)
    torch.testing.assert_close(b[mask], a[mask])
    grads_a = torch.autograd.grad(a[mask].sum(), list(softmax.parameters()))
    grads_b = torch.autograd.grad(b[mask].sum(), list(knn.parameters()))
    for ga, gb in zip(grads_a, grads_b):
        torch.testing.assert_close(gb, ga)


def test_a_knn_block_ignores_padding_and_samples_from_its_own_generator():
    x = torch.randn(1, 10, 8, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(1, 10, dtype=torch.bool)
    mask[0, 6:] = False
    block = KernelAttention(8, 2, attention="knn", n_neighbors=3,
                            generator=torch.Generator().manual_seed(1))
    out = block(x, mask)
    changed = x.clone()
    changed[0, 6:] = 100.0  # only padding moves
    torch.testing.assert_close(block(changed, mask)[0, :6], out[0, :6])
    one, two = (KernelAttention(8, 2, attention="knn", n_neighbors=3, gradient="sampled",
                                generator=torch.Generator().manual_seed(1)).train()
                for _ in range(2))
    two.load_state_dict(one.state_dict())  # torch's Linear draws its weights globally
    state = torch.random.get_rng_state()
    torch.testing.assert_close(one(x, mask), two(x, mask))  # the draws are the block's own
    assert torch.equal(state, torch.random.get_rng_state())
    with pytest.raises(ValueError, match="attention='knnn'; choose one of"):
        KernelAttention(8, 2, attention="knnn")
