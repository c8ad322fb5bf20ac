"""The clustering variants against plain-numpy references, and their own behaviour."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_digits, load_iris, make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktransformer import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)
from sktransformer.cluster import _lloyd
from sktransformer.utils import DeviceWarning

from ..conftest import jittered
from . import reference

VARIANTS = [
    SphericalTransformerKMeans,
    TrimmedTransformerKMeans,
    RobustTransformerKMeans,
    TransformerKMedoids,
]


def _data():
    X_blobs, _ = make_blobs(600, n_features=4, centers=5, cluster_std=1.5, random_state=0)
    return {
        "iris": jittered(load_iris().data),
        "digits": jittered(load_digits().data[:600]),
        "blobs": X_blobs + 3.0,  # off the origin: directions differ for spherical k-means
    }


DATA = _data()


def _init(X, k, seed=0):
    return X[np.random.default_rng(seed).choice(len(X), k, replace=False)]


# -- each variant equals its independent numpy reference -----------------------------------

@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_spherical_equals_dhillon_modha(name, dtype):
    X, k = DATA[name].astype(dtype), 5
    init = _init(X, k)
    ours = SphericalTransformerKMeans(k, init=init, max_iter=10, tol=0, device="cpu").fit(X)
    _, centers = reference.spherical_kmeans(X.astype(np.float64), init.astype(np.float64),
                                            10)[-1]
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    np.testing.assert_array_equal(ours.labels_, (Xn @ centers.T).argmax(1))
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(ours.cluster_centers_, centers, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(np.linalg.norm(ours.cluster_centers_, axis=1), 1.0, rtol=rtol)
    cos = (Xn * centers[ours.labels_]).sum(1)
    assert ours.inertia_ == pytest.approx(2 * (1 - cos).sum(), rel=10 * rtol)


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("trimming", ["global", "per_cluster"])
@pytest.mark.parametrize("trim", [0.05, 0.2, 0.6])  # 0.6: most points change sides at once
def test_trimmed_equals_reference(name, trimming, trim):
    X, k = DATA[name], 4
    init = _init(X, k, seed=1)
    ours = TrimmedTransformerKMeans(k, trim=trim, trimming=trimming, init=init, max_iter=10,
                                    tol=0, device="cpu").fit(X)
    history = reference.trimmed_kmeans(X, init, 10, trim, trimming)
    centers = history[-1][1]
    np.testing.assert_allclose(ours.cluster_centers_, centers, rtol=1e-10, atol=1e-10)
    marks, _ = reference.trimmed_kmeans(X, centers, 1, trim, trimming)[0]
    np.testing.assert_array_equal(ours.labels_, marks)
    d2 = reference.sq_dist(X, centers).min(1)
    assert ours.inertia_ == pytest.approx(d2[marks >= 0].sum(), rel=1e-10)
    if trimming == "global":
        assert (marks < 0).sum() == int(np.floor(trim * len(X) + 1e-9))


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("beta", [0.01, 1.0, 30.0])
def test_robust_equals_the_sparsemax_loop(name, beta):
    X, k = DATA[name], 4
    init = _init(X, k, seed=2)
    ours = RobustTransformerKMeans(k, beta=beta, init=init, max_iter=8, tol=0,
                                   device="cpu").fit(X)
    _, centers = reference.robust_kmeans(X, init, 8, beta)[-1]
    np.testing.assert_allclose(ours.cluster_centers_, centers, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(ours.labels_, reference.sq_dist(X, centers).argmin(1))


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean"])
def test_kmedoids_equals_the_alternate_step(name, metric):
    X, k = DATA[name][:300], 5
    start = np.random.default_rng(3).choice(len(X), k, replace=False)
    ours = TransformerKMedoids(k, metric=metric, init=X[start], max_iter=30,
                               device="cpu").fit(X)
    labels, medoids = reference.kmedoids_alternate(X, start, 30, metric)[-1]
    np.testing.assert_array_equal(ours.medoid_indices_, medoids)
    np.testing.assert_array_equal(ours.cluster_centers_, X[medoids])
    np.testing.assert_array_equal(ours.labels_, labels)
    assert ours.inertia_ == pytest.approx(reference.medoid_objective(X, medoids, metric),
                                          rel=1e-10)


def test_kmedoids_matches_scikit_learn_extra():
    # scikit-learn-extra 0.3.0 (its last release) ships wheels built against numpy 1.x and
    # fails to import beside numpy 2 ("numpy.dtype size changed"), so this runs only in an
    # environment with numpy < 2 where it imports; the numpy reference above always runs.
    extra = pytest.importorskip("sklearn_extra.cluster", exc_type=ImportError)
    for X in (DATA["iris"], DATA["blobs"][:300]):
        start = np.random.default_rng(4).choice(len(X), 4, replace=False)
        for metric in ("euclidean", "sqeuclidean"):
            theirs = extra.KMedoids(4, metric=metric, method="alternate", init=X[start],
                                    max_iter=300).fit(X)
            ours = TransformerKMedoids(4, metric=metric, init=X[start], device="cpu").fit(X)
            np.testing.assert_array_equal(ours.medoid_indices_, theirs.medoid_indices_)
            np.testing.assert_array_equal(ours.labels_, theirs.labels_)
            # theirs sums square roots of matmul-form squared distances (a medoid is ~1e-7
            # from itself); ours takes differences: equal to rounding
            assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-8)


# -- weights, limits and special cases -----------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda init: SphericalTransformerKMeans(4, init=init),
    lambda init: TrimmedTransformerKMeans(4, trim=0.1, init=init),
    lambda init: TrimmedTransformerKMeans(4, trim=0.1, trimming="per_cluster", init=init),
    lambda init: RobustTransformerKMeans(4, beta=2.0, init=init),
    lambda init: TransformerKMedoids(4, init=init),
], ids=["spherical", "trimmed", "trimmed-per-cluster", "robust", "kmedoids"])
def test_sample_weight_equals_repetition_from_fixed_init(make):
    X = DATA["blobs"][:200]
    w = np.random.default_rng(0).integers(0, 4, len(X))
    init = X[w > 0][:4]
    weighted = make(init).set_params(max_iter=30, device="cpu").fit(X, sample_weight=w)
    repeated = make(init).set_params(max_iter=30, device="cpu").fit(np.repeat(X, w, axis=0))
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_,
                               rtol=1e-9, atol=1e-9)
    assert weighted.inertia_ == pytest.approx(repeated.inertia_, rel=1e-9)
    np.testing.assert_array_equal(np.repeat(weighted.labels_, w), repeated.labels_)


def test_trim_zero_is_kmeans():
    X = DATA["digits"]
    init = _init(X, 6)
    km = TransformerKMeans(6, init=init, device="cpu").fit(X)
    tkm = TrimmedTransformerKMeans(6, trim=0.0, init=init, device="cpu").fit(X)
    np.testing.assert_array_equal(tkm.labels_, km.labels_)
    np.testing.assert_allclose(tkm.cluster_centers_, km.cluster_centers_, rtol=1e-10)
    assert tkm.n_iter_ == km.n_iter_


def test_robust_with_tiny_beta_is_kmeans_and_large_beta_resists_an_outlier():
    X = DATA["blobs"]
    init = _init(X, 5)
    km = TransformerKMeans(5, init=init, max_iter=20, tol=0, device="cpu").fit(X)
    tiny = RobustTransformerKMeans(5, beta=1e-9, init=init, max_iter=20, tol=0,
                                   device="cpu").fit(X)
    np.testing.assert_allclose(tiny.cluster_centers_, km.cluster_centers_, rtol=1e-6)
    inliers = np.random.default_rng(0).normal(size=(50, 2))
    X2 = np.vstack([inliers, [[500.0, 500.0]]])
    centered = RobustTransformerKMeans(1, init=[[0.0, 0.0]], device="cpu").fit(X2)
    assert np.abs(centered.cluster_centers_ - inliers.mean(0)).max() < 0.1
    assert np.abs(X2.mean(0) - inliers.mean(0)).max() > 9  # the mean is dragged ~10 away


def test_spherical_ignores_row_scale_and_handles_zero_rows():
    X = DATA["iris"]
    init = _init(X, 3)
    a = SphericalTransformerKMeans(3, init=init, device="cpu").fit(X)
    scale = np.random.default_rng(0).uniform(0.01, 100, size=(len(X), 1))
    b = SphericalTransformerKMeans(3, init=init, device="cpu").fit(X * scale)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-10)
    Xz = np.vstack([X, np.zeros((1, 4))])
    c = SphericalTransformerKMeans(3, init=init, device="cpu").fit(Xz)
    assert np.isfinite(c.cluster_centers_).all() and c.labels_[-1] == 0
    np.testing.assert_allclose(c.cluster_centers_, a.cluster_centers_, rtol=1e-10)


def _planted_outliers(seed=0):
    rng = np.random.default_rng(seed)
    true_centers = np.array([[0.0, 0.0], [6.0, 0.0], [3.0, 5.0]])
    inliers = np.vstack([c + rng.normal(size=(150, 2)) for c in true_centers])
    outliers = rng.uniform(-60, 60, size=(25, 2))
    outliers = outliers[np.linalg.norm(outliers - 3, axis=1) > 20]
    return np.vstack([inliers, outliers]), true_centers, len(inliers)


def _center_error(found, true_centers):
    d = reference.sq_dist(true_centers, found)
    return np.sqrt(d.min(1)).max()


def test_trimming_recovers_the_centers_that_outliers_ruin_for_kmeans():
    X, true_centers, n_in = _planted_outliers()
    km = TransformerKMeans(3, random_state=0, n_init=5, device="cpu").fit(X)
    tkm = TrimmedTransformerKMeans(3, trim=0.1, random_state=0, n_init=5, device="cpu").fit(X)
    assert _center_error(km.cluster_centers_, true_centers) > 2.0
    assert _center_error(tkm.cluster_centers_, true_centers) < 0.3
    assert (tkm.labels_[n_in:] == -1).all()  # every planted outlier is trimmed
    # predict applies the fitted thresholds: the training labels, and new far points are -1
    np.testing.assert_array_equal(tkm.predict(X), tkm.labels_)
    assert tkm.predict([[100.0, 100.0]])[0] == -1
    assert tkm.predict(true_centers).tolist() == tkm.predict(true_centers + 0.1).tolist()
    assert (tkm.predict(true_centers) >= 0).all()
    assert tkm.inertia(X) == pytest.approx(tkm.inertia_, rel=1e-9)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_trimmed_location_and_scale_are_the_median_and_central_variance(dtype):
    g = torch.Generator().manual_seed(0)
    sample = torch.randn(1001, 3, generator=g, dtype=dtype) * torch.tensor([1.0, 5.0, 0.1])
    sample = sample.to(dtype)
    sample[:20] = 1e6  # outliers move neither
    est = TrimmedTransformerKMeans(2, trim=0.1)
    location, scale = est._location_and_scale(sample)
    assert location.dtype == dtype
    torch.testing.assert_close(location, sample.median(0).values, rtol=0, atol=0)
    x = sample.to(torch.float64)
    low, high = torch.quantile(x, torch.tensor([0.05, 0.95], dtype=x.dtype), dim=0)
    central = [x[:, j][(x[:, j] >= low[j]) & (x[:, j] <= high[j])] for j in range(3)]
    assert scale == pytest.approx(float(np.mean([c.var(unbiased=False) for c in central])),
                                  rel=1e-12)


def test_per_cluster_trimming_drops_a_share_of_every_cluster():
    X, _ = make_blobs(900, centers=[[0, 0], [8, 0], [0, 8]], cluster_std=[0.5, 1.0, 2.0],
                      random_state=0)
    tkm = TrimmedTransformerKMeans(3, trim=0.1, trimming="per_cluster", random_state=0,
                                   device="cpu").fit(X)
    assert tkm.thresholds_.shape == (3,) and len(set(tkm.thresholds_)) == 3
    d2 = tkm.transform(X) ** 2
    assigned = d2.argmin(1)
    for j in range(3):
        n_j = (assigned == j).sum()
        assert (tkm.labels_[assigned == j] == -1).sum() == np.floor(0.1 * n_j + 1e-9)
        assert (d2[tkm.labels_ == j, j] <= tkm.thresholds_[j] * (1 + 1e-9)).all()
    glob = TrimmedTransformerKMeans(3, trim=0.1, random_state=0, device="cpu").fit(X)
    assert len(set(glob.thresholds_)) == 1
    # one global radius trims the wide cluster most, per-cluster trimming each alike
    wide = np.argmax([d2[assigned == j, j].mean() for j in range(3)])
    assert (glob.labels_[assigned == wide] == -1).mean() > 0.25


def test_gumbel_kmedoids_samples_and_tiny_temperature_is_deterministic():
    X = DATA["blobs"][:300]
    start = X[np.random.default_rng(5).choice(len(X), 5, replace=False)]
    det = TransformerKMedoids(5, init=start, device="cpu").fit(X)
    cold = TransformerKMedoids(5, init=start, temperature=1e-12, random_state=0,
                               device="cpu").fit(X)
    np.testing.assert_array_equal(cold.medoid_indices_, det.medoid_indices_)
    hot = [TransformerKMedoids(5, init=start, temperature=1.0, max_iter=40, random_state=s,
                               device="cpu").fit(X) for s in range(3)]
    assert len({tuple(sorted(h.medoid_indices_)) for h in hot}) > 1  # it samples
    for h in hot:
        np.testing.assert_array_equal(h.cluster_centers_, X[h.medoid_indices_])
        # the best medoids seen are kept, and the first layer starts from `start`
        assert h.inertia_ <= reference.medoid_objective(
            X, [int(np.flatnonzero((X == c).all(1))[0]) for c in start]) + 1e-9
        np.testing.assert_array_equal(h.labels_, h.predict(X))


@pytest.mark.parametrize("init", ["k-medoids++", "random", "heuristic"])
@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean"])
def test_kmedoids_inits_pick_data_points(init, metric):
    X, y = make_blobs(400, centers=4, cluster_std=0.6, random_state=2)
    kmed = TransformerKMedoids(4, init=init, metric=metric, random_state=0,
                               device="cpu").fit(X)
    assert len(set(kmed.medoid_indices_)) == 4
    np.testing.assert_array_equal(kmed.cluster_centers_, X[kmed.medoid_indices_])
    if init != "heuristic":  # heuristic starts all medoids near the middle of the data
        assert adjusted_rand_score(y, kmed.labels_) > 0.95
    D = reference.sq_dist(X, kmed.cluster_centers_)
    expected = np.sqrt(D) if metric == "euclidean" else D
    np.testing.assert_allclose(kmed.transform(X), expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean"])
def test_kmedoids_heuristic_is_the_least_total_cost_points(metric):
    X = DATA["iris"]
    D = reference.sq_dist(X, X)
    D = np.sqrt(D) if metric == "euclidean" else D
    expected = np.sort(np.argsort(D.sum(1), kind="stable")[:3])
    points = _lloyd.PointTokens(torch.from_numpy(X), rows=64)
    _, indices = TransformerKMedoids(3, metric=metric)._initialize(points, "heuristic",
                                                                   None, None)
    np.testing.assert_array_equal(np.sort(indices.numpy()), expected)


# -- the conventions, for every variant -----------------------------------------------------

@pytest.mark.parametrize("cls", VARIANTS)
def test_bad_input_is_a_clear_error_and_loses_nothing(cls):
    X = DATA["blobs"][:100]
    est = cls(3, random_state=0, device="cpu").fit(X)
    centers = est.cluster_centers_.copy()
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clone(est).fit(bad)
    with pytest.raises(ValueError, match="n_samples=2 should be >= n_clusters=3"):
        clone(est).fit(X[:2])
    with pytest.raises(ValueError, match="X has 2 features"):
        est.predict(X[:, :2])
    with pytest.raises(ValueError, match="infinity"):
        est.predict(np.full((2, 4), np.inf))
    np.testing.assert_array_equal(est.cluster_centers_, centers)
    np.testing.assert_array_equal(est.predict(X), est.labels_)


@pytest.mark.parametrize("cls", VARIANTS)
def test_fitted_on_gpu_predicts_on_cpu_and_global_rng_untouched(cls, monkeypatch):
    X = DATA["blobs"][:200]
    torch_state = torch.get_rng_state()
    est = cls(3, random_state=0, device="cpu").fit(X)
    assert torch.equal(torch.get_rng_state(), torch_state)
    np.testing.assert_array_equal(clone(est).fit(X).labels_, est.labels_)  # seeded
    est.set_params(device="cuda")
    for name, value in vars(est).items():
        assert not isinstance(value, torch.Tensor), name
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = pickle.loads(pickle.dumps(est))
    with pytest.warns(DeviceWarning, match="CUDA is not available"):
        np.testing.assert_array_equal(loaded.predict(X), est.labels_)


@pytest.mark.parametrize("cls", VARIANTS)
def test_pipeline_and_grid_search(cls):
    X = DATA["blobs"][:300]
    pipe = make_pipeline(StandardScaler(), cls(random_state=0, device="cpu"))
    name = pipe.steps[-1][0]
    search = GridSearchCV(pipe, {f"{name}__n_clusters": [2, 5]}, cv=3).fit(X)
    assert search.best_params_[f"{name}__n_clusters"] == 5


def test_cosine_attention_on_unit_vectors_is_spherical_kmeans():
    """The cosine score, registered in attention/_scores.py alone, runs in TransformerKMeans:
    on unit vectors its layers are spherical k-means' (same labels and objective)."""
    from sktransformer import TransformerKMeans

    X = load_digits().data + 0.1
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    cosine = TransformerKMeans(10, attention="cosine", init=X[:10], device="cpu").fit(X)
    spherical = SphericalTransformerKMeans(10, init=X[:10], device="cpu").fit(X)
    np.testing.assert_array_equal(cosine.labels_, spherical.labels_)
    assert cosine.inertia_ == pytest.approx(spherical.inertia_, rel=1e-9)
    soft = TransformerKMeans(10, attention="cosine", temperature=0.1, random_state=0,
                             device="cpu").fit(X * 5)
    assert np.isfinite(soft.predict_proba(X)).all()
    with pytest.raises(ValueError, match="token-level circuit is written for attention"):
        cosine.get_circuit()


@pytest.mark.parametrize("trimming", ["global", "per_cluster"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_far_outliers_cost_trimmed_centers_no_precision(trimming, dtype):
    # the layer sums only the points within the last radius: outliers far away never enter
    # the final sums, so the kept means are as exact as a fresh sum over the kept points
    # (outliers symmetric about 0 keep the mean, by which the data are shifted, near 0)
    rng = np.random.default_rng(0)
    outliers = np.repeat([[1e4] * 3, [-1e4] * 3], 6, axis=0)
    X = np.concatenate([rng.normal(0, 1, (300, 3)), rng.normal(8, 1, (300, 3)),
                        outliers]).astype(dtype)
    est = TrimmedTransformerKMeans(2, trim=0.05, trimming=trimming, init=X[[0, 300]],
                                   tol=0, device="cpu").fit(X)
    assert (est.labels_[-12:] == -1).all()
    for j in range(2):
        members = X[est.labels_ == j].astype(np.float64)
        np.testing.assert_allclose(est.cluster_centers_[j], members.mean(0),
                                   rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_far_outliers_move_neither_the_shift_nor_the_tolerance(dtype):
    # the robust location (median) and scale (trimmed variance): with the mean and the
    # variance, outliers 1e6 away made tol about 1e6 (one layer, then stop) and left
    # float32 coordinates with a resolution of about 1e-3
    X, _ = make_blobs(2000, 2, centers=5, cluster_std=1.0, random_state=1)
    rng = np.random.default_rng(0)
    X = np.concatenate([X, rng.uniform(-1e6, 1e6, (40, 2))]).astype(dtype)
    fit = TrimmedTransformerKMeans(5, trim=0.05, random_state=0, device="cpu").fit(X)
    exact = TrimmedTransformerKMeans(5, trim=0.05, random_state=0, tol=0,
                                     device="cpu").fit(X)
    assert fit.n_iter_ > 1
    assert fit.inertia_ == pytest.approx(exact.inertia_, rel=1e-3)
    assert (fit.labels_[-40:] == -1).all()
    for j in range(5):  # at the fixed point, each center is its kept members' mean
        members = X[exact.labels_ == j].astype(np.float64)
        np.testing.assert_allclose(exact.cluster_centers_[j], members.mean(0), rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize("as_tensor", [False, True])
def test_float32_distances_do_not_lose_what_points_share(as_tensor):
    # far from the origin, x^2 + c^2 - 2 x.c in float32 put a medoid 0.06 from itself
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(500, 8)) * 100 + 1000).astype(np.float32)
    km = TransformerKMedoids(4, random_state=0).fit(X)
    D = np.asarray(km.transform(torch.from_numpy(X) if as_tensor else X))
    assert D.dtype == np.float32
    np.testing.assert_array_equal(D[km.medoid_indices_, np.arange(4)], 0)
    exact = np.linalg.norm(X.astype(np.float64)[:, None] - km.cluster_centers_[None], axis=2)
    np.testing.assert_allclose(D, exact, rtol=1e-6)
    hard = TransformerKMeans(4, random_state=0).fit(X)
    exact = np.linalg.norm(X.astype(np.float64)[:, None] - hard.cluster_centers_[None], axis=2)
    np.testing.assert_allclose(hard.transform(X), exact, rtol=1e-6)
