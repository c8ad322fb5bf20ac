"""The compiled Lloyd loop against the torch layers: the same labels and centers (up to
rounding) on dense and CSR data, with weights, empty clusters and both stops. (Against
scikit-learn's KMeans: tests/cluster/test_kmeans.py, whose fits run through the loop.)"""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.datasets import make_blobs

from sktransformer import SphericalTransformerKMeans, TransformerKMeans
from sktransformer.cluster import _compiled, _lloyd
from sktransformer.cluster._compiled import _engine
from sktransformer.cluster._sparse import point_tokens
from sktransformer.cluster._updates import Mean


def _points(X, attention="euclidean"):
    shift = None if sp.issparse(X) else torch.from_numpy(np.asarray(X)).mean(0)
    return point_tokens(X, torch.device("cpu"), rows=64, attention=attention, shift=shift)


def _both(points, weight, start, sphere=False, **kwargs):
    torch_run = _lloyd.run_layers(points, weight, start.clone(), update=Mean(sphere=sphere),
                                  verbose=1, **kwargs)  # (verbose: the torch layers)
    compiled = _compiled.run_lloyd(points, weight, start.clone(), sphere=sphere, **kwargs)
    return torch_run, compiled


def _data(sparse, dtype, n=700, d=12, seed=0):
    rng = np.random.default_rng(seed)
    X, _ = make_blobs(n, n_features=d, centers=6, random_state=seed)
    X = X.astype(dtype)
    if sparse:
        X[rng.random(X.shape) < 0.7] = 0
        X = sp.csr_matrix(X)
    return X


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("attention", ["euclidean", "dot"])
def test_compiled_loop_matches_torch_layers(sparse, dtype, weighted, attention):
    X = _data(sparse, dtype)
    points = _points(X, attention)
    assert _compiled.lloyd_available(points)
    rng = np.random.default_rng(1)
    rows = rng.choice(X.shape[0], 9, replace=False)
    start = torch.from_numpy(X[rows].toarray() if sparse else X[rows]) - points.shift
    weight = torch.from_numpy(rng.random(X.shape[0]).astype(dtype)) if weighted else None
    (c1, l1, i1, n1), (c2, l2, i2, n2) = _both(points, weight, start, max_iter=300,
                                                tol=1e-8)
    assert n1 == n2 and n1 > 2
    assert torch.equal(l1, l2)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    torch.testing.assert_close(c2, c1, rtol=rtol, atol=rtol)
    assert i2 == pytest.approx(i1, rel=rtol)


@pytest.mark.parametrize("sparse", [False, True])
def test_compiled_loop_relocates_empty_clusters_as_the_torch_layers(sparse):
    # two starting centers far from every point: both clusters are empty after a layer
    X = _data(sparse, np.float64, n=300, d=4)
    points = _points(X)
    dense = X.toarray() if sparse else X
    start = torch.from_numpy(np.vstack([dense[:4], np.full((2, 4), 1e3)])) - points.shift
    (c1, l1, _, n1), (c2, l2, _, n2) = _both(points, None, start, max_iter=50, tol=0)
    assert torch.equal(l1, l2) and n1 == n2
    assert len(np.unique(l2.numpy())) == 6  # (the relocated clusters kept members)
    torch.testing.assert_close(c2, c1)


def test_compiled_loop_stops_at_max_iter_with_labels_of_the_final_centers():
    X = _data(False, np.float64, n=2000, d=8)
    points = _points(X)
    start = torch.from_numpy(X[:20].copy()) - points.shift
    (c1, l1, i1, n1), (c2, l2, i2, n2) = _both(points, None, start, max_iter=2, tol=0)
    assert n1 == n2 == 2
    assert torch.equal(l1, l2)
    nearest = torch.cdist(torch.from_numpy(X) - points.shift, c2).argmin(1)
    assert torch.equal(nearest, l2)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weighted", [False, True])
def test_compiled_spherical_layers_match_torchs(sparse, dtype, weighted):
    """The means scaled to unit norm in the loop: the torch layers' spherical k-means
    (unit rows, as SphericalTransformerKMeans makes them), with an empty cluster."""
    from sklearn.preprocessing import normalize

    X = _data(False, dtype)
    if sparse:  # (a third of the entries zero: rows far from the axes and from each other,
        # where the 70% of _data leaves copies of axis vectors, tied within rounding)
        X[np.random.default_rng(3).random(X.shape) < 0.3] = 0
        X = sp.csr_matrix(X)
    X = normalize(X)
    points = point_tokens(X, torch.device("cpu"), rows=64, attention="euclidean")
    dense = X.toarray() if sparse else X
    rng = np.random.default_rng(2)
    far = np.zeros((1, dense.shape[1]), dtype)
    far[0, 0] = -1.0  # (a unit center no point is near: an empty cluster, relocated)
    start = torch.from_numpy(np.vstack([dense[rng.choice(len(dense), 8, replace=False)],
                                        far]))
    weight = torch.from_numpy(rng.random(X.shape[0]).astype(dtype)) if weighted else None
    (c1, l1, i1, n1), (c2, l2, i2, n2) = _both(points, weight, start, sphere=True,
                                                max_iter=300, tol=1e-8)
    assert n1 == n2 and n1 > 2
    assert torch.equal(l1, l2)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    torch.testing.assert_close(c2, c1, rtol=rtol, atol=rtol)
    torch.testing.assert_close(c2.norm(dim=1), torch.ones(9, dtype=c2.dtype))
    assert i2 == pytest.approx(i1, rel=rtol)


def test_the_compiled_loop_serves_hard_layers_only(monkeypatch):
    calls = []
    real = _lloyd.run_lloyd
    monkeypatch.setattr(_lloyd, "run_lloyd", lambda *a, **k: calls.append(1) or real(*a, **k))
    X = _data(False, np.float64)
    TransformerKMeans(4, random_state=0, swaps=0, device="cpu").fit(X)
    SphericalTransformerKMeans(4, random_state=0, device="cpu").fit(X)
    assert len(calls) == 2
    TransformerKMeans(4, random_state=0, temperature=1.0, device="cpu").fit(X)
    assert len(calls) == 2  # (soft layers run in torch)


@pytest.mark.parametrize("sparse", [False, True])
def test_threads_split_the_rows_and_sum_in_order(sparse):
    # the loop gives the same fit with one thread and with several (CSR: the threads' sums
    # are added by column blocks)
    X = _data(sparse, np.float64, n=9000, d=6)
    points = _points(X)
    start = torch.from_numpy(X[:7].toarray() if sparse else X[:7].copy()) - points.shift
    runs = []
    for rows_per_thread in (10**9, 1000):
        _engine._ROWS_PER_THREAD = rows_per_thread
        try:
            runs.append(_compiled.run_lloyd(points, None, start.clone(), max_iter=100, tol=0))
        finally:
            _engine._ROWS_PER_THREAD = 2048
    assert torch.equal(runs[0][1], runs[1][1])
    torch.testing.assert_close(runs[0][0], runs[1][0])


@pytest.mark.parametrize("weighted", [False, True])
def test_compiled_swap_trials_match_torchs(weighted, monkeypatch):
    from sktransformer.cluster import _swaps

    # a poor local optimum: two centers in one blob, one across two others
    X, _ = make_blobs(600, centers=[[0, 0], [10, 0], [12, 0], [0, 10]], cluster_std=0.5,
                      random_state=0)
    points = _points(X)
    start = torch.tensor([[0.0, 9.5], [0.0, 10.5], [11.0, 0.0], [0.0, 0.0]]) - points.shift
    w = (torch.from_numpy(np.random.default_rng(0).uniform(0.5, 2, 600))
         if weighted else None)
    centers = _compiled.run_lloyd(points, w, start.double(), max_iter=100, tol=0)[0]
    ours = _swaps._trials(points, w, centers, 3)
    monkeypatch.setattr(_engine._LOOPS, "enabled", False)
    theirs = _swaps._trials(points, w, centers, 3)
    assert len(ours) == len(theirs) >= 1
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b)


def test_swaps_repair_a_poor_local_optimum():
    X, _ = make_blobs(600, centers=[[0, 0], [10, 0], [12, 0], [0, 10]], cluster_std=0.5,
                      random_state=0)
    init = np.array([[0.0, 9.5], [0.0, 10.5], [11.0, 0.0], [0.0, 0.0]])
    stuck = TransformerKMeans(4, init=init, n_init=1, swaps=0, device="cpu").fit(X)
    swapped = TransformerKMeans(4, init=init, n_init=1, swaps=4, device="cpu").fit(X)
    assert swapped.inertia_ < 0.5 * stuck.inertia_
    assert len(np.unique(swapped.predict([[10, 0], [12, 0]]))) == 2


@pytest.mark.parametrize("compiled", [True, False])
def test_swaps_merge_two_centers_of_a_wide_cluster(compiled, monkeypatch):
    # in 20 dimensions: a wide cluster holding two centers and two tight clusters sharing
    # one. Sending either wide center's members to the other costs more than splitting the
    # tight pair saves; merging the two wide centers (Ward's cost) costs less.
    rng = np.random.default_rng(0)
    d = 20
    a, b = np.eye(d)[0] * 10 + np.eye(d)[1] * 3.0, np.eye(d)[0] * 10 - np.eye(d)[1] * 3.0
    X = np.concatenate([1.5 * rng.standard_normal((500, d)),
                        a + 0.5 * rng.standard_normal((80, d)),
                        b + 0.5 * rng.standard_normal((80, d))])
    init = np.stack([1.2 * np.eye(d)[2], -1.2 * np.eye(d)[2], np.eye(d)[0] * 10])
    monkeypatch.setattr(_engine._LOOPS, "enabled", compiled)
    stuck = TransformerKMeans(3, init=init, n_init=1, swaps=0, device="cpu").fit(X)
    swapped = TransformerKMeans(3, init=init, n_init=1, swaps=3, device="cpu").fit(X)
    assert stuck.predict([a])[0] == stuck.predict([b])[0]
    assert swapped.predict([a])[0] != swapped.predict([b])[0]
    assert np.bincount(swapped.labels_[:500]).max() >= 490  # (a few wide tails stray)
    assert swapped.inertia_ < stuck.inertia_


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weighted", [False, True])
def test_compiled_seeding_picks_torchs_rows(dtype, weighted, monkeypatch):
    from sktransformer.cluster._init import kmeans_plusplus

    X = _data(False, dtype, n=900, d=7)
    points = _points(X)
    w = (torch.from_numpy(np.random.default_rng(0).uniform(0.5, 2, 900).astype(dtype))
         if weighted else None)
    runs = []
    for enabled in (True, False):
        monkeypatch.setattr(_engine._LOOPS, "enabled", enabled)
        generator = torch.Generator().manual_seed(3)
        runs.append(kmeans_plusplus(points, 9, generator=generator, sample_weight=w))
    assert torch.equal(runs[0][1], runs[1][1])
    torch.testing.assert_close(runs[0][0], runs[1][0])


_FRESH = """
import numpy as np, scipy.sparse as sp
from sktransformer import TransformerKMeans
from sktransformer.cluster._compiled import _engine
rng = np.random.default_rng(0)
for rows_per_thread in (10**9, 100):  # one thread, then a parallel pass
    _engine._ROWS_PER_THREAD = rows_per_thread
    for dtype in (np.float64, np.float32):
        X = rng.normal(size=(600, 5)).astype(dtype)
        for data in (X, sp.csr_matrix(np.where(X > 0.5, X, 0))):
            km = TransformerKMeans(4, random_state=0, device="cpu").fit(data)
            assert np.isfinite(km.inertia_)
print("ok")
"""


def test_a_fresh_process_runs_the_cached_loops():
    # numba's cache: the first process writes it (or this one did), the next loads it.
    # (A cached loop that called a parallel function crashed there; see _lloyd.py.)
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True,
                             timeout=900)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip().endswith("ok")


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_assignment_matches_torchs(sparse, dtype, monkeypatch):
    X = _data(sparse, dtype, n=5000, d=9)
    points = _points(X)
    centers = torch.from_numpy(np.random.default_rng(2).normal(size=(11, 9)).astype(dtype))
    ours = _lloyd.assign(points, centers)
    monkeypatch.setattr(_engine._LOOPS, "enabled", False)
    theirs = _lloyd.assign(points, centers)
    assert torch.equal(ours[0], theirs[0])
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-4 if dtype == np.float32 else 1e-9,
                               atol=1e-4 if dtype == np.float32 else 1e-9)


def test_threads_follow_threadpoolctls_openmp_limit():
    from threadpoolctl import threadpool_limits

    assert _engine._threads(10**7) == min(torch.get_num_threads(), _engine._threads(10**7))
    with threadpool_limits(1, user_api="openmp"):
        assert _engine._threads(10**7) == 1
    assert _engine._threads(100) == 1  # (too few rows to share)


def test_a_fit_keeps_torchs_thread_count_from_omp_num_threads():
    # numba's OpenMP layer sets the runtime it shares with torch to every core when it
    # starts: the count OMP_NUM_THREADS gave torch is put back
    code = ("import numpy as np, torch\n"
            "from sktransformer import TransformerKMeans\n"
            "TransformerKMeans(3, random_state=0).fit(np.random.rand(20000, 3))\n"
            "print(torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "1"


def test_large_dense_lloyd_fits_with_many_center_coordinates_run_the_torch_layers():
    # (where their large tiles and two workers measured faster than the plain loop's
    # chunks; the bounds' loop, scoring in float32, stays compiled)
    small = _points(np.zeros((100, 2)))
    large = _points(np.zeros((_engine.TORCH_MIN_ROWS, 2)))
    assert _compiled.lloyd_available(small) and not _compiled.lloyd_available(large)
    wide = _engine.TORCH_MIN_WIDTH // 2
    assert _compiled.lloyd_available(large, n_clusters=wide - 1)
    assert not _compiled.lloyd_available(large, n_clusters=wide)
    assert _engine.use_bounds(large, "lloyd") is None
    assert _engine.use_bounds(large, "auto") == "adaptive"
    assert _compiled.lloyd_available(large, n_clusters=wide, bounds="adaptive")


def test_large_float32_fits_run_the_loop_whatever_their_center_coordinates():
    large = _points(np.zeros((_engine.TORCH_MIN_ROWS, 2), dtype=np.float32))
    assert _compiled.lloyd_available(large, n_clusters=_engine.TORCH_MIN_WIDTH)
    assert _engine.use_bounds(large, "auto") == "adaptive"


def test_large_fits_whose_copy_is_too_large_run_the_torch_layers(monkeypatch):
    large = _points(np.zeros((_engine.TORCH_MIN_ROWS, 2)))
    assert _compiled.lloyd_available(large, n_clusters=2)
    monkeypatch.setattr(_engine, "TORCH_MIN_BYTES", large.n * 2 * 8)
    assert not _compiled.lloyd_available(large, n_clusters=2)
    assert _engine.use_bounds(large, "auto") == "adaptive"  # (its float32 copy: half)
    monkeypatch.setattr(_engine, "TORCH_MIN_BYTES", large.n * 2 * 4)
    assert _engine.use_bounds(large, "auto") is None
    sparse = _points(sp.csr_matrix((_engine.TORCH_MIN_ROWS, 2)))
    assert _compiled.lloyd_available(sparse)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_the_shifted_copy_and_its_norms_are_the_point_tokens(dtype, n_threads, monkeypatch):
    X = _data(False, dtype, n=5000) + 100  # (far from the origin: the shift matters)
    lazy = _points(X)
    reference = _points(X)
    monkeypatch.setattr(_engine, "_threads", lambda n: n_threads)
    shifted, x_sq = _engine._shifted(lazy)
    np.testing.assert_array_equal(shifted, X - reference.shift.numpy())
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(x_sq, reference.x_sq.numpy(), rtol=rtol)
    assert np.shares_memory(lazy.x_sq.numpy(), x_sq)  # (the point tokens' now)
    # norms made first by the torch layers are the ones kept
    reference.x_sq  # noqa: B018
    assert np.shares_memory(_engine._shifted(reference)[1], reference.x_sq.numpy())


def test_the_final_assignment_of_a_run_is_reused_wherever_the_points_are(monkeypatch):
    monkeypatch.setattr(_engine, "TORCH_MIN_ROWS", 100)  # (the torch layers' size)
    X = _data(False, np.float64)
    points = _points(X)
    start = torch.from_numpy(X[:6]) - points.shift
    centers, labels, _, _ = _compiled.run_lloyd(points, None, start, max_iter=50, tol=0.0,
                                                bounds="always")
    assert not _compiled.lloyd_available(points)
    reused, dist = _compiled.assign(points, centers)
    assert reused is labels
    torch_labels, torch_dist = _lloyd.assign(points, centers.clone())  # (not reused)
    assert torch.equal(torch_labels, labels)
    torch.testing.assert_close(torch_dist, dist, rtol=1e-9, atol=1e-9)


def test_the_loops_run_in_parallel_only_their_prange():
    # numba's other parallel transforms made a team of each array expression, even in a
    # loop run on one thread; that team's spinning slowed fits on a loaded machine 2-20x
    from numba.core.cpu import ParallelOptions

    from sktransformer.cluster._compiled import _hamerly, _mixture
    from sktransformer.cluster._compiled import _lloyd as compiled

    loops = [compiled.dense_loop, compiled.csr_loop, compiled.shifted,
             compiled.shifted_single, compiled.moments, _hamerly.hamerly_loop,
             _mixture.log_likelihoods]
    for loop in loops:
        options = ParallelOptions(loop.targetoptions["parallel"])
        assert options.prange
        assert not any([options.comprehension, options.reduction, options.inplace_binop,
                        options.setitem, options.numpy, options.stencil, options.fusion])
    # the options hold for every signature (a dict is emptied by the first compilation)
    import numba

    loop = numba.jit(**_hamerly.hamerly_loop.targetoptions)(_hamerly.hamerly_loop.py_func)
    for dtype in (np.float64, np.float32):
        X = _data(False, dtype, n=100, d=3)
        loop(X, np.zeros(0), X, (X ** 2).sum(1), np.ones(100, dtype), X[:4].copy(), 3, 0.0,
             2, np.empty(100, np.int64), np.empty(100, dtype), True)
    assert len(loop.signatures) == 2
    for signature in loop.signatures:
        parfors = loop.get_metadata(signature)["parfor_diagnostics"].initial_parfors
        assert len(parfors) == 2  # (the pass's prange and the final distances')


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_compiled_moments_are_torchs(dtype, monkeypatch):
    from sktransformer.cluster import _base

    X = torch.from_numpy(_data(False, dtype, n=999) + 1e3)  # (far from 0: cancellation)
    mean, mean_var = _compiled.mean_and_mean_variance(X)
    assert mean.dtype == X.dtype
    assert _compiled.mean_and_mean_variance(X, variance=False)[1] == 0.0
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(mean.numpy(), X.double().mean(0).numpy(), rtol=rtol)
    np.testing.assert_allclose(mean_var, X.double().var(0, correction=0).mean().item(),
                               rtol=1e-4 if dtype == np.float32 else 1e-10)
    # over two threads' spans: the same, up to the order of the sums
    monkeypatch.setattr(_engine, "_threads", lambda n: 2)
    two_mean, two_var = _compiled.mean_and_mean_variance(X)
    np.testing.assert_allclose(two_mean.numpy(), mean.numpy(), rtol=rtol)
    assert two_var == pytest.approx(mean_var, rel=1e-5 if dtype == np.float32 else 1e-12)
    # the fit's helper takes them for CPU data, torch's passes elsewhere
    assert _base._mean_and_mean_variance(X, 64)[1] == two_var
    assert _compiled.mean_and_mean_variance(X[:, ::2]) is None  # (not contiguous)
    monkeypatch.setattr(_engine._LOOPS, "enabled", False)
    assert _compiled.mean_and_mean_variance(X) is None
    torch_mean, torch_var = _base._mean_and_mean_variance(X, 64)
    torch.testing.assert_close(torch_mean, mean)
    assert torch_var == pytest.approx(mean_var, rel=1e-4 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_fits_one_pass_finds_the_extremes_and_what_is_not_finite(dtype, n_threads,
                                                                   monkeypatch):
    from sktransformer.cluster import _base

    monkeypatch.setattr(_engine, "_threads", lambda n: n_threads)
    X = _data(False, dtype, n=4999) - 3.0
    X[1234, 2] = -40.0  # (the largest magnitude, negative, inside a chunk of thread 0)
    mean, mean_var, largest = _compiled.summary(X)
    assert largest == 40.0
    np.testing.assert_allclose(mean, X.astype(np.float64).mean(0),
                               rtol=1e-6 if dtype == np.float32 else 1e-12)
    assert _compiled.summary(X, variance=False)[1] == 0.0
    for bad, message in [(np.nan, "contains NaN"), (np.inf, "contains infinity"),
                         (-np.inf, "contains infinity")]:
        Y = X.copy()
        Y[4000, 1] = bad  # (in thread 1's span with two)
        assert not np.isfinite(_compiled.summary(Y)[0]).all()
        with pytest.raises(ValueError, match=message):
            _base._checked_for_fit(TransformerKMeans(), Y, variance=True)
    big = X * np.array(1e150 if dtype == np.float64 else 1e18, dtype=dtype)
    with pytest.raises(ValueError, match="overflow"):
        _base._checked_for_fit(TransformerKMeans(), big, variance=True)
    found = _base._checked_for_fit(TransformerKMeans(), X, variance=True)
    np.testing.assert_array_equal(found[0], mean)
    assert found[1] == mean_var
