"""kNN attention against exact softmax attention (float64, small n)."""

import pytest
import torch

from sktransformer.attention._knn import knn_attention, topk_keys


def _qkv(n=300, d=16, bound=2.0, heads=(2,), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(*heads, n, d, generator=g, dtype=torch.float64) * 2 - 1) * bound
            for _ in range(3)]


def _exact(q, k, v, causal=False):
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -torch.inf)
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("causal", [False, True])
def test_all_keys_is_exact_attention_and_blocks_do_not_matter(causal):
    q, k, v = _qkv()
    exact = _exact(q, k, v, causal)
    torch.testing.assert_close(knn_attention(q, k, v, 300, causal=causal), exact)
    torch.testing.assert_close(knn_attention(q, k, v, 300, causal=causal, block=7), exact)


def test_topk_by_blocks_equals_a_full_topk():
    q, k, _ = _qkv()
    scores, idx = topk_keys(q, k, 10, block=13)
    full = torch.topk(q @ k.transpose(-1, -2) / 4, 10, dim=-1)
    torch.testing.assert_close(scores, full.values)
    assert torch.equal(idx, full.indices)


def test_causal_output_never_depends_on_later_tokens():
    q, k, v = _qkv()
    out = knn_attention(q, k, v, 8, causal=True)
    v2 = v.clone()
    v2[..., 200:, :] += 100.0
    k2 = k.clone()
    k2[..., 200:, :] *= -3
    out2 = knn_attention(q, k2, v2, 8, causal=True)
    torch.testing.assert_close(out[..., :200, :], out2[..., :200, :])
    _, idx = topk_keys(q, k, 8, causal=True)
    rows = torch.arange(300).view(1, -1, 1)
    scores, _ = topk_keys(q, k, 8, causal=True)
    assert bool(((idx <= rows) | torch.isinf(scores)).all())


def test_truncated_error_falls_with_k():
    q, k, v = _qkv(bound=3.0)
    exact = _exact(q, k, v)
    errors = [float((knn_attention(q, k, v, kk) - exact).abs().mean()) for kk in (1, 4, 16, 64)]
    assert all(a > b for a, b in zip(errors, errors[1:]))
    assert errors[-1] < 0.05 * errors[0]


@pytest.mark.parametrize("estimator", ["tail", "gumbel"])
def test_sampled_estimators_converge_with_samples(estimator):
    _, k, v = _qkv(n=200, heads=(1,), bound=2.0)
    q = _qkv(n=20, heads=(1,), bound=2.0, seed=1)[0]
    exact = _exact(q, k, v)
    errors = []
    for n_samples in (16, 256):
        out = knn_attention(q, k, v, 14, estimator=estimator, n_samples=n_samples,
                            generator=torch.Generator().manual_seed(0))
        errors.append(float((out - exact).abs().mean()))
    assert errors[1] < 0.5 * errors[0]


def test_lazy_gumbel_is_unbiased():
    """The mean over many draws approaches the exact output even when the top-k hold little
    of the mass (k = 3 of 100 keys): the tail keys are sampled, not dropped."""
    _, k, v = _qkv(n=100, heads=(1,), bound=1.0)
    q = _qkv(n=10, heads=(1,), bound=1.0, seed=1)[0]
    exact = _exact(q, k, v)
    out = knn_attention(q, k, v, 3, estimator="gumbel", n_samples=4000,
                        generator=torch.Generator().manual_seed(0))
    truncated = knn_attention(q, k, v, 3)
    gumbel_error = float((out - exact).abs().mean())
    assert gumbel_error < 0.25 * float((truncated - exact).abs().mean())
    # within Monte Carlo error of 4000 draws: std(v) / sqrt(4000) * sqrt(2 / pi)
    assert gumbel_error < 2 * (1 / 3) ** 0.5 / 4000 ** 0.5
    mom = knn_attention(q, k, v, 3, estimator="gumbel", n_samples=4000, n_groups=10,
                        generator=torch.Generator().manual_seed(1))
    assert float((mom - exact).abs().mean()) < 2 * gumbel_error + 0.01


def test_unknown_estimator():
    q, k, v = _qkv(n=10)
    with pytest.raises(ValueError, match="Unknown estimator 'exact'"):
        knn_attention(q, k, v, 3, estimator="exact")
