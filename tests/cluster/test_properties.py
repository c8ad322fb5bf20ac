"""Properties of the circuit, checked with hypothesis on generic data (drawn from a seed)."""

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sktransformer import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)
from sktransformer.cluster import _lloyd

from . import reference

problems = st.fixed_dictionaries({
    "seed": st.integers(0, 2**32 - 1),
    "n": st.integers(8, 80),
    "d": st.integers(1, 6),
    "k": st.integers(1, 6),
    "spread": st.floats(0.1, 10.0),
})


def _problem(seed, n, d, k, spread):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * spread + rng.normal(size=(1, d)) * 3
    init = X[rng.choice(n, k, replace=False)].copy()
    return rng, X, init


@settings(max_examples=40, deadline=None)
@given(problems)
def test_row_permutation_does_not_change_the_result(p):
    rng, X, init = _problem(**p)
    perm = rng.permutation(len(X))
    a = TransformerKMeans(p["k"], init=init, max_iter=20, device="cpu").fit(X)
    b = TransformerKMeans(p["k"], init=init, max_iter=20, device="cpu").fit(X[perm])
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(a.labels_[perm], b.labels_)


@settings(max_examples=40, deadline=None)
@given(problems, st.sampled_from(["euclidean", "dot"]))
def test_objective_never_increases_from_layer_to_layer(p, attention):
    _, X, init = _problem(**p)
    Xt = torch.from_numpy(X)
    points = _lloyd.PointTokens(Xt, rows=16, attention=attention)
    centers = torch.from_numpy(init)
    labels = torch.empty(len(X), dtype=torch.long)
    min_dist = torch.empty(len(X), dtype=Xt.dtype)
    objective = reference.objective(X, init)
    for _ in range(8):
        sums, weight = _lloyd.layer(points, None, centers, labels=labels, min_dist=min_dist)
        _lloyd.relocate_empty(points, None, sums, weight, labels, min_dist)
        centers = _lloyd.average(sums, weight, centers)
        new_objective = reference.objective(X, centers.numpy())
        assert new_objective <= objective * (1 + 1e-12) + 1e-12
        objective = new_objective


@settings(max_examples=25, deadline=None)
@given(problems, st.floats(-100, 100), st.floats(0.01, 100))
def test_translation_and_scale_equivariance(p, offset, scale):
    _, X, init = _problem(**p)
    a = TransformerKMeans(p["k"], init=init, max_iter=20, device="cpu").fit(X)
    b = TransformerKMeans(p["k"], init=init * scale + offset, max_iter=20,
                          device="cpu").fit(X * scale + offset)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(b.cluster_centers_, a.cluster_centers_ * scale + offset,
                               rtol=1e-7, atol=1e-7 * (abs(offset) + scale * np.abs(X).max()))


# -- the variants ----------------------------------------------------------------------------

VARIANTS = {
    "spherical": lambda k, init: SphericalTransformerKMeans(k, init=init),
    "trimmed": lambda k, init: TrimmedTransformerKMeans(k, trim=0.1, init=init),
    "trimmed-per-cluster": lambda k, init: TrimmedTransformerKMeans(
        k, trim=0.2, trimming="per_cluster", init=init),
    "robust": lambda k, init: RobustTransformerKMeans(k, beta=1.0, init=init),
    "kmedoids": lambda k, init: TransformerKMedoids(k, init=init),
    "kmedoids-sq": lambda k, init: TransformerKMedoids(k, metric="sqeuclidean", init=init),
}
# the variants whose layer is the descent of a fixed objective (inertia_ after t layers)
HARD = ["spherical", "trimmed", "kmedoids", "kmedoids-sq"]


def _same_up_to_label_order(a, b):
    """Labels equal up to a renaming of the clusters (-1, the outliers, keeps its name)."""
    pairs = set(zip(a.tolist(), b.tolist()))
    assert len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))
    assert all((x < 0) == (y < 0) for x, y in pairs)


@settings(max_examples=40, deadline=None)
@given(problems, st.sampled_from(sorted(VARIANTS)))
def test_variants_ignore_the_row_order(p, name):
    # in one dimension exact ties are generic, and row order breaks them: the Euclidean
    # medoid of an even cluster is either middle point, and the 1-D sphere is two points
    assume(name not in ("kmedoids", "spherical") or p["d"] >= 2)
    rng, X, init = _problem(**p)
    perm = rng.permutation(len(X))
    make = VARIANTS[name]
    a = make(p["k"], init).set_params(max_iter=20, device="cpu").fit(X)
    b = make(p["k"], init).set_params(max_iter=20, device="cpu").fit(X[perm])
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-8, atol=1e-8)
    _same_up_to_label_order(a.labels_[perm], b.labels_)
    # and a reordering of the initial centers only renames the clusters
    order = rng.permutation(p["k"])
    c = make(p["k"], init[order]).set_params(max_iter=20, device="cpu").fit(X)
    _same_up_to_label_order(a.labels_, c.labels_)


@pytest.mark.filterwarnings("ignore:Maximum number of iterations")  # (max_iter cut)
@settings(max_examples=40, deadline=None)
@given(problems, st.sampled_from(HARD))
def test_hard_variant_objective_never_increases(p, name):
    _, X, init = _problem(**p)
    make = VARIANTS[name]
    objective = [make(p["k"], init).set_params(max_iter=t, tol=0, device="cpu")
                 .fit(X).inertia_ for t in range(1, 8)] if "kmedoids" not in name else [
        make(p["k"], init).set_params(max_iter=t, device="cpu").fit(X).inertia_
        for t in range(1, 8)]
    for before, after in zip(objective, objective[1:]):
        assert after <= before * (1 + 1e-10) + 1e-10


@settings(max_examples=20, deadline=None)
@given(problems)
def test_trimmed_with_trim_zero_is_kmeans(p):
    _, X, init = _problem(**p)
    km = TransformerKMeans(p["k"], init=init, max_iter=20, device="cpu").fit(X)
    tkm = TrimmedTransformerKMeans(p["k"], trim=0.0, init=init, max_iter=20,
                                   device="cpu").fit(X)
    np.testing.assert_array_equal(tkm.labels_, km.labels_)
    np.testing.assert_allclose(tkm.cluster_centers_, km.cluster_centers_, rtol=1e-9,
                               atol=1e-9)
    assert tkm.inertia_ == pytest.approx(km.inertia_, rel=1e-9, abs=1e-12)


@settings(max_examples=20, deadline=None)
@given(problems, st.floats(-3, 3))
def test_spherical_is_invariant_to_rescaling_rows(p, log_spread):
    rng, X, init = _problem(**p)
    scale = np.exp(rng.uniform(-abs(log_spread), abs(log_spread), size=(len(X), 1))) * 10.0 \
        ** rng.integers(-3, 4)
    a = SphericalTransformerKMeans(p["k"], init=init, max_iter=20, device="cpu").fit(X)
    b = SphericalTransformerKMeans(p["k"], init=init, max_iter=20, device="cpu").fit(X * scale)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-8, atol=1e-8)
