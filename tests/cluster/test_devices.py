"""The same fit on every device present (CUDA runs only where it exists)."""

import pickle
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from sktransformer import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)
from sktransformer.cluster._init import initial_generator
from sktransformer.utils import make_generator


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("temperature", [None, 0.5])
def test_fit_on_device_matches_sklearn_and_returns_numpy(device, dtype, temperature):
    X, _ = make_blobs(3000, n_features=6, centers=5, cluster_std=1.5, random_state=0)
    X = X.astype(dtype)
    init = X[:5]
    ours = TransformerKMeans(5, init=init, max_iter=10, tol=0, temperature=temperature,
                             device=device).fit(X)
    assert isinstance(ours.cluster_centers_, np.ndarray)
    assert ours.cluster_centers_.dtype == dtype
    if temperature is None:
        theirs = KMeans(5, init=init, n_init=1, max_iter=10, tol=0).fit(X)
        np.testing.assert_array_equal(ours.labels_, theirs.labels_)
        np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_,
                                   rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-4)
    # a model fitted on this device predicts anywhere: fitted state is numpy
    loaded = pickle.loads(pickle.dumps(ours)).set_params(device="cpu")
    np.testing.assert_array_equal(loaded.predict(X), ours.predict(X))


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_seeded_init_is_reproducible_on_device(device, init):
    X, _ = make_blobs(2000, centers=6, random_state=1)
    a = TransformerKMeans(6, init=init, random_state=3, device=device).fit(X)
    b = TransformerKMeans(6, init=init, random_state=3, device=device).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    if device == "cpu":
        np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    else:  # a GPU's index_add_ adds by atomics, in no fixed order: the same to rounding
        np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-12)
    # the initial draws are on the CPU: the same seed gives the same fit on any device
    on_cpu = TransformerKMeans(6, init=init, random_state=3, device="cpu").fit(X)
    assert np.mean(on_cpu.labels_ == a.labels_) > 0.99  # (not renamed clusters)


def test_initial_draws_come_from_a_cpu_generator_seeded_as_the_fit():
    cpu = torch.Generator().manual_seed(5)
    assert initial_generator(cpu, 3) is cpu
    elsewhere = SimpleNamespace(device=torch.device("cuda"))  # (a GPU's, without a GPU)
    drawn = initial_generator(elsewhere, 3)
    assert drawn.device.type == "cpu"
    assert drawn.initial_seed() == make_generator(3).initial_seed()


@pytest.mark.slow
def test_ten_million_points_fit_in_a_few_gigabytes():
    """n = 10^7, d = 16: the fit's extra peak memory stays under 3 GB (X is 640 MB)."""
    rng = np.random.default_rng(0)
    X = rng.random((10_000_000, 16), dtype=np.float32)

    def rss_mb(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith(field))

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = rss_mb("VmRSS")
    km = TransformerKMeans(16, init=X[:16], max_iter=2, tol=0, device="cpu").fit(X)
    assert km.labels_.shape == (10_000_000,)
    assert rss_mb("VmHWM") - base < 3 * 1024


@pytest.mark.parametrize("make", [
    lambda: SphericalTransformerKMeans(4, random_state=0),
    lambda: TrimmedTransformerKMeans(4, trim=0.1, random_state=0),
    lambda: TrimmedTransformerKMeans(4, trim=0.1, trimming="per_cluster", random_state=0),
    lambda: RobustTransformerKMeans(4, beta=1.0, random_state=0),
    lambda: TransformerKMedoids(4, random_state=0),
    lambda: TransformerKMedoids(4, metric="sqeuclidean", temperature=0.5, random_state=0),
], ids=["spherical", "trimmed", "trimmed-per-cluster", "robust", "kmedoids", "kmedoids-gumbel"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_variants_on_device_return_numpy_and_reload_on_cpu(device, make, dtype):
    X, _ = make_blobs(1500, n_features=5, centers=4, random_state=0)
    X = (X + 2.0).astype(dtype)
    est = make().set_params(device=device).fit(X)
    for name, value in vars(est).items():
        assert not isinstance(value, torch.Tensor), name
    assert est.cluster_centers_.dtype == dtype
    loaded = pickle.loads(pickle.dumps(est)).set_params(device="cpu")
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    if device != "cpu":  # the same fit as on the CPU (deterministic variants)
        on_cpu = make().set_params(device="cpu").fit(X)
        if getattr(est, "temperature", None) is None:
            assert np.mean(on_cpu.labels_ == est.labels_) > 0.99
