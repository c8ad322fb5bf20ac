"""Tensors in, on their device and in their dtype; outputs in X's namespace under
scikit-learn's array_api_dispatch; pickles that load on the CPU.

scikit-learn's own array-API checks (namespace, device, dtype and shape of every fitted
array and output, for torch and array-api-strict) run in ``test_common.py`` for every
estimator that declares ``array_api_support``; these compare values with the numpy path.
"""

import pickle

import numpy as np
import pytest
import sklearn
import torch
from sklearn.datasets import make_blobs

from sktransformer import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)

CLUSTERERS = [
    lambda init: TransformerKMeans(4, init=init),
    lambda init: TransformerKMeans(4, init=init, temperature=2.0, max_iter=30),
    lambda init: SphericalTransformerKMeans(4, init=init),
    lambda init: TrimmedTransformerKMeans(4, init=init, trim=0.1),
    lambda init: RobustTransformerKMeans(4, init=init),
    lambda init: TransformerKMedoids(4, init=init),
]
IDS = ["kmeans", "soft", "spherical", "trimmed", "robust", "kmedoids"]


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(600, 5, centers=4, cluster_std=1.5, random_state=0)
    return X, X[[0, 1, 2, 3]].copy()


@pytest.mark.parametrize("make", CLUSTERERS, ids=IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tensor_fit_keeps_its_dtype_and_equals_the_numpy_fit(blobs, make, dtype, device):
    X, init = blobs
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    ref = make(init.astype(np_dtype)).set_params(device=device).fit(X.astype(np_dtype))
    Xt = torch.as_tensor(X, dtype=dtype, device=device)
    est = make(init.astype(np_dtype)).fit(Xt)  # device="auto": the tensor's device
    assert est.cluster_centers_.dtype == np_dtype
    np.testing.assert_allclose(est.cluster_centers_, ref.cluster_centers_,
                               rtol=1e-5 if dtype == torch.float32 else 1e-12, atol=1e-5)
    np.testing.assert_array_equal(est.labels_, ref.labels_)
    labels = est.predict(Xt)
    assert isinstance(labels, np.ndarray)  # without dispatch: numpy, as scikit-learn
    np.testing.assert_array_equal(labels, ref.predict(X.astype(np_dtype)))
    assert est.transform(Xt).dtype == np_dtype


def test_auto_device_follows_the_tensor(blobs, monkeypatch):
    X, init = blobs
    seen = []
    import sktransformer.cluster._base as base

    real = base.resolve_device

    def spy(device, **kwargs):
        seen.append(real(device, **kwargs))
        return seen[-1]

    monkeypatch.setattr(base, "resolve_device", spy)
    TransformerKMeans(4, init=init).fit(torch.as_tensor(X))
    assert seen[0] == torch.device("cpu")


@pytest.mark.parametrize("make", CLUSTERERS, ids=IDS)
def test_under_dispatch_fitted_arrays_and_outputs_follow_the_tensor(blobs, make, device):
    X, init = blobs
    ref = make(init).set_params(device=device).fit(X)
    Xt = torch.as_tensor(X, device=device)
    with sklearn.config_context(array_api_dispatch=True):
        est = make(init).fit(Xt)
        assert isinstance(est.cluster_centers_, torch.Tensor)
        assert est.cluster_centers_.device == Xt.device
        assert est.labels_.dtype == torch.int32
        for method in ("predict", "transform", "fit_predict"):
            out = getattr(est, method)(Xt)
            assert isinstance(out, torch.Tensor) and out.device == Xt.device
            np.testing.assert_allclose(out.cpu().numpy(), getattr(ref, method)(X),
                                       rtol=1e-10, atol=1e-10)
        with pytest.raises(ValueError, match="same namespace"):
            est.predict(X)
        restored = pickle.loads(pickle.dumps(est))
    # pickles hold CPU tensors: a model fitted on a GPU loads on a CPU-only machine
    assert restored.cluster_centers_.device.type == "cpu"
    np.testing.assert_array_equal(restored.predict(X), ref.predict(X))


def test_array_api_strict_input_round_trips():
    xp = pytest.importorskip("array_api_strict")
    X, _ = make_blobs(200, 3, centers=3, random_state=0)
    ref = TransformerKMeans(3, random_state=0, device="cpu").fit(X)
    Xs = xp.asarray(X)
    with sklearn.config_context(array_api_dispatch=True):
        est = TransformerKMeans(3, random_state=0, device="cpu").fit(Xs)
        labels = est.predict(Xs)
    assert type(labels).__module__.startswith("array_api_strict")
    np.testing.assert_array_equal(np.asarray(labels), ref.labels_)


@pytest.mark.parametrize("bad, match", [
    (torch.tensor([[0.0, float("nan")], [1.0, 2.0]]), "NaN or infinity"),
    (torch.ones(5), "2D"),
    (torch.ones(0, 2), "at least one sample"),
    (torch.ones(3, 2, dtype=torch.complex64), "Complex"),
])
def test_bad_tensors_are_clear_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        TransformerKMeans(1, device="cpu").fit(bad)


def test_integer_tensors_become_float64_and_feature_counts_are_checked():
    X = torch.arange(40).reshape(20, 2)
    est = TransformerKMeans(2, random_state=0, device="cpu").fit(X)
    assert est.cluster_centers_.dtype == np.float64
    with pytest.raises(ValueError, match="features"):
        est.predict(torch.ones(3, 3))


# -- the other families ------------------------------------------------------------------

def _others():
    from sktransformer import (
        ImportanceSampledRFF,
        KNNAttentionRegressor,
        ParticleKernelClassifier,
        ParticleKernelSampler,
        SequenceAttentionClassifier,
    )
    return [
        ("sampler", lambda: ParticleKernelSampler(16, n_iter=10, random_state=0), "transform"),
        ("classifier", lambda: ParticleKernelClassifier(16, n_iter=10, random_state=0),
         "predict_proba"),
        ("importance", lambda: ImportanceSampledRFF(16, random_state=0), "transform"),
        ("regressor", lambda: KNNAttentionRegressor(n_neighbors=5, max_iter=5,
                                                    random_state=0), "predict"),
        ("sequence", lambda: SequenceAttentionClassifier(d_model=8, max_epochs=2,
                                                         random_state=0), "predict_proba"),
    ]


@pytest.mark.parametrize("name, make, method", _others(), ids=[o[0] for o in _others()])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_other_families_take_tensors_and_match_numpy(name, make, method, dtype):
    from sklearn.datasets import make_classification

    X, y = make_classification(120, 6, random_state=0)
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    X = X.astype(np_dtype)
    if name == "regressor":
        y = X[:, 0] * 2 + X[:, 1]
    ref = make().set_params(device="cpu") if "device" in make().get_params() else make()
    ref.fit(X, y)
    est = make().fit(torch.as_tensor(X), torch.as_tensor(y))
    out = getattr(est, method)(torch.as_tensor(X))
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, getattr(ref, method)(X), rtol=1e-4, atol=1e-5)
    if method == "transform":
        assert out.dtype == np_dtype and est.particles_.dtype == np_dtype
    with sklearn.config_context(array_api_dispatch=True):
        est = make().fit(torch.as_tensor(X), torch.as_tensor(y))
        out = getattr(est, method)(torch.as_tensor(X))
        assert isinstance(out, torch.Tensor)
        if name in ("classifier", "sequence"):
            labels = est.predict(torch.as_tensor(X))
            assert isinstance(labels, torch.Tensor)
            np.testing.assert_array_equal(labels.numpy(), ref.predict(X))


def test_regressor_runs_in_float32_for_float32_data():
    from sktransformer import KNNAttentionRegressor

    X = np.random.default_rng(0).normal(size=(80, 3)).astype(np.float32)
    est = KNNAttentionRegressor(n_neighbors=5, max_iter=3, device="cpu").fit(X, X[:, 0])
    assert est.projection_.dtype == np.float32
    assert est.predict(X).dtype == np.float32


def test_sequence_token_tensors_map_like_numpy():
    from sktransformer import SequenceAttentionClassifier
    from sktransformer.datasets import make_order_task

    X, y = make_order_task(200, length=12, random_state=0)
    ref = SequenceAttentionClassifier(d_model=8, max_epochs=2, random_state=0,
                                      device="cpu").fit(X, y)
    est = SequenceAttentionClassifier(d_model=8, max_epochs=2, random_state=0).fit(
        torch.as_tensor(X), torch.as_tensor(y))
    np.testing.assert_array_equal(est._vocabulary, ref._vocabulary)
    unseen = torch.as_tensor(X).clone()
    unseen[:, 3] = 10 ** 9  # an id fit never saw: the shared row
    np.testing.assert_allclose(est.predict_proba(unseen), ref.predict_proba(unseen.numpy()),
                               atol=1e-6)
    with pytest.raises(ValueError, match="non-negative"):
        est.predict(torch.full((2, 12), -1))


def test_unfitted_under_dispatch_is_not_fitted_error():
    from sklearn.exceptions import NotFittedError

    with sklearn.config_context(array_api_dispatch=True):
        with pytest.raises(NotFittedError):
            TransformerKMeans(2, device="cpu").predict(torch.ones(3, 2))
