"""The clusterers' mixture models: score, score_samples, bic, aic (cluster/_likelihood.py,
cluster/_elliptical.py)."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import ive, logsumexp
from scipy.stats import multivariate_normal, multivariate_t
from sklearn.datasets import make_blobs
from sklearn.model_selection import GridSearchCV, KFold

from sktransformer import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)
from sktransformer.cluster import _elliptical, _likelihood, neg_inertia_scorer


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(600, centers=[[0, 0, 0], [6, 0, 0], [0, 7, 0], [0, 0, 8]],
                      cluster_std=[0.6, 1.0, 1.3, 0.8], random_state=0)
    return X


def test_hard_score_is_the_elliptical_mixture_by_hand(blobs):
    km = TransformerKMeans(4, random_state=0, device="cpu").fit(blobs)
    mixture = km.mixture_
    X_new = blobs[::7] + 0.3
    # weights are the clusters' shares, means their members' means, and each feature's
    # variance its members' squared deviations shrunk by one member at the pooled variance
    counts = np.bincount(km.labels_, minlength=4)
    np.testing.assert_allclose(mixture.weights_, counts / counts.sum())
    means = np.stack([blobs[km.labels_ == j].mean(0) for j in range(4)])
    np.testing.assert_allclose(mixture.means_, means, rtol=1e-9)
    sq = (blobs - means[km.labels_]) ** 2
    own = np.stack([sq[km.labels_ == j].sum(0) for j in range(4)])
    variances = (own + sq.sum(0) / len(blobs)) / (counts + 1)[:, None]
    assert mixture.covariances_.shape == (4, 3, 3)
    np.testing.assert_allclose(np.diagonal(mixture.covariances_, axis1=1, axis2=2), variances,
                               rtol=1e-9)
    # the isotropic mixture stays: the clusters' shares and their members' squared
    # distances / d, shrunk by one member at the pooled spread
    np.testing.assert_allclose(km.mixture_weights_, counts / counts.sum())
    sq_dist = ((blobs - km.cluster_centers_[km.labels_]) ** 2).sum(1)
    pooled = np.bincount(km.labels_, weights=sq_dist) + sq_dist.sum() / len(blobs)
    np.testing.assert_allclose(km.covariances_, pooled / (counts + 1) / 3, rtol=1e-9)
    # each profile's density is scipy's (the t's scale matched to the covariance)
    for profile in [("gaussian", 0.0), ("t", 4.0), ("t", 30.0)]:
        mixture.profile_ = profile
        family, nu = profile
        density = 0
        for w, m, C in zip(mixture.weights_, mixture.means_, mixture.covariances_):
            dist = (multivariate_normal(m, C) if family == "gaussian"
                    else multivariate_t(m, C * (nu - 2) / nu, df=nu))
            density = density + w * dist.pdf(X_new)
        np.testing.assert_allclose(km.score_samples(X_new), np.log(density), rtol=1e-9)
        assert km.score(X_new) == pytest.approx(np.log(density).mean(), rel=1e-9)


@pytest.mark.parametrize("profile", _elliptical.PROFILES)
@pytest.mark.parametrize("d", [1, 2])
def test_every_radial_profile_is_a_density_of_unit_covariance(profile, d):
    grid = np.linspace(-40, 40, 4001 if d == 1 else 801)
    step = grid[1] - grid[0]
    points = np.stack(np.meshgrid(*[grid] * d), -1).reshape(-1, d)
    sq = np.square(points).sum(1)
    p = np.exp(_elliptical.component_log_density(*profile, d, sq[:, None], np.zeros(1)))[:, 0]
    assert p.sum() * step ** d == pytest.approx(1.0, abs=2e-3)
    if profile[0] != "t" or profile[1] > 4:  # (the t's variance converges slowly)
        assert (p * points[:, 0] ** 2).sum() * step ** d == pytest.approx(1.0, abs=2e-2)


def test_the_profile_follows_the_tails():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((3000, 3))
    heavy = z / np.sqrt(rng.chisquare(3, (3000, 1)) / 3)
    flat = rng.uniform(-1, 1, size=(3000, 3))
    fitted = {name: TransformerKMeans(1, random_state=0).fit(X).mixture_.profile_[0]
              for name, X in [("gaussian", z), ("t", heavy), ("power", flat)]}
    assert fitted == {"gaussian": "gaussian", "t": "t", "power": "power"}


def test_one_cluster_has_a_uniform_background_only_where_the_data_are_flat():
    rng = np.random.default_rng(0)
    flat = TransformerKMeans(1, random_state=0).fit(rng.uniform(size=(1000, 2)))
    assert flat.mixture_.background_weight_ > 0.5
    round_ = TransformerKMeans(1, random_state=0).fit(rng.normal(size=(1000, 2)))
    assert round_.mixture_.background_weight_ < 0.05
    assert TransformerKMeans(2, random_state=0).fit(
        rng.uniform(size=(1000, 2))).mixture_.background_weight_ == 0
    # a held-out point outside the box is scored by the component alone: finite
    assert np.isfinite(flat.score_samples([[3.0, 3.0]])).all()


@pytest.mark.parametrize("make", [
    lambda rng: rng.uniform(size=(600, 3)),
    lambda rng: rng.normal(size=(600, 3)) @ np.array([[3, 0, 0], [1, 1, 0], [0, 0, 0.2]]),
])
def test_a_grid_from_one_cluster_picks_one_without_structure(make):
    X = make(np.random.default_rng(0))
    search = GridSearchCV(TransformerKMeans(random_state=0, device="cpu"),
                          {"n_clusters": range(1, 9)},
                          cv=KFold(5, shuffle=True, random_state=0))
    assert search.fit(X).best_params_["n_clusters"] == 1


def test_elongated_clusters_are_one_cluster_each():
    rng = np.random.default_rng(1)
    stretch = np.array([[3.0, 0.0], [0.0, 0.5]])  # (the spherical score picks 1 here)
    X = np.vstack([rng.normal(size=(300, 2)) @ stretch + [0, 8 * i] for i in range(3)])
    search = GridSearchCV(TransformerKMeans(random_state=0, device="cpu"),
                          {"n_clusters": range(1, 9)},
                          cv=KFold(5, shuffle=True, random_state=0))
    assert search.fit(X).best_params_["n_clusters"] == 3


def test_the_score_is_finite_on_degenerate_clusters():
    # repeated points and a feature constant in every cluster
    X = np.repeat(np.array([[0.0, 1.0], [5.0, 1.0], [0.0, 1.0], [9.0, 1.0]]), 20, axis=0)
    km = TransformerKMeans(3, random_state=0).fit(X)
    assert np.all(np.isfinite(km.score_samples(X)))
    assert np.isfinite(km.bic(X))


def test_n_clusters_auto_selects_k_by_cross_validation(blobs):
    km = TransformerKMeans("auto", random_state=0, device="cpu").fit(blobs)
    assert km.n_clusters == "auto" and km.n_clusters_ == 4
    assert km.cluster_centers_.shape == (4, 3) and km.predict(blobs[:3]).shape == (3,)
    results = km.cv_results_
    assert list(results["param_n_clusters"]) == list(range(1, 21))
    assert int(np.argmax(results["mean_test_score"])) + 1 == 4
    # the same as the grid search a user writes
    search = GridSearchCV(TransformerKMeans(random_state=0, device="cpu"),
                          {"n_clusters": range(1, 21)},
                          cv=KFold(5, shuffle=True, random_state=0)).fit(blobs)
    np.testing.assert_allclose(results["mean_test_score"],
                               search.cv_results_["mean_test_score"])
    np.testing.assert_array_equal(km.labels_, search.best_estimator_.labels_)


def test_n_clusters_auto_errors():
    X = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.raises(ValueError, match="init must be"):
        TransformerKMeans("auto", init=X[:3]).fit(X)
    with pytest.raises(ValueError, match="at least 5 samples"):
        TransformerKMeans("auto").fit(X[:4])
    with pytest.raises(ValueError, match="partial_fit needs an integer"):
        TransformerKMeans("auto").partial_fit(X)
    with pytest.raises(ValueError, match="n_clusters"):
        TransformerKMeans("many").fit(X)
    # few rows: k up to the training folds' size
    assert TransformerKMeans("auto", random_state=0).fit(X[:10]).cv_results_[
        "param_n_clusters"].max() == 8


def test_soft_score_is_the_softmax_mixture(blobs):
    t = 1.5
    km = TransformerKMeans(4, temperature=t, random_state=0, device="cpu").fit(blobs)
    d2 = ((blobs[:, None, :] - km.cluster_centers_[None]) ** 2).sum(-1)
    expected = logsumexp(-d2 / t, axis=1) - np.log(4) - 1.5 * np.log(np.pi * t)
    np.testing.assert_allclose(km.score_samples(blobs), expected, rtol=1e-9)
    np.testing.assert_allclose(km.covariances_, t / 2)


def test_grid_search_selects_k_where_the_inertia_takes_the_largest(blobs):
    grid = {"n_clusters": range(2, 9)}
    by_score = GridSearchCV(TransformerKMeans(random_state=0, device="cpu"), grid, cv=3)
    assert by_score.fit(blobs).best_params_["n_clusters"] == 4
    by_inertia = GridSearchCV(TransformerKMeans(random_state=0, device="cpu"), grid, cv=3,
                              scoring=neg_inertia_scorer)
    assert by_inertia.fit(blobs).best_params_["n_clusters"] == 8
    with_t = GridSearchCV(TransformerKMeans(random_state=0, device="cpu"),
                          {**grid, "temperature": [None, 0.5, 2.0]}, cv=3)
    assert with_t.fit(blobs).best_params_["n_clusters"] == 4


def test_bic_and_aic(blobs):
    bics = [TransformerKMeans(k, random_state=0, device="cpu").fit(blobs).bic(blobs)
            for k in range(2, 8)]
    assert int(np.argmin(bics)) + 2 == 4
    km = TransformerKMeans(4, random_state=0, device="cpu").fit(blobs)
    # weights, means, full covariances and the radial profile's shape
    n, p = len(blobs), 3 + 4 * 3 + 4 * 6 + (km.mixture_.profile_[0] != "gaussian")
    assert km.mixture_.n_parameters() == p
    assert km.bic(blobs) == pytest.approx(-2 * km.score(blobs) * n + p * np.log(n))
    assert km.aic(blobs) == pytest.approx(-2 * km.score(blobs) * n + 2 * p)


@pytest.mark.filterwarnings("ignore:Maximum number of iterations")  # (max_iter cut)
@pytest.mark.parametrize("make", [
    lambda: SphericalTransformerKMeans(4, random_state=0, device="cpu"),
    lambda: TrimmedTransformerKMeans(4, random_state=0, device="cpu"),
    lambda: RobustTransformerKMeans(4, random_state=0, device="cpu"),
    lambda: TransformerKMedoids(4, random_state=0, device="cpu"),
    lambda: TransformerKMedoids(4, metric="sqeuclidean", random_state=0, device="cpu"),
])
def test_every_clusterer_scores_a_finite_likelihood_that_prefers_the_fit(blobs, make):
    X = blobs + np.array([20.0, 20.0, 20.0])  # (directions for the spherical one)
    model = make().fit(X)
    ll = model.score_samples(X)
    assert ll.shape == (len(X),) and np.all(np.isfinite(ll))
    # a random set of centers explains the data worse than the fitted ones
    worse = make().set_params(init=X[:4], max_iter=1).fit(X[::50])
    assert model.score(X) > worse.score(X)
    assert np.isfinite(model.bic(X)) and np.isfinite(model.aic(X))


def test_trimmed_score_counts_the_kept_points(blobs):
    X = np.vstack([blobs, [[100.0, 100.0, 100.0]]])
    tkm = TrimmedTransformerKMeans(4, trim=0.05, random_state=0, device="cpu").fit(X)
    kept = tkm.predict(X) >= 0
    assert not kept[-1]
    assert tkm.score(X) == pytest.approx(tkm.score_samples(X)[kept].mean())


def test_densities_are_normalized():
    # radial Laplace in d = 1 is the Laplace density exp(-|x|/b) / (2b)
    log_w, offset, slope = _likelihood.radial_laplace(np.ones(1), np.array([0.7]), 1)
    assert offset[0] == pytest.approx(-np.log(2 * 0.7)) and slope[0] == pytest.approx(1 / 0.7)
    # von Mises-Fisher on the sphere of R^3: kappa / (4 pi sinh kappa) exp(kappa x.c)
    kappa = np.array([2.5])
    _, offset, slope = _likelihood.von_mises_fisher(np.ones(1), kappa, 3)
    assert offset[0] == pytest.approx(np.log(kappa[0] / (4 * np.pi * np.sinh(kappa[0])))
                                      + kappa[0])
    # the Bessel function's large-order expansion agrees with scipy where both are finite
    x = np.array([30.0, 200.0])
    direct = np.log(ive(50.0, x)) + x
    z = x / 50.0
    root = np.sqrt(1 + z * z)
    debye = (-0.5 * np.log(2 * np.pi * 50) + 50 * (root + np.log(z / (1 + root)))
             - 0.5 * np.log(root))
    np.testing.assert_allclose(debye, direct, rtol=1e-3)
    # and it stays finite where scipy's underflows (high dimension, low concentration)
    assert np.all(np.isfinite(_likelihood.log_bessel_iv(2000.0, np.array([1.0, 10.0]))))


def test_swaps_never_raise_the_inertia():
    X, _ = make_blobs(800, centers=9, n_features=5, cluster_std=1.5, random_state=3)
    for seed in range(4):
        plain = TransformerKMeans(9, random_state=seed, swaps=0, device="cpu").fit(X)
        swapped = TransformerKMeans(9, random_state=seed, device="cpu").fit(X)
        assert swapped.inertia_ <= plain.inertia_ * (1 + 1e-12)
        np.testing.assert_array_equal(swapped.predict(X), swapped.labels_)


@pytest.mark.parametrize("make", [
    lambda: TransformerKMeans(4, random_state=0, device="cpu"),
    lambda: TransformerKMeans(4, attention="dot", random_state=0, device="cpu"),
    lambda: TransformerKMeans(4, temperature=2.0, random_state=0, device="cpu"),
    lambda: SphericalTransformerKMeans(4, random_state=0, device="cpu"),
    lambda: TrimmedTransformerKMeans(4, random_state=0, device="cpu"),
    lambda: TransformerKMedoids(4, random_state=0, device="cpu"),
    lambda: TransformerKMedoids(4, metric="sqeuclidean", random_state=0, device="cpu"),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_compiled_score_is_the_torch_pass(blobs, make, dtype, monkeypatch):
    """Small dense NumPy data are scored by one compiled pass (distances summed directly);
    the torch pass (expanded distances by GEMM, in X's dtype) gives the same
    log-likelihoods up to its rounding."""
    from sktransformer.cluster import _compiled

    if _compiled.log_likelihoods(blobs, blobs[:2], (np.zeros(2),) * 3,
                                 attention="euclidean") is None:
        pytest.skip("numba's loops are not built here")  # (the compiled pass needs them)
    X = (blobs + np.array([20.0, 20.0, 20.0])).astype(dtype)
    model = make().fit(X)
    X_new = X[::3] + dtype(0.25)
    compiled = model.score_samples(X_new)
    monkeypatch.setattr(_compiled._engine, "LIKELIHOOD_MAX", 0)
    by_torch = model.score_samples(X_new)
    assert compiled.dtype == np.float64 and np.all(np.isfinite(compiled))
    np.testing.assert_allclose(compiled, by_torch, rtol=1e-9 if dtype == np.float64 else 1e-4,
                               atol=1e-9 if dtype == np.float64 else 1e-4)


def test_the_mixture_is_fitted_when_first_used_from_a_copy_of_the_rows(blobs):
    X = blobs.copy()
    km = TransformerKMeans(4, random_state=0, device="cpu").fit(X)
    expected = TransformerKMeans(4, random_state=0, device="cpu").fit(blobs).score(blobs)
    X *= 100.0  # (the caller's array changes after the fit: the score does not)
    assert km.score(blobs) == pytest.approx(expected, rel=1e-12)
    # a pickle carries the fitted mixture, not the training rows
    fresh = TransformerKMeans(4, random_state=0, device="cpu").fit(blobs)
    state = fresh.__getstate__()
    assert "_mixture_rows" not in state and state["_mixture"] is not None
    restored = pickle.loads(pickle.dumps(fresh))
    assert restored.score(blobs) == pytest.approx(expected, rel=1e-12)


def test_wide_data_get_diagonal_covariances():
    X = np.random.default_rng(0).normal(size=(300, _elliptical.FULL_MAX_FEATURES + 1))
    km = TransformerKMeans(3, random_state=0, device="cpu").fit(X)
    assert km.mixture_.covariances_.shape == (3, X.shape[1])
    assert np.all(np.isfinite(km.score_samples(X)))
    narrow = TransformerKMeans(3, random_state=0, device="cpu").fit(X[:, :4])
    assert narrow.mixture_.covariances_.shape == (3, 4, 4)


def test_soft_sparse_and_streamed_fits_keep_the_isotropic_mixture(blobs):
    assert TransformerKMeans(4, temperature=1.0, random_state=0).fit(blobs).mixture_ is None
    assert TransformerKMeans(4, random_state=0).fit(sp.csr_matrix(blobs)).mixture_ is None
    streamed = TransformerKMeans(4, random_state=0).fit(blobs).partial_fit(blobs)
    assert streamed.mixture_ is None and np.isfinite(streamed.score(blobs))


def test_the_mixture_weighs_rows_as_repeats():
    rng = np.random.default_rng(0)
    X, labels = rng.normal(size=(300, 3)), rng.integers(0, 4, 300)
    w = rng.integers(1, 4, 300)
    weighted = _elliptical.EllipticalMixture().fit(X, labels, 4, sample_weight=w.astype(float))
    repeated = _elliptical.EllipticalMixture().fit(np.repeat(X, w, 0), np.repeat(labels, w), 4)
    np.testing.assert_allclose(weighted.covariances_, repeated.covariances_, rtol=1e-9)
    np.testing.assert_allclose(weighted.means_, repeated.means_, rtol=1e-9)
    assert weighted.profile_ == repeated.profile_


def test_threads_scoring_one_model_at_once_agree(blobs):
    from concurrent.futures import ThreadPoolExecutor

    expected = TransformerKMeans(4, random_state=0, device="cpu").fit(blobs).score(blobs)
    km = TransformerKMeans(4, random_state=0, device="cpu").fit(blobs)  # (mixture not yet fitted)
    with ThreadPoolExecutor(4) as pool:
        scores = list(pool.map(lambda _: km.score(blobs), range(8)))
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
