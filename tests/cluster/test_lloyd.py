"""The chunked fast layer is the token-level circuit, layer for layer."""

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans

from sktransformer import RobustTransformerKMeans, TransformerKMeans, TrimmedTransformerKMeans
from sktransformer.cluster import KMeansCircuit, _lloyd

from . import reference


def _fast_layers(X, init, n_layers, *, rows, temperature=None, attention="euclidean",
                 sample_weight=None):
    Xt = torch.from_numpy(X)
    shift = Xt.mean(0)
    points = _lloyd.PointTokens(Xt, rows=rows, attention=attention, shift=shift)
    centers = torch.from_numpy(init) - shift
    labels = torch.empty(len(X), dtype=torch.long)
    min_dist = torch.empty(len(X), dtype=Xt.dtype)
    w = None if sample_weight is None else torch.from_numpy(sample_weight)
    out = []
    for _ in range(n_layers):
        sums, weight = _lloyd.layer(points, w, centers, labels=labels, min_dist=min_dist,
                                    temperature=temperature)
        centers = _lloyd.average(sums, weight, centers)
        out.append((labels.clone().numpy(), (centers + shift).numpy(), min_dist.clone().numpy()))
    return out


@pytest.mark.parametrize("rows", [7, 64, 10_000])
@pytest.mark.parametrize("attention", ["euclidean", "dot"])
@pytest.mark.parametrize("temperature", [None, 2.0])
def test_fast_layer_is_the_circuit(rows, attention, temperature):
    X, init = reference.blobs(scale=2.0)
    circuit = KMeansCircuit(3, 4, temperature=temperature, attention=attention,
                            center_update="softmax" if temperature is None else "linear")
    fast = _fast_layers(X, init, 4, rows=rows, temperature=temperature, attention=attention)
    for n_layers, (labels, centers, min_dist) in enumerate(fast, start=1):
        c_ref, l_ref = circuit(torch.from_numpy(X), torch.from_numpy(init), n_layers=n_layers)
        np.testing.assert_allclose(centers, c_ref.numpy(), rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(labels, l_ref.numpy())
        # min_dist is the squared distance to the assigned (input) center of the layer
        previous = init if n_layers == 1 else fast[n_layers - 2][1]
        expected = reference.sq_dist(X, previous)[np.arange(len(X)), labels]
        np.testing.assert_allclose(min_dist, expected,
                                   rtol=1e-9, atol=1e-9)


def test_weighted_layer_matches_weighted_reference():
    X, init = reference.blobs(scale=2.0)
    w = np.random.default_rng(0).uniform(0.1, 3.0, len(X))
    fast = _fast_layers(X, init, 3, rows=13, sample_weight=w)
    for (labels, centers, _), (l_ref, c_ref) in zip(fast, reference.lloyd(X, init, 3, w)):
        np.testing.assert_array_equal(labels, l_ref)
        np.testing.assert_allclose(centers, c_ref, rtol=1e-10)


# the CPU's arg-max (the pool) and a GPU's (torch.max), both run here on the CPU
ASSIGNS = pytest.mark.parametrize("assign", [
    _lloyd.hard_assign, lambda scores, out=None: _lloyd._max_over_centers(scores, out)],
    ids=["pool", "max"])


@ASSIGNS
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hard_assign_takes_the_first_of_tied_maxima(assign, dtype):
    # a (k, m) tile: one column per point
    scores = torch.tensor([[1.0, 3.0, 3.0, 0.0], [5.0, 1.0, 5.0, 1.0], [0.0, 1.0, 2.0, 9.0]],
                          dtype=dtype).T.contiguous()
    labels, best = assign(scores)
    assert labels.tolist() == [1, 0, 3]
    assert best.tolist() == [3.0, 5.0, 9.0]


@ASSIGNS
@pytest.mark.parametrize("shape", [(37, 500), (1, 9), (300, 3)])
def test_hard_assign_is_argmax_over_centers(assign, shape):
    scores = torch.randn(*shape, dtype=torch.float64)
    labels, best = assign(scores)
    np.testing.assert_array_equal(labels.numpy(), scores.argmax(0).numpy())
    torch.testing.assert_close(best, scores.amax(0))


@ASSIGNS
@pytest.mark.parametrize("shape", [(37, 500), (1, 9), (300, 3)])
def test_hard_assign_writes_into_the_buffers_it_is_given(assign, shape):
    scores = torch.randn(*shape, dtype=torch.float64)
    m = shape[1]
    labels, best = assign(scores)
    flat = (torch.full((m + 4,), -1), torch.zeros(m + 4, dtype=torch.float64))
    out = (flat[0][2:m + 2], flat[1][2:m + 2])
    assert assign(scores, out=out) is out
    assert torch.equal(out[0], labels) and torch.equal(out[1], best)
    assert flat[0][:2].eq(-1).all() and flat[0][m + 2:].eq(-1).all()  # nothing outside
    pooled = (torch.empty(1, m, 1, 1, dtype=torch.long),
              torch.empty(1, m, 1, 1, dtype=torch.float64))
    assign(scores, out=pooled)
    assert torch.equal(pooled[0].flatten(), labels) and torch.equal(pooled[1].flatten(), best)


def test_layers_reuse_their_spans_buffers():
    from sktransformer.utils import ChunkRunner
    X = torch.rand(1000, 5, dtype=torch.float64)
    points = _lloyd.PointTokens(X, rows=128)
    labels, min_dist = torch.empty(1000, dtype=torch.long), torch.empty(1000, dtype=X.dtype)
    centers = X[:4].clone()
    with ChunkRunner(2) as runner:
        first = _lloyd.layer(points, None, centers, labels=labels, min_dist=min_dist,
                             runner=runner)
        buffers = {key: [(c.tokens.data_ptr(), c.tile.data_ptr()) for c in chunks]
                   for key, chunks in points._cache.items()}
        again = _lloyd.layer(points, None, centers, labels=labels, min_dist=min_dist,
                             runner=runner)
    assert len(buffers) == 2  # one per span
    assert buffers == {key: [(c.tokens.data_ptr(), c.tile.data_ptr()) for c in chunks]
                       for key, chunks in points._cache.items()}
    # every chunk of a span, its last, partial one too, scores into the span's one tile
    assert all(len({tile for _, tile in chunks}) == 1 for chunks in buffers.values())
    assert all(torch.equal(a, b) for a, b in zip(first, again))  # fixed spans: same bits
    # a pass over all the rows (one span) reuses the buffers of the span from row 0
    whole = points._chunks(0, 1000, 4)
    assert whole[0].tokens.data_ptr() == points._chunks(0, 500, 4)[0].tokens.data_ptr()
    assert len(points._buffer_cache) == 2


def test_chunks_keep_their_views_of_the_label_buffers_a_fit_alternates():
    # each chunk keeps its views of a layer's labels and distances for the buffers it saw
    # last: run_layers alternates two label buffers, its final assignment takes new ones
    X = torch.rand(700, 3, dtype=torch.float64)
    points = _lloyd.PointTokens(X, rows=128)
    centers = X[:5].clone()
    want, want_dist = _lloyd.assign(_lloyd.PointTokens(X, rows=700), centers)
    dist = torch.empty(700, dtype=X.dtype)
    buffers = [torch.full((700,), -1, dtype=torch.long) for _ in range(3)]
    for labels in buffers[:2] + buffers[:2] + buffers[2:]:
        labels.fill_(-1)
        dist.fill_(-1.0)
        _lloyd.layer(points, None, centers, labels=labels, min_dist=dist)
        assert torch.equal(labels, want) and torch.allclose(dist, want_dist)
        chunks = points._cache[0, 700, 5]
        assert all(len(c._outs) <= 2 for c in chunks)  # (a third pair: the old ones go)
        assert all(c.outs(labels, dist)[0].data_ptr() == labels[c.sl].data_ptr()
                   for c in chunks)
    assert all(list(c._outs) == [(buffers[2].data_ptr(), dist.data_ptr())] for c in chunks)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_products_without_onednn_score_into_the_reused_tile(dtype, monkeypatch):
    # a fresh tile per chunk from torch.matmul, where oneDNN does not take the product
    # (no AVX-512, float64), raised a fit's peak memory and saved no time
    from sktransformer.attention import _matmul

    monkeypatch.setattr(_matmul, "_ENABLED", False)  # as on a CPU without AVX-512
    X = torch.rand(1000, 40, dtype=dtype)
    points = _lloyd.PointTokens(X, rows=300)
    keys = points.keys(X[:64].clone())  # width x k = 42 x 64: oneDNN's size, were it on
    chunks = [(c.sl, scores.data_ptr()) for c, scores in points.chunks(keys, 0, points.n)]
    tile = points._cache[0, 1000, 64][0].tile
    assert [sl.stop - sl.start for sl, _ in chunks] == [300, 300, 300, 100]
    assert all(ptr == tile.data_ptr() for sl, ptr in chunks if sl.stop - sl.start == 300)


@pytest.mark.parametrize("attention", ["euclidean", "dot", "cosine"])
def test_sq_dist_in_place_is_the_distance(attention):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(50, 4, generator=g, dtype=torch.float64)
    X[0] = 0
    points = _lloyd.PointTokens(X, rows=50, attention=attention)
    best = torch.randn(50, generator=g, dtype=torch.float64)
    chunk, = points._chunks(0, 50, 1)
    expected = points.sq_dist(chunk, best.clone())
    assert points.sq_dist(chunk, best, out=best) is best
    torch.testing.assert_close(best, expected)


@pytest.mark.parametrize("attention", ["euclidean", "dot", "cosine"])
@pytest.mark.parametrize("temperature", [1e-4, 0.5, 1e4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_soft_assign_is_the_softmax_over_centers(attention, temperature, dtype):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(300, 5, generator=g, dtype=dtype) * 3
    X[0] = 0  # a zero row (the cosine score's special case)
    points = _lloyd.PointTokens(X, rows=300, attention=attention)
    (chunk, scores), = points.chunks(points.keys(X[1:8]), 0, 300)
    # (the reference in float64, from the same scores: float32 logits of 1e4 times the
    # scores would carry their own rounding into it)
    exact = _lloyd.PointTokens(X.double(), rows=300, attention=attention)
    expected = torch.softmax(exact.logits(exact._chunks(0, 300, 7)[0],
                                          scores.to(torch.float64, copy=True), temperature),
                             dim=0).to(dtype)
    _, best = _lloyd.hard_assign(scores.clone())
    got = _lloyd.soft_assign(points, chunk, scores, best, temperature)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.sum(0), torch.ones(300, dtype=dtype))
    torch.testing.assert_close(got, expected, rtol=1e-4 if dtype == torch.float32 else 1e-9,
                               atol=1e-6 if dtype == torch.float32 else 1e-12)


def test_empty_cluster_is_relocated_as_sklearn_does():
    X, init = reference.blobs(scale=1.0)
    init = init.copy()
    init[3] = [100.0, 100.0, 100.0]  # attracts no point: empty after the first assignment
    ours = TransformerKMeans(4, init=init, n_init=1, max_iter=1, tol=0, device="cpu").fit(X)
    theirs = KMeans(4, init=init, n_init=1, max_iter=1, tol=0, algorithm="lloyd").fit(X)
    assert np.isfinite(ours.cluster_centers_).all()
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=1e-10)
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    # the relocated center is a data point: the one farthest from its center
    assert any(np.allclose(ours.cluster_centers_[3], x) for x in X)


def test_relocation_skips_the_excluded_points():
    # trimming's rule: an empty cluster moves onto the farthest point that is not an outlier
    X = torch.tensor([[0.0], [1.0], [2.0], [50.0], [9.0]], dtype=torch.float64)
    points = _lloyd.PointTokens(X, rows=4)
    labels = torch.zeros(5, dtype=torch.long)
    min_dist = X[:, 0] ** 2
    sums, weight = X.sum(0, keepdim=True).repeat(2, 1), torch.tensor([5.0, 0.0],
                                                                      dtype=torch.float64)
    sums[1] = 0
    empty, far = _lloyd.relocate_empty(points, None, sums, weight, labels, min_dist,
                                       excluded=torch.tensor([3]))
    assert empty.tolist() == [1] and far.tolist() == [4]  # 9, not the outlier at 50
    assert sums[1].tolist() == [9.0] and weight.tolist() == [4.0, 1.0]
    assert sums[0].tolist() == [X.sum() - 9.0]


@pytest.mark.parametrize("make", [
    lambda: TransformerKMeans(5, n_init=1, random_state=0),
    lambda: TrimmedTransformerKMeans(5, n_init=1, random_state=0),
    lambda: TrimmedTransformerKMeans(5, trimming="per_cluster", n_init=1, random_state=0),
    lambda: RobustTransformerKMeans(5, beta=1.0, n_init=1, random_state=0),
], ids=["kmeans", "trimmed", "trimmed-per-cluster", "robust"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_sums_give_the_same_fit(make, dtype, monkeypatch):
    # numba's loop (when installed) adds the same rows in the same order as index_add_
    # in the torch layers (plain Lloyd's here too, not the whole compiled loop)
    import sktransformer.cluster._compiled._scatter as scatter
    from sktransformer.cluster._compiled import _engine

    monkeypatch.setattr(_engine._LOOPS, "enabled", False)

    X = np.random.default_rng(0).normal(size=(3000, 6)).astype(dtype)
    w = np.random.default_rng(1).uniform(0.5, 2, 3000).astype(dtype)
    monkeypatch.setattr(scatter, "COMPILED_MIN_ELEMENTS", 0)  # every fit is large
    kernels = scatter._LOOPS.get()
    if kernels is None:
        pytest.skip("numba is not installed: only torch's path exists")
    calls = []
    monkeypatch.setattr(scatter._LOOPS, "_loops", tuple(
        lambda *a, f=f: calls.append(1) or f(*a) for f in kernels))
    fits = []
    for enabled in (True, False):
        monkeypatch.setattr(scatter._LOOPS, "enabled", enabled)
        est = make().set_params(device="cpu", tol=0, max_iter=15).fit(X, sample_weight=w)
        fits.append(est)
        assert bool(calls) == enabled  # the loop ran, then not at all
        calls.clear()
    np.testing.assert_array_equal(fits[0].cluster_centers_, fits[1].cluster_centers_)
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)


def test_large_fits_load_the_compiled_sums_and_smaller_ones_use_them_once_loaded(
        monkeypatch):
    import sktransformer.cluster._compiled._scatter as scatter

    def tokens(n):  # (16 token elements a row)
        return _lloyd.PointTokens(torch.zeros(n, 15), rows=64)

    small, tiny = scatter._LOADED_MIN_ELEMENTS // 16, scatter._LOADED_MIN_ELEMENTS // 32
    large = scatter.COMPILED_MIN_ELEMENTS // 16
    scatter._LOOPS.forget()
    try:
        assert not tokens(small).compiled
        assert not scatter._LOOPS.loaded  # a small fit loads nothing
        installed = scatter._LOOPS.get() is not None  # (loads it)
        assert tokens(large).compiled == installed
        assert tokens(small).compiled == installed  # loaded: nothing left to pay
        assert not tokens(tiny).compiled  # torch's index_add_ is faster there
        monkeypatch.setattr(scatter._LOOPS, "enabled", False)
        assert not tokens(large).compiled and not tokens(small).compiled
    finally:
        scatter._LOOPS.forget()


def test_layer_rows_bound_the_token_buffer_as_well_as_the_score_tile():
    from sktransformer.utils import chunk_rows

    n = 10**6
    assert _lloyd.layer_rows(n, 256, 16) == chunk_rows(n, 256)  # the tile is the wider
    wide = _lloyd.layer_rows(n, 2, 500)  # 2 clusters, 500 features: the tokens are wider
    assert wide == chunk_rows(n, 502) and wide * 2 < chunk_rows(n, 2) // 100
    assert _lloyd.layer_rows(n, 2, 0) == chunk_rows(n, 2)  # sparse: no dense tokens
    assert _lloyd.layer_rows(n, 2, 500, batch_size=100_000) == 100_000  # given: kept


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_distance_sums_are_exact_to_rounding_for_clusters_far_from_the_origin(dtype):
    # Two tight groups at +-1000: the data's mean (the points' shift) is near 0, so each
    # group is far from the origin, where |a|^2 + |b|^2 - 2 a.b of uncentered points cancels
    # 1e6 against differences of ~1 (in float32, errors of order 0.1 relative).
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(600, 3, generator=gen, dtype=torch.float64)
    X[:300] += 1000.0
    X[300:] -= 1000.0
    labels = (torch.arange(600) >= 300).long()
    w = torch.rand(600, generator=gen, dtype=torch.float64) + 0.5
    X, w = X.to(dtype).double(), w.to(dtype).double()  # (the rounded input is the truth)
    exact = torch.stack([(w[labels == labels[i]] * (X[labels == labels[i]] - X[i]).norm(dim=1)
                          ).sum() for i in range(600)])
    points = _lloyd.PointTokens(X.to(dtype), rows=64)
    got = _lloyd.distance_sums(points, labels, 2, w.to(dtype))
    rtol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got.double(), exact, rtol=rtol, atol=0)


def test_distance_sums_count_a_point_at_distance_zero_from_itself():
    X = torch.tensor([[0.1, 0.2], [0.1, 0.2], [3.0, 4.0]], dtype=torch.float32) + 1e3
    points = _lloyd.PointTokens(X, rows=1)
    got = _lloyd.distance_sums(points, torch.zeros(3, dtype=torch.long), 1)
    far = float(torch.tensor([2.9, 3.8]).norm())
    torch.testing.assert_close(got, torch.tensor([far, far, 2 * far]), rtol=1e-5, atol=0)


def test_passes_of_mkl_products_share_among_workers_from_less_work(monkeypatch):
    from sktransformer.cluster._base import _runner

    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    X = torch.zeros(100_000, 32)  # the benchmark's first configuration: 2.1e8 multiply-adds
    points = _lloyd.PointTokens(X, rows=8192)
    centers = torch.zeros(64, 32)
    for onednn, n_workers in ((True, 1), (False, 2)):
        monkeypatch.setattr(_lloyd, "uses_onednn", lambda a, b, onednn=onednn: onednn)
        assert points.onednn(points.keys(centers)) is onednn
        assert _runner(points, centers).n_workers == n_workers
    small = _lloyd.PointTokens(X[:20_000], rows=8192)  # 1.1e7: the calling thread
    assert _runner(small, centers[:16]).n_workers == 1


@pytest.mark.parametrize("sparse", [False, True])
def test_sq_distances_by_point_and_by_center(sparse):
    import scipy.sparse as sp

    from sktransformer.cluster._sparse import SparsePointTokens
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(300, 7, generator=gen, dtype=torch.float64)
    X[X < 0.5] = 0.0
    centers = torch.rand(5, 7, generator=gen, dtype=torch.float64)
    points = (SparsePointTokens(sp.csr_matrix(X.numpy()), "cpu", rows=64) if sparse
              else _lloyd.PointTokens(X, rows=64))  # (not shifted: centers as they are)
    exact = torch.cdist(X, centers).square()
    by_point = _lloyd.sq_distances(points, centers)
    by_center = _lloyd.sq_distances(points, centers, by_center=True)
    assert by_point.shape == (300, 5) and by_center.shape == (5, 300)
    torch.testing.assert_close(by_point, exact)
    assert torch.equal(by_center, by_point.T)  # the same numbers, laid out by center
