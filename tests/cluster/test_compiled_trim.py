"""The compiled trimming pass and torch's path (``cluster._updates.Trim``) against their
definition, and the same fits by both."""

import math

import numpy as np
import pytest
import torch

from sktransformer.cluster import _updates
from sktransformer.cluster._compiled import _trim, trim_pass, trim_pass_available

from ..conftest import fits_with_and_without

COMPILED = trim_pass_available(torch.zeros(1), torch.zeros(1, dtype=torch.int64))


def _reference(dist, labels, n_groups, q, cutoff):
    """The pass by its definition, in numpy."""
    groups = labels if n_groups > 1 else np.zeros_like(labels)
    radius = np.full(n_groups, -np.inf, dist.dtype)
    for j in range(n_groups):
        members = np.sort(dist[groups == j])
        if len(members):
            rank = max(1, math.ceil(q * len(members) * (1 - 1e-9)))
            radius[j] = members[rank - 1]
    out = dist > radius[groups]
    trimmed = np.flatnonzero(out)
    if cutoff is None:
        return radius, trimmed, trimmed[:0], trimmed
    beyond_cut = dist > cutoff[groups]
    return (radius, trimmed, np.flatnonzero(~out & beyond_cut),
            np.flatnonzero(out & ~beyond_cut))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_groups", [1, 7])
@pytest.mark.parametrize("cutoff_scale, widen", [
    (None, None), (1.0, 0.9), (1.3, 0.9), (0.5, 0.9), (np.inf, 0.9),
    (1.0, 1.0),  # one point short of the radius beyond ``wide``: all points serve
], ids=["first", "near", "wider", "narrower", "nothing-trimmed", "one-short"])
@pytest.mark.parametrize("ties", [True, False])
def test_the_pass_and_torchs_path_are_their_definition(dtype, n_groups, cutoff_scale, widen, ties):
    rng = np.random.default_rng(0)
    n = 2000
    labels = rng.integers(0, n_groups, n)
    if n_groups > 1:
        labels[labels == n_groups - 1] = 0  # an empty group
    # integer-valued distances: ties at the radius
    dist = (rng.integers(0, 60, n) if ties else rng.random(n)).astype(dtype)
    q = 0.9
    first = _reference(dist, labels, n_groups, q, None)[0]
    cutoff = None if cutoff_scale is None else np.where(
        np.isfinite(first), first * cutoff_scale, 0).astype(dtype)
    want = _reference(dist, labels, n_groups, q, cutoff)
    cut = None if cutoff is None else torch.from_numpy(cutoff)
    dist, labels = torch.from_numpy(dist), torch.from_numpy(labels)
    marks = torch.where(dist > torch.from_numpy(want[0])[labels if n_groups > 1 else 0], -1,
                        labels)
    if COMPILED:
        marked = torch.empty(n, dtype=torch.int64)
        got = trim_pass(dist, labels, n_groups, q, cut, None if cut is None else cut * widen,
                        marked, torch.empty(n, dtype=torch.int64))
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b)
        np.testing.assert_array_equal(marked, marks)
    if widen in (None, _updates._WIDEN):  # torch's path, by the tail or by all points
        update = _updates.Trim(n_groups, 1 - q, "global" if n_groups == 1 else "per_cluster")
        update.cutoff = cut
        marked, trimmed, radius, near = update._mark(labels, dist, None)
        torch_path = (radius, trimmed, *update._crossed(labels, dist, radius, trimmed, near))
        for a, b in zip(torch_path, want):
            np.testing.assert_array_equal(a.numpy(), b)
        np.testing.assert_array_equal(marked, marks)


@pytest.mark.skipif(not COMPILED, reason="numba is not installed: only torch's path exists")
@pytest.mark.parametrize("trimming", ["global", "per_cluster"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_pass_gives_torchs_fit(trimming, dtype, monkeypatch):
    from sktransformer import TrimmedTransformerKMeans

    fits = fits_with_and_without(_trim._LOOPS, lambda: TrimmedTransformerKMeans(
        6, trim=0.1, trimming=trimming, n_init=1, max_iter=12, tol=0, random_state=0,
        device="cpu"), dtype, monkeypatch)
    for name in ("cluster_centers_", "labels_", "thresholds_", "inertia_"):
        np.testing.assert_array_equal(getattr(fits[0], name), getattr(fits[1], name))


@pytest.mark.skipif(not COMPILED, reason="numba is not installed: only torch's path exists")
@pytest.mark.parametrize("bad", [-1, 3])
def test_trim_pass_refuses_a_label_out_of_range(bad):
    labels = torch.tensor([0, 1, bad, 2])
    with pytest.raises(IndexError):
        trim_pass(torch.ones(4), labels, 3, 0.9, None, None, torch.empty(4, dtype=torch.int64),
                  torch.empty(4, dtype=torch.int64))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("mode", ["global", "per_cluster"])
def test_thresholds_are_the_farthest_kept_distance(weighted, mode):
    # the fitted thresholds come from the radius: the distance of a kept point
    g = torch.Generator().manual_seed(3)
    n, k = 600, 4
    labels = torch.randint(0, k - 1, (n,), generator=g)  # the last cluster stays empty
    dist = torch.rand(n, generator=g, dtype=torch.float64) * 10
    weight = None
    if weighted:  # every point of cluster 1 weighs nothing: none of them is kept
        weight = torch.rand(n, generator=g, dtype=torch.float64).masked_fill(labels == 1, 0)
    update = _updates.Trim(k, 0.1, mode)
    marked, trimmed, radius, _ = update._mark(labels, dist, weight)
    got = update._thresholds(labels, radius, trimmed)
    for j in range(k):
        members = labels == j if mode == "per_cluster" else torch.ones(n, dtype=torch.bool)
        kept = members & (marked >= 0)
        if not (members & (marked < 0)).any():
            want = torch.inf  # nothing trimmed: nothing flagged
        else:
            want = float(dist[kept].max()) if kept.any() else 0.0
        assert float(got[j]) == want
