"""scikit-learn's estimator checks over every public estimator of the package."""

import inspect
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

import sktransformer
from sktransformer.utils import DeviceWarning


def public_estimators():
    return [
        getattr(sktransformer, name)
        for name in sktransformer.__all__
        if inspect.isclass(getattr(sktransformer, name))
        and issubclass(getattr(sktransformer, name), BaseEstimator)
    ]


def test_every_public_estimator_is_checked():
    names = {cls.__name__ for cls in public_estimators()}
    assert {"TransformerKMeans", "SphericalTransformerKMeans", "TrimmedTransformerKMeans",
            "RobustTransformerKMeans", "TransformerKMedoids", "ParticleKernelSampler",
            "ParticleKernelClassifier", "ImportanceSampledRFF", "KNNAttentionRegressor",
            "SequenceAttentionClassifier"} <= names


# The random initialization (k-means++ or random rows) draws points in row order, so
# weights and the shuffled repetition they are compared with start from different centers.
# The layers themselves are weight/repetition equivalent: see
# tests/cluster/test_kmeans.py::test_sample_weight_equals_repetition_from_fixed_init and
# tests/cluster/test_variants.py::test_sample_weight_equals_repetition_from_fixed_init.
_RANDOM_INIT = {
    check: ("random init draws depend on row order; equivalence from a fixed init is "
            "tested in tests/cluster")
    for check in ("check_sample_weight_equivalence_on_dense_data",
                  "check_sample_weight_equivalence_on_sparse_data")
}
EXPECTED_FAILED_CHECKS = {
    name: _RANDOM_INIT
    for name in ["TransformerKMeans", "SphericalTransformerKMeans", "TrimmedTransformerKMeans",
                 "RobustTransformerKMeans", "TransformerKMedoids"]
}


# scikit-learn's sparse-input checks take an estimator with predict_proba for a classifier
# (they read its classifier tags, None for a clusterer); soft k-means' predict_proba on
# sparse input is compared with the dense one in tests/cluster/test_sparse.py.
_SOFT_SPARSE = {
    check: "the check reads classifier tags whenever predict_proba exists"
    for check in ("check_estimator_sparse_array", "check_estimator_sparse_matrix")
}


def expected_failed_checks(estimator):
    failed = dict(EXPECTED_FAILED_CHECKS.get(type(estimator).__name__, {}))
    if getattr(estimator, "temperature", None) is not None and hasattr(estimator,
                                                                       "predict_proba"):
        failed.update(_SOFT_SPARSE)
    return failed


def _instance(cls):
    """Each estimator with the CPU as its device (where it has one); the particle kernels
    with fewer Langevin steps (the checks test the API, not the kernel: 2 CPU-minutes saved)."""
    est = cls()
    if "device" in est.get_params():
        est.set_params(device="cpu")
    if "n_iter" in est.get_params():
        est.set_params(n_iter=20)
    if "max_epochs" in est.get_params():  # the sequence classifier: a few epochs suffice
        est.set_params(max_epochs=15)
    return est


@parametrize_with_checks([_instance(cls) for cls in public_estimators()],
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@parametrize_with_checks([sktransformer.TransformerKMeans(temperature=0.5, device="cpu"),
                          sktransformer.TransformerKMeans(attention="dot", device="cpu"),
                          sktransformer.TrimmedTransformerKMeans(trimming="per_cluster",
                                                                 device="cpu"),
                          sktransformer.TransformerKMedoids(metric="sqeuclidean",
                                                            temperature=0.1, device="cpu")],
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_variants(estimator, check):
    check(estimator)


def _fitted(est):
    """``est`` fitted on small data of the kind it takes, and that data."""
    from sklearn.base import is_regressor
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    if est.__sklearn_tags__().input_tags.string:  # text in: one short document per row
        X = np.array([" ".join(f"w{int(v)}" for v in row * 3) for row in X], dtype=object)
    if is_regressor(est):
        y = X[:, 0].copy()
        X = X[:, 1:]
    return est.fit(X, y), X


@pytest.mark.parametrize("cls", public_estimators(), ids=lambda c: c.__name__)
def test_fitted_on_a_gpu_predicts_on_a_cpu_only_machine(cls, monkeypatch):
    """Fitted state is numpy: a model fitted with device="cuda" (simulated: fitted, then
    its device set as it was on the GPU machine), pickled and loaded where CUDA is absent,
    still predicts, the same as on the CPU, with a DeviceWarning naming the fallback."""
    est, X = _fitted(_instance(cls))
    for name, value in vars(est).items():
        if name.endswith("_") and not name.startswith("_"):
            assert not isinstance(value, torch.Tensor), name
    method = next(m for m in ("predict", "transform") if hasattr(est, m))
    expected = getattr(est, method)(X)
    for part in [est, *vars(est).values()]:  # with fitted parts, as on the GPU machine
        if isinstance(part, BaseEstimator) and "device" in part.get_params():
            part.set_params(device="cuda")
    blob = pickle.dumps(est)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = pickle.loads(blob)
    if "device" not in est.get_params():  # a CPU-only estimator: nothing to fall back from
        np.testing.assert_allclose(getattr(loaded, method)(X), expected)
        return
    with pytest.warns(DeviceWarning, match="CUDA is not available"):
        got = getattr(loaded, method)(X)
    np.testing.assert_allclose(got, expected)


@pytest.mark.parametrize("cls", [c for c in public_estimators() if hasattr(c, "transform")],
                         ids=lambda c: c.__name__)
def test_transformers_name_their_outputs_and_speak_pandas(cls):
    pd = pytest.importorskip("pandas")
    est, X = _fitted(_instance(cls))
    names = est.get_feature_names_out()
    prefix = cls.__name__.lower()
    assert len(names) == est.transform(X[:3]).shape[1]
    assert all(n.startswith(prefix) for n in names)
    est.set_output(transform="pandas")
    out = est.transform(X[:3] if X.ndim == 1 else pd.DataFrame(X[:3]))
    assert isinstance(out, pd.DataFrame) and list(out.columns) == list(names)


@pytest.mark.parametrize("cls", public_estimators(), ids=lambda c: c.__name__)
def test_html_repr(cls):
    html = _instance(cls)._repr_html_()
    assert cls.__name__ in html and "<div" in html


@pytest.mark.parametrize("cls", public_estimators(), ids=lambda c: c.__name__)
def test_skops_round_trip(cls):
    """skops stores every fitted estimator as plain arrays and settings: the only types a
    user is asked to trust are the package's own classes."""
    sio = pytest.importorskip("skops.io")
    est, X = _fitted(_instance(cls))
    blob = sio.dumps(est)
    untrusted = sio.get_untrusted_types(data=blob)
    assert all(name.startswith("sktransformer.") for name in untrusted), untrusted
    loaded = sio.loads(blob, trusted=untrusted)
    for method in ("predict", "transform", "predict_proba"):
        if hasattr(est, method):
            np.testing.assert_allclose(getattr(loaded, method)(X), getattr(est, method)(X))
