"""Full Lloyd on dask arrays (``cluster/_dask.py``), checked against the in-memory fit.

These run on Dask's synchronous scheduler, in this process; ``tests/test_dask.py`` runs the
same fits on a LocalCluster of worker processes.
"""

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from sktransformer import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)

dask = pytest.importorskip("dask", reason="dask is in the test extra")
da = pytest.importorskip("dask.array", reason="dask is in the test extra")


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(6000, 5, centers=6, cluster_std=2.5, random_state=0)
    return X, X[:6].copy()


def _same_fit(a, b, X):
    np.testing.assert_allclose(b.cluster_centers_, a.cluster_centers_, rtol=0, atol=1e-10)
    assert b.n_iter_ == a.n_iter_
    np.testing.assert_array_equal(b.labels_.compute(), a.labels_)
    assert b.inertia_ == pytest.approx(a.inertia_, rel=1e-12)


ESTIMATORS = [
    lambda init: TransformerKMeans(6, init=init, device="cpu"),
    lambda init: TransformerKMeans(6, init=init, temperature=3.0, device="cpu", max_iter=40),
    lambda init: TransformerKMeans(6, init=init, attention="dot", device="cpu"),
    lambda init: SphericalTransformerKMeans(6, init=init, device="cpu"),
    lambda init: TrimmedTransformerKMeans(6, init=init, trim=0.1, device="cpu"),
]


@pytest.mark.parametrize("make", ESTIMATORS, ids=["hard", "soft", "dot", "spherical", "trim"])
@pytest.mark.parametrize("weighted", [False, True])
def test_dask_fit_equals_the_in_memory_fit_from_the_same_centers(blobs, make, weighted):
    X, init = blobs
    w = np.random.default_rng(1).uniform(0.1, 2.0, len(X)) if weighted else None
    a = make(init).fit(X, sample_weight=w)
    dw = None if w is None else da.from_array(w, chunks=1000)
    b = make(init).fit(da.from_array(X, chunks=(700, 5)), sample_weight=dw)
    _same_fit(a, b, X)
    if hasattr(a, "thresholds_"):
        np.testing.assert_allclose(b.thresholds_, a.thresholds_, rtol=1e-12)


def test_an_empty_cluster_is_relocated_as_in_memory(blobs):
    X, init = blobs
    init = init.copy()
    init[[2, 4]] = 1e3  # two centers no point is closest to
    for est in (TransformerKMeans(6, init=init, device="cpu"),
                TrimmedTransformerKMeans(6, init=init, trim=0.05, device="cpu")):
        a = est.fit(X)
        centers = a.cluster_centers_.copy(), a.labels_.copy(), a.n_iter_, a.inertia_
        b = est.fit(da.from_array(X, chunks=500))
        np.testing.assert_allclose(b.cluster_centers_, centers[0], atol=1e-10)
        np.testing.assert_array_equal(b.labels_.compute(), centers[1])
        assert (b.n_iter_, b.inertia_) == (centers[2], pytest.approx(centers[3], rel=1e-12))
        assert np.abs(b.cluster_centers_).max() < 100  # both moved onto data points


def test_trimming_threshold_is_exact_with_ties_and_many_points():
    # integer data: many points share each distance, so the selection ends on a tie
    rng = np.random.default_rng(0)
    X = rng.integers(0, 4, size=(20000, 2)).astype(float)
    X[:300] += 50  # outliers
    init = np.array([[0.0, 0.0], [3.0, 3.0], [0.0, 3.0]])
    a = TrimmedTransformerKMeans(3, trim=0.1, init=init, device="cpu").fit(X)
    b = TrimmedTransformerKMeans(3, trim=0.1, init=init, device="cpu").fit(
        da.from_array(X, chunks=3000))
    np.testing.assert_array_equal(b.labels_.compute(), a.labels_)
    np.testing.assert_allclose(b.thresholds_, a.thresholds_, rtol=1e-12)
    assert (b.labels_ == -1).sum().compute() == (a.labels_ == -1).sum() > 0


def test_cluster_initialization_is_as_good_as_in_memory():
    # k-means|| + k-means++ on the candidates against greedy k-means++, over seeds
    X, _ = make_blobs(8000, 6, centers=12, cluster_std=1.0, random_state=3)
    dX = da.from_array(X, chunks=1000)
    ratios = []
    for seed in range(4):
        a = TransformerKMeans(12, random_state=seed, device="cpu").fit(X)
        b = TransformerKMeans(12, random_state=seed, device="cpu").fit(dX)
        ratios.append(b.inertia_ / a.inertia_)
        again = TransformerKMeans(12, random_state=seed, device="cpu").fit(dX)
        np.testing.assert_array_equal(again.cluster_centers_, b.cluster_centers_)
    assert np.mean(ratios) < 1.02, ratios


def test_a_round_of_k_means_parallel_may_draw_nothing():
    # l = 2k = 2 expected draws per round: about one round in seven draws no row
    X = da.from_array(np.random.default_rng(0).normal(size=(60, 2)), chunks=20)
    for seed in range(20):
        est = TransformerKMeans(1, random_state=seed, device="cpu").fit(X)
        np.testing.assert_allclose(est.cluster_centers_[0], X.mean(0).compute(), atol=1e-12)


def test_random_rows_are_drawn_in_proportion_to_the_weights():
    from sktransformer.cluster import _dask

    X = np.arange(5.0)[:, None]
    w = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    est = TransformerKMeans(1, device="cpu")
    data = _dask.Blocks(da.from_array(X, chunks=2), da.from_array(w, chunks=2))
    fitter = _dask._Fitter(est, data, {}, {"update": "mean"}, np.zeros(1), X.dtype, w.sum())
    generator = __import__("torch").Generator().manual_seed(0)
    draws = [fitter._random_rows(generator, 1)[0][0, 0] for _ in range(300)]
    frequency = np.bincount(np.asarray(draws, int), minlength=5) / len(draws)
    np.testing.assert_allclose(frequency, w / w.sum(), atol=0.07)
    assert frequency[0] == 0
    with pytest.raises(ValueError, match="only 4 rows have a positive weight"):
        TransformerKMeans(5, init="random", device="cpu").fit(
            da.from_array(X, chunks=2), sample_weight=w)


def test_trimmed_initialization_ignores_far_outliers():
    X, _ = make_blobs(4000, 2, centers=4, cluster_std=0.5, random_state=0)
    X[:40] = np.random.default_rng(0).uniform(200, 300, size=(40, 2))
    est = TrimmedTransformerKMeans(4, trim=0.02, random_state=0, device="cpu")
    est.fit(da.from_array(X, chunks=500))
    assert np.abs(est.cluster_centers_).max() < 50
    labels = est.labels_.compute()
    assert (labels[:40] == -1).all()


def test_fitted_model_maps_over_blocks_lazily(blobs):
    X, init = blobs
    dX = da.from_array(X, chunks=1000)
    est = TransformerKMeans(6, init=init, temperature=2.0, device="cpu").fit(dX)
    for method, shape in (("predict", (len(X),)), ("transform", (len(X), 6)),
                          ("predict_proba", (len(X), 6))):
        out = getattr(est, method)(dX)
        assert isinstance(out, da.Array) and out.shape == shape
        np.testing.assert_allclose(out.compute(), getattr(est, method)(X), rtol=1e-12)
    assert est.score(dX) == pytest.approx(est.score(X), rel=1e-12)
    labels = est.fit_predict(dX)
    assert isinstance(labels, da.Array)
    assert isinstance(est.fit_transform(dX), da.Array)
    trimmed = TrimmedTransformerKMeans(6, init=init, device="cpu").fit(X)
    np.testing.assert_array_equal(trimmed.predict(dX).compute(), trimmed.predict(X))


def test_float32_stays_float32_and_dataframes_keep_their_names(blobs):
    dd = pytest.importorskip("dask.dataframe", reason="dask[dataframe] is optional")
    pd = pytest.importorskip("pandas")
    X, init = blobs
    est = TransformerKMeans(6, init=init.astype(np.float32), device="cpu")
    est.fit(da.from_array(X.astype(np.float32), chunks=1000))
    assert est.cluster_centers_.dtype == np.float32
    frame = dd.from_pandas(pd.DataFrame(X, columns=list("abcde")), npartitions=4)
    est = TransformerKMeans(6, init=init, device="cpu").fit(frame)
    assert list(est.feature_names_in_) == list("abcde")
    assert est.labels_.shape == (len(X),)


@pytest.mark.parametrize("est", [
    RobustTransformerKMeans(2, device="cpu"),
    TransformerKMedoids(2, device="cpu"),
    TrimmedTransformerKMeans(2, trimming="per_cluster", device="cpu"),
])
def test_unsupported_variants_name_the_supported_ones(est):
    X = da.ones((20, 2), chunks=10)
    with pytest.raises(ValueError, match="SphericalTransformerKMeans"):
        est.fit(X)


def test_learned_weights_are_in_memory_only():
    with pytest.raises(ValueError, match="weights=None"):
        TransformerKMeans(10, weights="learned", device="cpu").fit(da.ones((100, 32)))


@pytest.mark.parametrize("bad, match", [
    (np.nan, "NaN or infinity"), (np.inf, "NaN or infinity"), (1e200, "overflow"),
])
def test_bad_values_are_clear_errors(bad, match):
    X = np.random.default_rng(0).normal(size=(100, 3))
    X[57, 1] = bad
    with pytest.raises(ValueError, match=match):
        TransformerKMeans(2, device="cpu").fit(da.from_array(X, chunks=30))


def test_bad_shapes_and_weights_are_clear_errors():
    X = da.from_array(np.random.default_rng(0).normal(size=(100, 3)), chunks=30)
    with pytest.raises(ValueError, match="n_samples=100 should be >= n_clusters=101"):
        TransformerKMeans(101, device="cpu").fit(X)
    with pytest.raises(ValueError, match="2-D"):
        TransformerKMeans(2, device="cpu").fit(X[:, 0])
    with pytest.raises(ValueError, match="negative"):
        TransformerKMeans(2, device="cpu").fit(X, sample_weight=-np.ones(100))
    with pytest.raises(ValueError, match="sample_weight.shape"):
        TransformerKMeans(2, device="cpu").fit(X, sample_weight=np.ones(99))
    est = TransformerKMeans(2, device="cpu").fit(X)
    with pytest.raises(ValueError, match="X has 2 features"):
        est.predict(X[:, :2])


def test_unknown_chunk_sizes_are_computed():
    X = np.random.default_rng(0).normal(size=(300, 2))
    dX = da.from_array(X, chunks=50)
    dX = dX[dX[:, 0] > -10]  # a boolean mask: chunk sizes unknown
    est = TransformerKMeans(3, init=X[:3], device="cpu")
    np.testing.assert_allclose(est.fit(dX).cluster_centers_,
                               TransformerKMeans(3, init=X[:3], device="cpu")
                               .fit(X).cluster_centers_, atol=1e-10)


@pytest.mark.parametrize("shape", [(40, 0), (0, 3)])
def test_a_dask_array_without_rows_or_features_is_a_clear_error(shape):
    X = da.zeros(shape, chunks=(10, -1))
    with pytest.raises(ValueError) as dask_error:
        TransformerKMeans(2).fit(X)
    with pytest.raises(ValueError) as numpy_error:
        TransformerKMeans(2).fit(np.zeros(shape))
    assert str(dask_error.value) == str(numpy_error.value)  # (scikit-learn's words)
