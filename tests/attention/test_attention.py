import numpy as np
import pytest
import torch

from sktransformer.attention import (
    SCORES,
    attend,
    dot,
    get_score,
    get_weight,
    hardmax,
    linear,
    neg_sq_euclidean,
    softmax,
    sparsemax,
)


def test_neg_sq_euclidean_by_hand():
    q = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    k = torch.tensor([[3.0, 4.0], [1.0, 1.0]], dtype=torch.float64)
    expected = -torch.tensor([[25.0, 2.0], [13.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(neg_sq_euclidean(q, k), expected)
    assert (neg_sq_euclidean(q, q).diagonal() == 0).all()


def test_dot_score():
    q, k = torch.randn(5, 3), torch.randn(4, 3)
    torch.testing.assert_close(dot(q, k), q @ k.T)


def test_hardmax_is_uniform_over_ties():
    s = torch.tensor([[1.0, 3.0, 3.0, 0.0], [5.0, 1.0, 1.0, 1.0]])
    expected = torch.tensor([[0.0, 0.5, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(hardmax(s), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softmax_stable_at_gamma_1e4(dtype):
    # gamma = 1 / temperature = 1e4 on distances of order 1: exp(-1e4) underflows, but the
    # max-subtracting softmax gives finite weights, one-hot where the gap is large.
    s = -torch.tensor([[0.0, 1.0, 4.0], [2.0, 2.0 + 1e-3, 9.0]], dtype=dtype)
    w = softmax(s, 1e-4)
    assert torch.isfinite(w).all()
    torch.testing.assert_close(w.sum(1), torch.ones(2, dtype=dtype))
    assert w[0, 0] == 1.0 and w[1, 2] == 0.0
    assert 0.99 < float(w[1, 0]) < 1.0


def test_softmax_tends_to_hardmax():
    s = torch.randn(20, 7, dtype=torch.float64)
    torch.testing.assert_close(softmax(s, 1e-6), hardmax(s))


def test_linear_is_the_weighted_mean():
    r = torch.tensor([[1.0, 0.0, 3.0]])
    v = torch.tensor([[2.0], [100.0], [6.0]])
    torch.testing.assert_close(linear(r) @ v, torch.tensor([[5.0]]))


def test_attend_composes_score_and_weight():
    q, k, v = torch.randn(6, 3), torch.randn(5, 3), torch.randn(5, 2)
    torch.testing.assert_close(
        attend(q, k, v, score="dot", temperature=0.7), torch.softmax(q @ k.T / 0.7, 1) @ v)
    # hard Euclidean attention returns the value of the nearest key
    nearest = torch.cdist(q, k).argmin(1)
    torch.testing.assert_close(attend(q, k, v), v[nearest])


def test_unknown_names_are_clear_errors():
    with pytest.raises(ValueError, match="Unknown score 'manhattan'"):
        get_score("manhattan")
    with pytest.raises(ValueError, match="Unknown weighting 'gumbel'"):
        get_weight("gumbel")


def _simplex_projection(z):
    """Reference: Euclidean projection of each row onto the simplex, by bisection on tau."""
    out = np.empty_like(z)
    for i, row in enumerate(z):
        lo, hi = row.min() - 1.0, row.max()
        for _ in range(200):
            tau = 0.5 * (lo + hi)
            if np.maximum(row - tau, 0).sum() > 1.0:
                lo = tau
            else:
                hi = tau
        out[i] = np.maximum(row - 0.5 * (lo + hi), 0)
    return out


def test_sparsemax_by_hand():
    # z = (1, 0.5, -1): support {1, 0.5}, tau = (1.5 - 1) / 2 = 0.25
    w = sparsemax(torch.tensor([[1.0, 0.5, -1.0]], dtype=torch.float64))
    torch.testing.assert_close(w, torch.tensor([[0.75, 0.25, 0.0]], dtype=torch.float64))


@pytest.mark.parametrize("temperature", [0.3, 1.0, 5.0])
def test_sparsemax_is_the_simplex_projection(temperature):
    z = torch.randn(50, 9, dtype=torch.float64) * 2
    w = sparsemax(z, temperature)
    torch.testing.assert_close(w, torch.from_numpy(_simplex_projection((z / temperature).numpy())),
                               atol=1e-10, rtol=0)
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(1), torch.ones(50, dtype=torch.float64))
    torch.testing.assert_close(sparsemax(z + 7.0, temperature), w)  # shift invariance


def test_sparsemax_limits_and_sparsity():
    z = torch.randn(30, 6, dtype=torch.float64)
    torch.testing.assert_close(sparsemax(z, 1e-6), hardmax(z))
    torch.testing.assert_close(sparsemax(z, 1e6), torch.full_like(z, 1 / 6), atol=1e-5, rtol=0)
    assert (sparsemax(z * 10) == 0).any()  # unlike softmax, exact zeros
    torch.testing.assert_close(attend(z, torch.eye(6, dtype=z.dtype), torch.eye(6, dtype=z.dtype),
                                      score="dot", temperature=1.0, weight="sparsemax"),
                               sparsemax(z))


@pytest.mark.parametrize("name", sorted(SCORES))
def test_every_score_owns_a_consistent_token_algebra(name):
    """For every registered score: the augmented tokens' dot product gives back the score's
    squared distance, its logits are the softmax of ``-d^2 / t`` up to a per-query
    constant, and the augmented score ranks the keys as the distance does."""
    score = SCORES[name]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(7, 4, generator=g, dtype=torch.float64)
    k = torch.randn(5, 4, generator=g, dtype=torch.float64)
    s = score.queries(q) @ score.keys(k).T
    prepared = score.prepare(q).unsqueeze(1)
    d2 = score.sq_dist(s, prepared)
    if score.translation_invariant:
        expected = torch.cdist(q, k).square()
    else:  # the chord between the directions
        expected = torch.cdist(q / q.norm(dim=1, keepdim=True),
                               k / k.norm(dim=1, keepdim=True)).square()
    torch.testing.assert_close(d2, expected)
    logits = score.logits(s.clone(), prepared, 0.7)
    torch.testing.assert_close(torch.softmax(logits, 1), torch.softmax(-expected / 0.7, 1))
    assert torch.equal(s.argmax(1), expected.argmin(1))
