"""Sparse input (``_sparse.py``): CSR data clustered without densifying, equal to the dense
fit; the variants that need dense data say so."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sktransformer import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)
from sktransformer.cluster._sparse import SparsePointTokens


@pytest.fixture(scope="module")
def tfidf_like():
    X = sp.random(1500, 300, density=0.03, random_state=0, format="csr")
    X.data = np.abs(X.data) + 0.1
    return X, X[:6].toarray()


@pytest.mark.parametrize("make", [
    lambda init: TransformerKMeans(6, init=init),
    lambda init: TransformerKMeans(6, init=init, temperature=0.05, max_iter=25),
    lambda init: TransformerKMeans(6, init=init, attention="dot"),
    lambda init: TransformerKMeans(6, init=init, attention="cosine"),
    lambda init: SphericalTransformerKMeans(6, init=init),
], ids=["hard", "soft", "dot", "cosine", "spherical"])
@pytest.mark.parametrize("weighted", [False, True])
def test_csr_fit_equals_the_dense_fit(tfidf_like, make, weighted, device):
    X, init = tfidf_like
    w = np.random.default_rng(0).uniform(0.5, 2, X.shape[0]) if weighted else None
    dense = make(init).set_params(device=device).fit(X.toarray(), sample_weight=w)
    sparse = make(init).set_params(device=device).fit(X, sample_weight=w)
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, atol=1e-12)
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    assert sparse.n_iter_ == dense.n_iter_
    assert sparse.inertia_ == pytest.approx(dense.inertia_, rel=1e-10)
    np.testing.assert_array_equal(sparse.predict(X), dense.predict(X.toarray()))
    np.testing.assert_allclose(sparse.transform(X) ** 2, dense.transform(X.toarray()) ** 2,
                               atol=1e-12)
    if hasattr(dense, "predict_proba"):
        np.testing.assert_allclose(sparse.predict_proba(X), dense.predict_proba(X.toarray()),
                                   atol=1e-10)


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_initializations_draw_the_same_rows(tfidf_like, init):
    X, _ = tfidf_like
    dense = TransformerKMeans(6, init=init, random_state=0, device="cpu").fit(X.toarray())
    sparse = TransformerKMeans(6, init=init, random_state=0, device="cpu").fit(X)
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, atol=1e-12)


def test_float32_csr_stays_float32_and_empty_clusters_are_relocated(tfidf_like):
    X, init = tfidf_like
    init = init.copy()
    init[3] = 100.0  # no point is closest: relocated onto the farthest point
    X32 = X.astype(np.float32)
    est = TransformerKMeans(6, init=init.astype(np.float32), device="cpu").fit(X32)
    ref = TransformerKMeans(6, init=init.astype(np.float32), device="cpu").fit(X32.toarray())
    assert est.cluster_centers_.dtype == np.float32
    assert np.abs(est.cluster_centers_).max() < 10
    np.testing.assert_allclose(est.cluster_centers_, ref.cluster_centers_, atol=1e-5)


def test_rows_are_gathered_from_csr(tfidf_like):
    X, _ = tfidf_like
    points = SparsePointTokens(X, "cpu", rows=100)
    index = torch.tensor([0, 17, 17, 1499, 3])
    np.testing.assert_array_equal(points.rows_of(index).numpy(), X[index.numpy()].toarray())
    np.testing.assert_array_equal(points.rows_of(index[1]).numpy(), X[17].toarray()[0])
    np.testing.assert_allclose(points.x_sq.numpy(),
                               np.asarray(X.multiply(X).sum(1)).ravel(), rtol=1e-12)


def test_memory_follows_the_non_zeros():
    # 200000 x 50000 would be 80 GB dense; its CSR (1e6 non-zeros) fits in a few MB
    rng = np.random.default_rng(0)
    n, d, per_row = 200_000, 50_000, 5
    X = sp.csr_matrix((rng.random(n * per_row), rng.integers(0, d, n * per_row),
                       np.arange(0, n * per_row + 1, per_row)), shape=(n, d))
    est = SphericalTransformerKMeans(5, random_state=0, max_iter=3, device="cpu").fit(X)
    assert est.cluster_centers_.shape == (5, 50_000)
    assert np.allclose(np.linalg.norm(est.cluster_centers_, axis=1), 1)


def test_learned_weights_need_dense_data():
    # (partial_fit takes CSR: tests/cluster/test_partial_fit.py)
    X = sp.random(40, 32, density=0.5, format="csr", random_state=0)
    with pytest.raises(TypeError, match="weights=None"):
        TransformerKMeans(10, weights="learned", device="cpu").fit(X)


@pytest.mark.parametrize("make", [
    lambda: TrimmedTransformerKMeans(3, random_state=0, device="cpu"),
    lambda: TrimmedTransformerKMeans(3, trimming="per_cluster", random_state=0, device="cpu"),
    lambda: RobustTransformerKMeans(3, random_state=0, device="cpu"),
    lambda: TransformerKMedoids(3, random_state=0, device="cpu"),
    lambda: TransformerKMedoids(3, metric="sqeuclidean", init="heuristic", random_state=0,
                                device="cpu"),
    lambda: TransformerKMedoids(3, temperature=0.5, random_state=0, device="cpu"),
])
def test_variants_on_csr_equal_their_dense_fits(make):
    """Trimming's radii, sparsemax's weights and the medoid search on CSR rows: the same
    labels, centers, inertia and distances as on the dense matrix."""
    X = sp.random(120, 30, density=0.2, format="csr", random_state=1)
    X.data *= 3
    X[:3] = X[:3] * 20  # (outliers for trimming and sparsemax to drop)
    sparse, dense = make().fit(X), make().fit(X.toarray())
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, atol=1e-12)
    assert sparse.inertia_ == pytest.approx(dense.inertia_, rel=1e-12)
    np.testing.assert_allclose(sparse.transform(X), dense.transform(X.toarray()),
                               atol=1e-12)
    np.testing.assert_array_equal(sparse.predict(X), dense.predict(X.toarray()))


def test_a_medoid_on_csr_is_exactly_zero_from_itself():
    X = sp.random(60, 20, density=0.3, format="csr", random_state=2)
    est = TransformerKMedoids(4, random_state=0, device="cpu").fit(X)
    own = est.transform(X)[est.medoid_indices_, np.arange(4)]
    np.testing.assert_array_equal(own, 0.0)


def _unsorted_with_duplicates(X):
    """X with each row's entries reversed and its first entry split into two halves (a
    duplicate): the same matrix for scipy, not canonical."""
    rows, indices, data = [0], [], []
    for i in range(X.shape[0]):
        row = X[i]
        idx, val = list(row.indices[::-1]), list(row.data[::-1])
        if idx:
            idx, val = [idx[0]] + idx, [val[0] / 2, val[0] / 2] + val[1:]
        indices += idx
        data += val
        rows.append(len(indices))
    out = sp.csr_matrix((np.array(data), np.array(indices), np.array(rows)), shape=X.shape)
    assert not out.has_canonical_format
    return out


@pytest.mark.parametrize("make", [lambda: TransformerKMeans(4, random_state=0),
                                  lambda: SphericalTransformerKMeans(4, random_state=0)],
                         ids=["hard", "spherical"])
def test_the_callers_csr_is_never_changed(tfidf_like, make):
    X = _unsorted_with_duplicates(tfidf_like[0][:300])
    before = (X.indptr.copy(), X.indices.copy(), X.data.copy())
    est = make().fit(X)
    for method in ("predict", "transform", "score", "partial_fit"):
        if hasattr(est, method):
            getattr(est, method)(X)
    for got, kept in zip((X.indptr, X.indices, X.data), before):
        np.testing.assert_array_equal(got, kept)
    canonical = X.copy()
    canonical.sum_duplicates()  # duplicates count as their sum, as in scipy
    expected = make().fit(canonical)
    np.testing.assert_array_equal(est.fit(X).labels_, expected.labels_)
    np.testing.assert_allclose(est.cluster_centers_, expected.cluster_centers_, atol=1e-12)


def test_a_sparse_sample_weight_is_a_clear_error(tfidf_like):
    X = tfidf_like[0][:100]
    with pytest.raises(TypeError, match="sample_weight must be a dense 1-D array"):
        TransformerKMeans(3, random_state=0).fit(X, sample_weight=sp.csr_matrix(np.ones(100)))
