"""TransformerKMeans.partial_fit: the online (mini-batch) k-means update."""

import numpy as np
import pytest
from sklearn.cluster import MiniBatchKMeans
from sklearn.datasets import make_blobs

from sktransformer import TransformerKMeans


def _data(n=3000, seed=0):
    X, _ = make_blobs(n, 5, centers=6, cluster_std=1.5, random_state=seed)
    return X


def test_batches_follow_scikit_learns_minibatch_update():
    """From the same initial centers, batch after batch, the centers equal scikit-learn's
    MiniBatchKMeans.partial_fit without random reassignment."""
    X = _data()
    init = X[:6].copy()
    ours = TransformerKMeans(6, init=init, device="cpu")
    theirs = MiniBatchKMeans(6, init=init, n_init=1, reassignment_ratio=0.0)
    for batch in np.array_split(np.arange(len(X)), 7):
        ours.partial_fit(X[batch])
        theirs.partial_fit(X[batch])
        np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_,
                                   rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    assert ours.n_steps_ == 7


def test_the_update_is_the_weighted_running_mean():
    rng = np.random.default_rng(0)
    X = _data()
    init = X[:6].copy()
    w = rng.uniform(0.5, 2.0, len(X))
    km = TransformerKMeans(6, init=init, device="cpu").partial_fit(X[:1000], sample_weight=w[:1000])
    centers, counts = km.cluster_centers_.copy(), km.counts_.copy()
    km.partial_fit(X[1000:], sample_weight=w[1000:])
    d2 = ((X[1000:, None] - centers[None]) ** 2).sum(-1)
    labels = d2.argmin(1)
    for j in range(6):
        m = labels == j
        expected = (counts[j] * centers[j] + (w[1000:][m, None] * X[1000:][m]).sum(0)) / (
            counts[j] + w[1000:][m].sum())
        np.testing.assert_allclose(km.cluster_centers_[j], expected, rtol=1e-10)
    np.testing.assert_allclose(km.counts_.sum(), w.sum(), rtol=1e-12)


def test_one_pass_over_the_stream_clusters_like_a_full_fit():
    X = _data(20000, seed=1)
    full = TransformerKMeans(6, n_init=5, random_state=0, device="cpu").fit(X)
    km = TransformerKMeans(6, random_state=0, device="cpu")
    for batch in np.array_split(np.arange(len(X)), 10):
        km.partial_fit(X[batch])
    assert km.inertia(X) < 1.05 * full.inertia_


def test_soft_batches_and_float32():
    X = _data().astype(np.float32)
    km = TransformerKMeans(6, temperature=1.0, random_state=0, device="cpu")
    for batch in np.array_split(np.arange(len(X)), 3):
        km.partial_fit(X[batch])
    assert km.cluster_centers_.dtype == np.float32
    np.testing.assert_allclose(km.counts_.sum(), len(X), rtol=1e-5)  # soft weights sum to 1
    np.testing.assert_allclose(km.predict_proba(X[:5]).sum(1), 1.0, rtol=1e-5)


def test_fit_then_partial_fit_continues_and_fit_starts_over():
    X = _data()
    km = TransformerKMeans(6, random_state=0, device="cpu").fit(X[:2000])
    start = km.cluster_centers_.copy()
    km.partial_fit(X[2000:])
    # continued from fit's centers, each weighted by its cluster's size
    assert km.counts_.sum() == len(X)
    assert np.abs(km.cluster_centers_ - start).max() < 0.5
    km.fit(X)
    assert not hasattr(km, "counts_") and not hasattr(km, "n_steps_")


def test_partial_fit_refuses_what_it_cannot_do():
    X = _data()
    with pytest.raises(ValueError, match="first batch has n_samples=3"):
        TransformerKMeans(6, device="cpu").partial_fit(X[:3])
    km = TransformerKMeans(6, device="cpu").partial_fit(X[:100])
    with pytest.raises(ValueError, match="features"):
        km.partial_fit(X[:100, :3])
    with pytest.raises(ValueError, match="NaN"):
        km.partial_fit(np.where(X[:100] > 5, np.nan, X[:100]))
    before = km.cluster_centers_.copy()
    with pytest.raises(ValueError):
        km.partial_fit(X[:100], sample_weight=-np.ones(100))
    np.testing.assert_array_equal(km.cluster_centers_, before)  # nothing lost
    learned = np.zeros((10, 32))
    with pytest.raises(ValueError, match="learned weights"):
        TransformerKMeans(10, weights="learned", device="cpu").partial_fit(learned)


def test_partial_fit_takes_csr_batches_as_their_dense_form():
    import scipy.sparse as sp

    X = sp.random(600, 30, density=0.2, random_state=0, format="csr")
    w = np.random.default_rng(0).uniform(0.5, 2, 600)
    sparse, dense = (TransformerKMeans(5, random_state=0, device="cpu") for _ in range(2))
    for start in range(0, 600, 150):
        rows = slice(start, start + 150)
        sparse.partial_fit(X[rows], sample_weight=w[rows])
        dense.partial_fit(X[rows].toarray(), sample_weight=w[rows])
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, atol=1e-12)
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    np.testing.assert_allclose(sparse.counts_, dense.counts_)
    assert sparse.n_steps_ == 4
