"""Hamerly's bounds (``algorithm="hamerly"``/``"auto"``) against the plain compiled loop:
the same labels and centers at every layer count, with weights, empty clusters, both
dtypes and one or two threads."""

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.utils._param_validation import InvalidParameterError

from sktransformer import TransformerKMeans
from sktransformer.cluster import _compiled
from sktransformer.cluster._compiled import _engine
from sktransformer.cluster._sparse import point_tokens


def _points(X):
    X = torch.from_numpy(X)
    return point_tokens(X, torch.device("cpu"), rows=256, attention="euclidean",
                        shift=X.mean(0))


def _blobs(n=3000, d=6, k=7, dtype=np.float64, seed=0):
    X, _ = make_blobs(n, n_features=d, centers=k, cluster_std=2.5, random_state=seed)
    return X.astype(dtype)


@pytest.mark.parametrize("bounds", ["always", "adaptive"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("max_iter", [1, 2, 5, 300])
def test_bounds_give_the_plain_loops_layers(bounds, dtype, weighted, max_iter):
    X = _blobs(dtype=dtype)
    points = _points(X)
    rng = np.random.default_rng(1)
    start = torch.from_numpy(X[rng.choice(len(X), 7, replace=False)]) - points.shift
    weight = (torch.from_numpy(rng.random(len(X)).astype(dtype)) if weighted else None)
    plain = _compiled.run_lloyd(points, weight, start.clone(), max_iter=max_iter, tol=0.0)
    fast = _compiled.run_lloyd(points, weight, start.clone(), max_iter=max_iter, tol=0.0,
                               bounds=bounds)
    assert torch.equal(plain[1], fast[1])
    assert plain[3] == fast[3]
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    torch.testing.assert_close(fast[0], plain[0], rtol=rtol, atol=rtol)
    assert fast[2] == pytest.approx(plain[2], rel=1e-5 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("bounds", ["always", "adaptive"])
def test_bounds_relocate_empty_clusters_as_the_plain_loop(bounds):
    X = _blobs(n=500, d=3, k=4)
    points = _points(X)
    far = np.full((2, 3), 1e3)  # (two centers no point joins: relocated after a layer)
    start = torch.from_numpy(np.vstack([X[:4], far])) - points.shift
    plain = _compiled.run_lloyd(points, None, start.clone(), max_iter=50, tol=0.0)
    fast = _compiled.run_lloyd(points, None, start.clone(), max_iter=50, tol=0.0,
                               bounds=bounds)
    assert torch.equal(plain[1], fast[1]) and plain[3] == fast[3]
    assert len(np.unique(fast[1].numpy())) == 6
    torch.testing.assert_close(fast[0], plain[0])


def test_bounds_split_rows_over_threads_as_one(monkeypatch):
    X = _blobs(n=9000, d=5, k=9)
    results = []
    for threads in (1, 2):
        monkeypatch.setattr(_engine, "_threads", lambda n, t=threads: t)
        km = TransformerKMeans(9, algorithm="hamerly", random_state=0, swaps=0).fit(X)
        results.append(km)
    assert np.array_equal(results[0].labels_, results[1].labels_)
    np.testing.assert_allclose(results[0].cluster_centers_, results[1].cluster_centers_,
                               rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["auto", "hamerly"])
def test_every_algorithm_fits_scikit_learns_lloyd(algorithm):
    X = _blobs(n=12_000, d=8, k=10, seed=3)  # (from 10,000 rows, "auto" takes the bounds)
    init = X[np.random.default_rng(0).choice(len(X), 10, replace=False)]
    ours = TransformerKMeans(10, init=init, n_init=1, algorithm=algorithm).fit(X)
    theirs = KMeans(10, init=init, n_init=1, algorithm="lloyd").fit(X)
    assert np.array_equal(ours.labels_, theirs.labels_)
    assert ours.n_iter_ == theirs.n_iter_
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=1e-10)
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-10)


def test_auto_takes_the_bounds_where_they_pay():
    dense = _points(_blobs(n=12_000))
    assert _engine.use_bounds(dense, "auto") == "adaptive"
    assert _engine.use_bounds(dense, "lloyd") is None
    assert _engine.use_bounds(_points(_blobs(n=500)), "auto") is None
    assert _engine.use_bounds(_points(_blobs(n=500)), "hamerly") == "always"


def test_adaptive_bounds_stay_on_only_where_a_bounded_pass_costs_less():
    from sktransformer.cluster._compiled._hamerly import _bounds_pay

    # shares of rows (scored, bounds made exact) and k d measured on uniform and
    # clustered data, with whether the bounded pass was the faster there: scores in
    # float64,
    assert not _bounds_pay(0.42, 0.62, 16 * 16, False)  # uniform, early: 1.4 plain passes
    assert not _bounds_pay(0.15, 0.25, 16 * 16, False)  # 1.1
    assert _bounds_pay(0.01, 0.02, 16 * 16, False)  # clustered: 0.3
    assert _bounds_pay(0.26, 0.41, 64 * 32, False)  # uniform, wider keys: 0.64
    assert not _bounds_pay(1.0, 0.85, 64 * 32, False)  # every row scored: 1.3
    assert _bounds_pay(0.43, 0.62, 128 * 64, False)  # 0.59
    # and in float32 (float64 points' scored copy)
    assert not _bounds_pay(0.424, 0.699, 16 * 16, True)  # uniform: 1.9
    assert _bounds_pay(0.039, 0.069, 16 * 16, True)  # clustered: 0.89
    assert _bounds_pay(0.104, 0.135, 64 * 32, True)  # clustered: 0.40
    assert not _bounds_pay(0.513, 0.703, 64 * 32, True)  # 1.4
    assert _bounds_pay(0.546, 0.679, 128 * 64, True)  # uniform: 0.94
    assert not _bounds_pay(1.0, 0.999, 256 * 128, True)  # 1.2


def test_hamerly_runs_large_dense_data_in_the_compiled_loop(monkeypatch):
    # from TORCH_MIN_ROWS rows the plain loop hands over to the torch layers; the bounds
    # stay compiled
    monkeypatch.setattr(_engine, "TORCH_MIN_ROWS", 1000)
    points = _points(_blobs(n=3000))
    assert not _compiled.lloyd_available(points)
    assert _compiled.lloyd_available(points, bounds="always")


def test_an_unknown_algorithm_is_rejected():
    with pytest.raises(InvalidParameterError, match="algorithm"):
        TransformerKMeans(3, algorithm="yinyang").fit(_blobs(n=50))


@pytest.mark.parametrize("bounds", ["always", "adaptive"])
def test_float32_scores_decide_only_where_they_can(bounds):
    # float64 points whose closest center float32 scores cannot tell on many rows: two
    # centers 2 apart along the first axis, every row ~100 from the origin along the
    # second (scores ~10^4, rounded by ~10^-3 in float32), and within 10^-3 of the
    # bisector; float64 tells them all
    rng = np.random.default_rng(0)
    n = 4000
    X = np.column_stack([rng.choice([-1.0, 1.0], n) * rng.uniform(1e-4, 1e-3, n),
                         100 + rng.random(n)])
    centers = np.array([[-1.0, 100.0], [1.0, 100.0]])
    truth = (X[:, 0] > 0).astype(np.int64)
    X32, C32 = X.astype(np.float32), centers.astype(np.float32)
    rough = np.argmax(X32 @ C32.T - 0.5 * (C32 ** 2).sum(1), axis=1)
    assert (rough != truth).sum() > 100  # (float32 scores alone err)
    points = point_tokens(torch.from_numpy(X), torch.device("cpu"), rows=256,
                          attention="euclidean", shift=torch.zeros(2, dtype=torch.float64))
    _, labels, _, _ = _compiled.run_lloyd(points, None, torch.from_numpy(centers),
                                          max_iter=0, tol=0.0, bounds=bounds)
    assert _engine._scored(points)[2].dtype == np.float32
    assert np.array_equal(labels.numpy(), truth)


def test_float64_points_are_scored_from_a_float32_copy_without_a_float64_one():
    X = _blobs(n=5000) + 50.0
    points = _points(X)
    start = torch.from_numpy(X[:7]) - points.shift
    _compiled.run_lloyd(points, None, start, max_iter=5, tol=0.0, bounds="adaptive")
    exact, shift, scored, x_sq = _engine._scored(points)
    assert scored.dtype == np.float32 and "_compiled_rows" not in points.__dict__
    assert np.shares_memory(exact, X)  # (the points, shifted as they are read)
    np.testing.assert_array_equal(shift, points.shift.numpy())
    np.testing.assert_array_equal(scored, (X - shift).astype(np.float32))
    np.testing.assert_allclose(x_sq, ((X - shift) ** 2).sum(1), rtol=1e-12)


def test_points_beyond_float32s_range_are_scored_in_float64():
    X = _blobs(n=2000) * 1e12  # (squares near float32's overflow)
    points = _points(X)
    start = torch.from_numpy(X[:7]) - points.shift
    plain = _compiled.run_lloyd(points, None, start.clone(), max_iter=10, tol=0.0)
    fast = _compiled.run_lloyd(points, None, start.clone(), max_iter=10, tol=0.0,
                               bounds="adaptive")
    assert _engine._scored(points)[2].dtype == np.float64
    assert torch.equal(plain[1], fast[1])
    torch.testing.assert_close(fast[0], plain[0], rtol=1e-10, atol=0)
