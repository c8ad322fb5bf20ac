"""Kernel (linear) attention against its explicit quadratic form; positive features."""

import pytest
import torch

from sktransformer.attention import (
    features,
    initial_particles,
    kernel_attention,
    positive_features,
)


def _features(B=2, H=3, L=30, N=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    fq = torch.rand(B, H, L, N, generator=g, dtype=torch.float64)
    fk = torch.rand(B, H, L, N, generator=g, dtype=torch.float64)
    v = torch.randn(B, H, L, 5, generator=g, dtype=torch.float64)
    return fq, fk, v


def _quadratic(fq, fk, v, causal):
    K = fq @ fk.transpose(-1, -2)  # the explicit (L, L) kernel matrix
    if causal:
        K = K.tril()
    return (K @ v) / K.sum(-1, keepdim=True)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("chunk", [7, 128])
def test_linear_attention_is_the_kernel_weighted_average(causal, chunk):
    fq, fk, v = _features()
    out = kernel_attention(fq, fk, v, causal=causal, chunk=chunk)
    torch.testing.assert_close(out, _quadratic(fq, fk, v, causal), rtol=1e-10, atol=1e-12)


def test_causal_output_never_depends_on_later_tokens():
    fq, fk, v = _features()
    out = kernel_attention(fq, fk, v, causal=True, chunk=8)
    fk2, v2 = fk.clone(), v.clone()
    fk2[..., 20:, :] *= 5.0
    v2[..., 20:, :] += 100.0
    out2 = kernel_attention(fq, fk2, v2, causal=True, chunk=8)
    torch.testing.assert_close(out[..., :20, :], out2[..., :20, :])
    assert not torch.allclose(out[..., 20:, :], out2[..., 20:, :])


@pytest.mark.parametrize("kernel", ["favor+", "porf", "softmax"])
def test_the_favor_shift_cancels_and_masked_keys_drop_out(kernel):
    """The stabilizing shifts of FAVOR+ (per query, per sequence of keys) leave the output
    as with the plain features; a masked key is the same as a missing one."""
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 12, 8, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(2, 12, 3, generator=g, dtype=torch.float64)
    W, _ = initial_particles(kernel, 32, 8, gamma=1.0, generator=g)
    plain = kernel_attention(features(kernel, q, W, None), features(kernel, k, W, None), v)
    fq = positive_features(kernel, q, W, "query")
    fk = positive_features(kernel, k, W, "key")
    torch.testing.assert_close(kernel_attention(fq, fk, v), plain)
    mask = torch.ones(2, 12, dtype=torch.bool)
    mask[:, 9:] = False
    fk = positive_features(kernel, k, W, "key", mask)
    short = kernel_attention(positive_features(kernel, q, W, "query"),
                             positive_features(kernel, k[:, :9], W, "key"), v[:, :9])
    torch.testing.assert_close(kernel_attention(fq, fk, v), short)


def test_signed_features_are_refused():
    with pytest.raises(ValueError, match="positive feature map"):
        positive_features("rff", torch.zeros(2, 3), torch.zeros(4, 3), "query")


def test_favor_with_many_features_approximates_softmax_attention():
    g = torch.Generator().manual_seed(0)
    q, k = (0.5 * torch.randn(1, 20, 8, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(1, 20, 3, generator=g, dtype=torch.float64)
    exact = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, -1) @ v
    errors = []
    for n in (16, 4096):
        W, _ = initial_particles("favor+", n, 8, gamma=1.0, generator=g)
        out = kernel_attention(positive_features("favor+", q, W, "query"),
                               positive_features("favor+", k, W, "key"), v)
        errors.append(float((out - exact).abs().mean()))
    assert errors[1] < 0.3 * errors[0]
    assert errors[1] < 0.05
