"""The clusterers' mixture models: score, score_samples, bic, aic (cluster/_likelihood.py)."""

import numpy as np
import pytest
from scipy.special import ive, logsumexp
from scipy.stats import multivariate_normal
from sklearn.datasets import make_blobs
from sklearn.model_selection import GridSearchCV

from sktransformer import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)
from sktransformer.cluster import _likelihood, neg_inertia_scorer


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(600, centers=[[0, 0, 0], [6, 0, 0], [0, 7, 0], [0, 0, 8]],
                      cluster_std=[0.6, 1.0, 1.3, 0.8], random_state=0)
    return X


def test_hard_score_is_the_gaussian_mixture_by_hand(blobs):
    km = TransformerKMeans(4, random_state=0, device="cpu").fit(blobs)
    X_new = blobs[::7] + 0.3
    density = sum(w * multivariate_normal(c, v * np.eye(3)).pdf(X_new)
                  for w, c, v in zip(km.mixture_weights_, km.cluster_centers_,
                                     km.covariances_))
    np.testing.assert_allclose(km.score_samples(X_new), np.log(density), rtol=1e-9)
    assert km.score(X_new) == pytest.approx(np.log(density).mean(), rel=1e-9)
    # weights are the clusters' shares; variances their members' squared distances / d
    counts = np.bincount(km.labels_, minlength=4)
    np.testing.assert_allclose(km.mixture_weights_, counts / counts.sum())
    sq = ((blobs - km.cluster_centers_[km.labels_]) ** 2).sum(1)
    pooled = sq.sum() / len(blobs)
    own = np.bincount(km.labels_, weights=sq) + pooled
    np.testing.assert_allclose(km.covariances_, own / (counts + 1) / 3, rtol=1e-9)


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
    n, p = len(blobs), 4 * 3 + 4 + 3
    assert km.bic(blobs) == pytest.approx(-2 * km.score(blobs) * n + p * np.log(n))
    assert km.aic(blobs) == pytest.approx(-2 * km.score(blobs) * n + 2 * p)


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
