"""The compiled nearest-member pass of k-medoids against torch's path, and the same fits by
both."""

import numpy as np
import pytest
import torch

from sktransformer.attention import group_argmax
from sktransformer.cluster._compiled import _nearest, nearest_members, nearest_members_available
from sktransformer.utils import ChunkRunner

from ..conftest import fits_with_and_without

COMPILED = nearest_members_available(torch.zeros(1, 1), torch.zeros(1, dtype=torch.int64))
pytestmark = pytest.mark.skipif(not COMPILED,
                                reason="numba is not installed: only torch's path exists")


def _problem(dtype, n=4001, d=7, k=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=dtype) + 100.0  # (far from the origin)
    labels = torch.randint(0, k - 1, (n,), generator=g)  # the last group stays empty
    shift = torch.full((d,), 100.0, dtype=dtype)
    vectors = torch.randn(k, d, generator=g, dtype=dtype) * 0.1
    return x, shift, vectors, labels


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("workers", [1, 3])
def test_nearest_members_are_torchs(dtype, workers):
    x, shift, vectors, labels = _problem(dtype)
    want_dist = (x - shift - vectors[labels]).square().sum(1)
    want = group_argmax(-want_dist, labels, len(vectors))
    with ChunkRunner(workers) as runner:
        dist, least, index = nearest_members(x, shift, vectors, labels, runner=runner)
    rtol = 1e-6 if dtype == torch.float32 else 1e-13  # (the sum over features reassociated)
    torch.testing.assert_close(dist, want_dist, rtol=rtol, atol=0)
    assert torch.equal(index, want) and index[-1] == -1
    assert torch.equal(least[:-1], dist[index[:-1]]) and least[-1] == torch.inf


def test_nearest_members_break_ties_by_the_lowest_index_across_spans():
    x, shift, vectors, labels = _problem(torch.float32, n=3000, k=3)
    x[500] = x[2999] = x[10] = x[1800]  # four copies of the same point, two in one span
    labels[500] = labels[2999] = labels[10] = labels[1800] = 1
    vectors[1] = x[10] - shift  # the group's vector: exactly at them
    with ChunkRunner(3) as runner:  # (spans [0, 1000), [1000, 2000), [2000, 3000))
        dist, least, index = nearest_members(x, shift, vectors, labels, runner=runner)
    assert index[1] == 10 and least[1] == 0 and dist[2999] == 0


def test_nearest_members_refuse_a_label_out_of_range():
    with pytest.raises(IndexError):
        nearest_members(torch.ones(3, 2), torch.zeros(2), torch.zeros(2, 2),
                        torch.tensor([0, 5, 1]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_pass_gives_torchs_fit(dtype, monkeypatch):
    from sktransformer import TransformerKMedoids

    fits = fits_with_and_without(_nearest._LOOPS, lambda: TransformerKMedoids(
        6, metric="sqeuclidean", max_iter=12, random_state=0, device="cpu"), dtype,
        monkeypatch)
    np.testing.assert_array_equal(fits[0].medoid_indices_, fits[1].medoid_indices_)
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
    assert fits[0].n_iter_ == fits[1].n_iter_
