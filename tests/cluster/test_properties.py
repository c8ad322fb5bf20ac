"""Properties of the circuit, checked with hypothesis on generic data (drawn from a seed)."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sktransformer import TransformerKMeans
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
