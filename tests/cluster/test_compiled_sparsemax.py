"""The compiled sparsemax pass of robust k-means against torch's path."""

import numpy as np
import pytest
import torch

from sktransformer.attention import group_sparsemax, group_sums
from sktransformer.cluster._compiled import _sparsemax, index_add_rows, sparsemax_sums
from sktransformer.utils import ChunkRunner

from ..conftest import fits_with_and_without

COMPILED = _sparsemax._LOOPS.get() is not None
pytestmark = pytest.mark.skipif(not COMPILED,
                                reason="numba is not installed: only torch's path exists")


def _torch_path(dist, labels, n_groups, scale, start, x, shift):
    p, tau = group_sparsemax(dist.to(torch.float64) * scale, labels, n_groups, start=start,
                             return_threshold=True)
    sums = index_add_rows(x.new_zeros(n_groups, x.shape[1]), labels, x, p.to(x.dtype),
                          shift=shift)
    return sums, group_sums(p, labels, n_groups).to(x.dtype), tau


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("start", ["none", "last", "high", "low"])
@pytest.mark.parametrize("ties", [False, True])
def test_sparsemax_sums_are_torchs(dtype, start, ties):
    g = torch.Generator().manual_seed(0)
    n, d, k = 3000, 5, 7
    labels = torch.randint(0, k - 1, (n,), generator=g)  # the last group stays empty
    dist = (torch.randint(0, 8, (n,), generator=g) if ties
            else torch.rand(n, generator=g) * 8).to(dtype)
    x, shift = torch.randn(n, d, generator=g, dtype=dtype), torch.randn(d, dtype=dtype)
    scale = -3.0
    guess = None
    if start != "none":
        _, tau = group_sparsemax(dist.to(torch.float64) * scale, labels, k,
                                 return_threshold=True)
        guess = {"last": tau, "high": tau + 1.0, "low": tau - 5.0}[start]
    want = _torch_path(dist, labels, k, scale, guess, x, shift)
    got = sparsemax_sums(dist, labels, k, scale, guess, x, shift,
                         torch.empty(n, dtype=torch.bool))
    # (float32: tight enough that a weight not rounded as torch rounds it shows)
    rtol = 1e-7 if dtype == torch.float32 else 1e-12
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=rtol, atol=rtol)
    assert got[1][:k - 1].sub(1).abs().max() < rtol and got[1][k - 1] == 0  # sums to 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sparsemax_sums_shared_among_workers_are_the_serial_ones(dtype):
    g = torch.Generator().manual_seed(1)
    n, d, k = 5001, 3, 4
    labels = torch.randint(0, k, (n,), generator=g)
    dist = (torch.rand(n, generator=g) * 8).to(dtype)
    x, shift = torch.randn(n, d, generator=g, dtype=dtype), torch.randn(d, dtype=dtype)
    serial = sparsemax_sums(dist, labels, k, -3.0, None, x, shift,
                            torch.empty(n, dtype=torch.bool))
    with ChunkRunner(3) as runner:
        shared = sparsemax_sums(dist, labels, k, -3.0, None, x, shift,
                                torch.empty(n, dtype=torch.bool), runner=runner)
    assert torch.equal(shared[2], serial[2])  # the same thresholds
    rtol = 1e-6 if dtype == torch.float32 else 1e-12  # (sums added in another order)
    for a, b in zip(shared[:2], serial[:2]):
        torch.testing.assert_close(a, b, rtol=rtol, atol=rtol)
    assert not torch.equal(shared[0], torch.zeros_like(shared[0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_pass_gives_torchs_fit(dtype, monkeypatch):
    from sktransformer import RobustTransformerKMeans

    fits = fits_with_and_without(_sparsemax._LOOPS, lambda: RobustTransformerKMeans(
        6, beta=1.0, n_init=1, max_iter=12, tol=0, random_state=0, device="cpu"), dtype,
        monkeypatch)
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
    np.testing.assert_allclose(fits[0].cluster_centers_, fits[1].cluster_centers_,
                               rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_sparsemax_sums_refuses_a_label_out_of_range():
    with pytest.raises(IndexError):
        sparsemax_sums(torch.ones(3), torch.tensor([0, 5, 1]), 2, -1.0, None,
                       torch.ones(3, 2), torch.zeros(2), torch.empty(3, dtype=torch.bool))


def test_robust_kmeans_of_data_at_1e30_stays_finite():
    """Squared distances of 1e60: each center takes about its nearest member (sparsemax is
    not scale-free), compiled and torch's update alike, never an infinite center (about
    one draw in six of these had one)."""
    from sktransformer import RobustTransformerKMeans

    rng = np.random.default_rng(0)
    for _ in range(20):
        X = rng.normal(size=(8, 3)) * 1e30
        for weight in (None, np.ones(len(X))):  # (None: the compiled update; else torch's)
            est = RobustTransformerKMeans(2, random_state=0, device="cpu").fit(
                X, sample_weight=weight)
            assert np.isfinite(est.cluster_centers_).all()
            assert np.isfinite(est.transform(X)).all()
