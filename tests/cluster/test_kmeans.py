"""TransformerKMeans against scikit-learn's KMeans and the scikit-learn conventions."""

import logging
import pickle
import re

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, load_iris, load_wine, make_blobs, make_classification
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktransformer import TransformerKMeans
from sktransformer.cluster import neg_inertia_scorer
from sktransformer.utils import DeviceWarning

from ..conftest import jittered


def _datasets():
    X_blobs, _ = make_blobs(2000, n_features=5, centers=6, cluster_std=2.0, random_state=0)
    X_cls, _ = make_classification(1500, n_features=12, n_informative=6, random_state=1)
    return {
        "iris": (jittered(load_iris().data), 3),
        "wine": (StandardScaler().fit_transform(load_wine().data), 3),
        "digits": (jittered(load_digits().data), 10),
        "blobs": (X_blobs, 6),
        "classification": (X_cls, 8),
    }


DATASETS = _datasets()


@pytest.mark.parametrize("name", sorted(DATASETS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("attention", ["euclidean", "dot"])
def test_hard_mode_equals_sklearn_lloyd(name, dtype, attention):
    X, k = DATASETS[name]
    X = X.astype(dtype)
    init = X[np.random.default_rng(0).choice(len(X), k, replace=False)]
    ours = TransformerKMeans(k, init=init, n_init=1, max_iter=10, tol=0, attention=attention,
                             device="cpu").fit(X)
    theirs = KMeans(k, init=init, n_init=1, max_iter=10, tol=0, algorithm="lloyd").fit(X)
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=rtol,
                               atol=rtol * np.abs(X).max())
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=10 * rtol)
    assert ours.n_iter_ == theirs.n_iter_
    assert ours.cluster_centers_.dtype == dtype


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_soft_mode_at_gamma_1e4_follows_lloyd(dtype):
    # The paper's numerical check: gamma = 1e4, d = 2, n = 10000, k = 5, 10 layers.
    rng = np.random.default_rng(0)
    means = rng.random((5, 2))
    X = np.concatenate([m + 0.1 * rng.normal(size=(2000, 2)) for m in means])
    X = ((X - X.min(0)) / (X.max(0) - X.min(0))).astype(dtype)
    init = X[rng.choice(len(X), 5, replace=False)]
    for n_layers in (1, 3, 10):
        soft = TransformerKMeans(5, temperature=1e-4, init=init, max_iter=n_layers, tol=0,
                                 device="cpu").fit(X)
        hard = KMeans(5, init=init, n_init=1, max_iter=n_layers, tol=0).fit(X)
        assert np.log(soft.inertia_) == pytest.approx(np.log(hard.inertia_), abs=2e-3)
        assert np.mean(soft.labels_ == hard.labels_) > 0.995
        np.testing.assert_allclose(soft.cluster_centers_, hard.cluster_centers_, atol=5e-3)


def test_default_kmeans_plusplus_finds_separated_blobs():
    X, y = make_blobs(3000, centers=5, cluster_std=0.5, random_state=3)
    km = TransformerKMeans(5, random_state=0, device="cpu").fit(X)
    assert adjusted_rand_score(y, km.labels_) == 1.0
    best_sklearn = KMeans(5, n_init=10, random_state=0).fit(X).inertia_
    assert km.inertia_ == pytest.approx(best_sklearn, rel=1e-6)


def test_random_init_with_n_init_keeps_the_best_run():
    X, _ = make_blobs(600, centers=8, cluster_std=1.5, random_state=0)
    # the first of the 10 runs starts from the same draw as the single run: the best of ten
    # can only be as good or better, and on 8 overlapping blobs it is strictly better
    single = TransformerKMeans(8, init="random", n_init=1, random_state=0, device="cpu").fit(X)
    many = TransformerKMeans(8, init="random", n_init=10, random_state=0, device="cpu").fit(X)
    assert many.inertia_ < single.inertia_
    assert "auto" == TransformerKMeans(init="random").n_init


def test_batch_size_does_not_change_the_result():
    X, k = DATASETS["blobs"]
    a = TransformerKMeans(k, random_state=0, device="cpu").fit(X)
    b = TransformerKMeans(k, random_state=0, batch_size=37, device="cpu").fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-10)


def test_sample_weight_equals_repetition_from_fixed_init():
    X, k = DATASETS["blobs"]
    w = np.random.default_rng(0).integers(0, 4, len(X))
    init = X[w > 0][:k]
    common = dict(init=init, n_init=1, max_iter=50, tol=0, device="cpu")
    weighted = TransformerKMeans(k, **common).fit(X, sample_weight=w)
    repeated = TransformerKMeans(k, **common).fit(np.repeat(X, w, axis=0))
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_, rtol=1e-9)
    assert weighted.inertia_ == pytest.approx(repeated.inertia_, rel=1e-9)
    theirs = KMeans(k, init=init, n_init=1, max_iter=50, tol=0).fit(X, sample_weight=w)
    np.testing.assert_allclose(weighted.cluster_centers_, theirs.cluster_centers_, rtol=1e-9)


def test_predict_transform_score_match_sklearn():
    X, k = DATASETS["wine"]
    init = X[:k]
    ours = TransformerKMeans(k, init=init, device="cpu").fit(X)
    theirs = KMeans(k, init=init, n_init=1).fit(X)
    X_new = X[::3] + 0.1
    np.testing.assert_array_equal(ours.predict(X_new), theirs.predict(X_new))
    np.testing.assert_allclose(ours.transform(X_new), theirs.transform(X_new), rtol=1e-9)
    # KMeans.score is minus the inertia: our inertia(X) and neg_inertia_scorer
    assert ours.inertia(X_new) == pytest.approx(-theirs.score(X_new), rel=1e-9)
    assert neg_inertia_scorer(ours, X_new) == pytest.approx(theirs.score(X_new), rel=1e-9)
    np.testing.assert_array_equal(ours.predict(X), ours.labels_)
    assert ours.inertia(X) == pytest.approx(ours.inertia_, rel=1e-9)
    np.testing.assert_array_equal(clone(ours).fit_predict(X), ours.labels_)
    np.testing.assert_allclose(clone(ours).fit_transform(X), ours.transform(X))
    assert ours.labels_.dtype == np.int32


def test_predict_proba_only_in_soft_mode():
    X, k = DATASETS["blobs"]
    hard = TransformerKMeans(k, device="cpu").fit(X)
    assert not hasattr(hard, "predict_proba")
    soft = TransformerKMeans(k, temperature=4.0, random_state=0, device="cpu").fit(X)
    proba = soft.predict_proba(X)
    assert proba.shape == (len(X), k)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(proba.argmax(1), soft.predict(X))
    d2 = soft.transform(X) ** 2
    expected = np.exp(-(d2 - d2.min(1, keepdims=True)) / 4.0)
    np.testing.assert_allclose(proba, expected / expected.sum(1, keepdims=True), rtol=1e-8)


def test_verbose_logs_a_fixed_format(caplog, capsys):
    """verbose=1: scikit-learn's messages, through the "sktransformer" logger."""
    X, k = DATASETS["iris"]
    with caplog.at_level(logging.INFO, logger="sktransformer"):
        TransformerKMeans(k, verbose=1, random_state=0, device="cpu").fit(X)
    out = [r.getMessage() for r in caplog.records if r.name == "sktransformer"]
    assert out[0] == "Initialization complete"
    assert re.fullmatch(r"Iteration 0, inertia \d+\.\d+(e[+-]\d+)?\.", out[1])
    stop = r"Converged at iteration \d+: (strict convergence|center shift .*)\."
    assert re.fullmatch(stop, out[-1])
    assert capsys.readouterr().out == ""  # logged, never printed


def test_verbose_levels_bar_and_silence(caplog, capsys):
    X, k = DATASETS["iris"]
    with caplog.at_level(logging.INFO, logger="sktransformer"):
        TransformerKMeans(k, random_state=0, device="cpu").fit(X)
        assert not caplog.records
        assert capsys.readouterr().err == ""
        TransformerKMeans(k, verbose=1, random_state=0, device="cpu").fit(X)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "Initialization complete"
    assert messages[-1].startswith("Converged")
    assert "layers" in capsys.readouterr().err  # the tqdm bar


def test_verbose_prints_when_logging_is_not_configured(capsys, monkeypatch):
    """Without any handler (a plain script), verbose messages reach stdout, as
    scikit-learn's do; the temporary handler is gone afterwards."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    X, k = DATASETS["iris"]
    TransformerKMeans(k, verbose=1, random_state=0, device="cpu").fit(X)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Initialization complete"
    assert not logging.getLogger("sktransformer").handlers


def test_duplicate_points_warn_and_never_give_nan():
    X = np.repeat(np.arange(6, dtype=float).reshape(3, 2), 10, axis=0)
    message = r"Number of distinct clusters \(3\) found smaller than n_clusters \(5\)"
    with pytest.warns(ConvergenceWarning, match=message):
        km = TransformerKMeans(5, random_state=0, device="cpu").fit(X)
    assert np.isfinite(km.cluster_centers_).all()


def test_distinct_clusters_leave_the_trimmed_points_out():
    from sktransformer import TrimmedTransformerKMeans
    # three distinct points, ten copies each, and a far outlier, trimmed: 3 clusters, not 4
    X = np.vstack([np.repeat(np.arange(6, dtype=float).reshape(3, 2), 10, axis=0),
                   [[100.0, 100.0]]])
    message = r"Number of distinct clusters \(3\) found smaller than n_clusters \(4\)"
    with pytest.warns(ConvergenceWarning, match=message):
        km = TrimmedTransformerKMeans(4, trim=0.04, init=X[[0, 10, 20, 5]],
                                      device="cpu").fit(X)
    assert km.labels_[-1] == -1


def test_explicit_init_with_n_init_warns():
    X, k = DATASETS["iris"]
    with pytest.warns(RuntimeWarning, match="performing only one init"):
        TransformerKMeans(k, init=X[:k], n_init=3, device="cpu").fit(X)


def test_callable_init_receives_data_and_random_state():
    X, k = DATASETS["iris"]
    calls = []

    def init(data, n_clusters, random_state):
        calls.append((data.shape, n_clusters))
        return data[random_state.choice(len(data), n_clusters, replace=False)]

    km = TransformerKMeans(k, init=init, n_init=3, random_state=0, device="cpu").fit(X)
    assert calls == [(X.shape, k)] * 3  # once per initialization, as scikit-learn does
    assert km.cluster_centers_.shape == (k, X.shape[1])


# -- bad input: each a clear error naming the problem -------------------------------------

@pytest.mark.parametrize("bad, match", [
    (np.nan, "NaN"),
    (np.inf, "infinity"),
])
def test_nan_and_inf_are_rejected(bad, match):
    X = np.random.default_rng(0).normal(size=(20, 3))
    X[4, 1] = bad
    with pytest.raises(ValueError, match=match):
        TransformerKMeans(2, device="cpu").fit(X)


def test_too_few_samples():
    with pytest.raises(ValueError, match=r"n_samples=3 should be >= n_clusters=5"):
        TransformerKMeans(5, device="cpu").fit(np.random.rand(3, 2))


def test_wrong_n_features_at_predict():
    km = TransformerKMeans(2, device="cpu").fit(np.random.rand(20, 3))
    with pytest.raises(ValueError, match="X has 4 features, but TransformerKMeans is expecting 3"):
        km.predict(np.random.rand(5, 4))


def test_non_numeric_input():
    with pytest.raises(ValueError, match="could not convert string to float"):
        TransformerKMeans(2, device="cpu").fit(np.array([["a", "b"], ["c", "d"], ["e", "f"]]))


@pytest.mark.parametrize("temperature", [0, -1.0])
def test_temperature_must_be_positive(temperature):
    message = r"'temperature' parameter .* must be None or a float in the range \(0(\.0)?, inf\)"
    with pytest.raises(ValueError, match=message):
        TransformerKMeans(2, temperature=temperature, device="cpu").fit(np.random.rand(10, 2))


def test_init_shape_mismatch_reads_like_scikit_learns():
    with pytest.raises(ValueError, match=r"initial centers \(2, 3\) does not match the "
                                         r"number of clusters 3: pass n_clusters=2"):
        TransformerKMeans(3, init=np.zeros((2, 3)), device="cpu").fit(np.random.rand(10, 3))
    with pytest.raises(ValueError, match=r"initial centers \(3, 2\) does not match the "
                                         r"number of features of the data 3"):
        TransformerKMeans(3, init=np.zeros((3, 2)), device="cpu").fit(np.random.rand(10, 3))


def test_random_init_draws_rows_in_proportion_to_sample_weight(monkeypatch):
    """Weight 0 masks a row out of the random draw too, as in scikit-learn."""
    from sktransformer.cluster import _base

    drawn = []

    def spy(*args, **kwargs):
        centers, indices = random_rows(*args, **kwargs)
        drawn.append(indices)
        return centers, indices
    random_rows = _base.random_rows
    monkeypatch.setattr(_base, "random_rows", spy)
    X = np.random.default_rng(0).normal(size=(100, 2))
    w = np.r_[np.ones(10), np.zeros(90)]
    for seed in range(20):
        TransformerKMeans(3, init="random", n_init=1, max_iter=1, random_state=seed,
                          device="cpu").fit(X, sample_weight=w)
    assert len(drawn) == 20 and all((indices < 10).all() for indices in drawn)
    with pytest.raises(ValueError, match="only 2 rows have a positive weight"):
        TransformerKMeans(3, init="random", device="cpu").fit(
            X, sample_weight=np.r_[1, 1, np.zeros(98)])


def test_not_fitted():
    with pytest.raises(NotFittedError):
        TransformerKMeans(2, device="cpu").predict(np.random.rand(3, 2))


def test_bad_device_string():
    with pytest.raises(ValueError, match="not a valid device"):
        TransformerKMeans(2, device="gpu0").fit(np.random.rand(10, 2))


def test_bad_input_loses_nothing():
    X = np.random.default_rng(0).normal(size=(50, 3))
    km = TransformerKMeans(3, random_state=0, device="cpu").fit(X)
    centers = km.cluster_centers_.copy()
    for bad in (np.full((4, 3), np.nan), np.random.rand(4, 5), sp.csr_matrix(np.eye(4)),
                sp.csr_matrix(np.array([[np.nan, 0.0, 1.0]]))):
        with pytest.raises((ValueError, TypeError)):
            km.predict(bad)
    np.testing.assert_array_equal(km.cluster_centers_, centers)
    np.testing.assert_array_equal(km.predict(X), km.labels_)


# -- devices, pickling, randomness -----------------------------------------------------

def test_cuda_requested_without_cuda_names_the_fix(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"CUDA is not available.*set_params\(device='cpu'\)"):
        TransformerKMeans(2, device="cuda").fit(np.random.rand(10, 2))


def test_auto_device_is_cpu_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    km = TransformerKMeans(2, device="auto", random_state=0).fit(np.random.rand(10, 2))
    assert isinstance(km.cluster_centers_, np.ndarray)


def test_model_fitted_on_gpu_loads_and_predicts_on_cpu(monkeypatch):
    """Simulates a model fitted with device="cuda" and unpickled on a CPU-only machine."""
    X, k = DATASETS["blobs"]
    km = TransformerKMeans(k, random_state=0, device="cpu").fit(X)
    expected = km.predict(X)
    km.set_params(device="cuda")  # as it was on the GPU machine; fitted state is numpy
    for name, value in vars(km).items():
        assert not isinstance(value, torch.Tensor), name
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = pickle.loads(pickle.dumps(km))
    with pytest.warns(DeviceWarning, match="CUDA is not available; using the CPU"):
        np.testing.assert_array_equal(loaded.predict(X), expected)
    np.testing.assert_array_equal(loaded.set_params(device="cpu").predict(X), expected)


def test_pickle_round_trip_and_clone():
    X, k = DATASETS["iris"]
    km = TransformerKMeans(k, temperature=0.5, random_state=0, device="cpu").fit(X)
    loaded = pickle.loads(pickle.dumps(km))
    np.testing.assert_array_equal(loaded.predict(X), km.predict(X))
    np.testing.assert_allclose(loaded.predict_proba(X), km.predict_proba(X))
    fresh = clone(km)
    assert fresh.get_params() == km.get_params()
    assert not hasattr(fresh, "cluster_centers_")


def test_random_state_reproducible_and_global_rng_untouched():
    X, k = DATASETS["blobs"]
    torch_state, np_state = torch.get_rng_state(), np.random.get_state()
    a = TransformerKMeans(k, init="random", random_state=7, device="cpu").fit(X)
    b = TransformerKMeans(k, init="random", random_state=7, device="cpu").fit(X)
    TransformerKMeans(k, random_state=None, device="cpu").fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert torch.equal(torch.get_rng_state(), torch_state)
    after = np.random.get_state()
    assert after[0] == np_state[0] and np.array_equal(after[1], np_state[1])
    seeds = {tuple(TransformerKMeans(k, init="random", n_init=1, random_state=s,
                                     device="cpu").fit(X).labels_[:50]) for s in range(4)}
    assert len(seeds) > 1  # different seeds do draw different initial centers


def test_pipeline_and_grid_search_over_n_clusters_and_temperature():
    X, _ = make_blobs(400, centers=3, cluster_std=0.8, random_state=0)
    pipe = make_pipeline(StandardScaler(), TransformerKMeans(random_state=0, device="cpu"))
    grid = GridSearchCV(pipe, {"transformerkmeans__n_clusters": [2, 3],
                               "transformerkmeans__temperature": [None, 0.5]}, cv=3)
    grid.fit(X)
    assert set(grid.best_params_) == {"transformerkmeans__n_clusters",
                                      "transformerkmeans__temperature"}
    assert len(grid.cv_results_["params"]) == 4
    # the held-out mixture likelihood: three blobs, three clusters, the hard circuit
    assert grid.best_params_["transformerkmeans__n_clusters"] == 3
    assert grid.predict(X).shape == (400,)


def test_feature_names_and_pandas_output():
    pd = pytest.importorskip("pandas", reason="pandas is in the [test] extra")
    X, k = DATASETS["iris"]
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    km = TransformerKMeans(k, random_state=0, device="cpu").set_output(transform="pandas").fit(df)
    np.testing.assert_array_equal(km.feature_names_in_, ["a", "b", "c", "d"])
    out = km.transform(df)
    assert list(out.columns) == [f"transformerkmeans{i}" for i in range(k)]


def test_get_circuit_reproduces_the_fit():
    X, k = DATASETS["iris"]
    init = X[[0, 60, 120]]
    km = TransformerKMeans(k, init=init, max_iter=4, tol=0, device="cpu").fit(X)
    circuit = km.get_circuit()
    centers, _ = circuit(torch.from_numpy(X), torch.from_numpy(init), n_layers=km.n_iter_)
    np.testing.assert_allclose(centers.numpy(), km.cluster_centers_, rtol=1e-10)
    assert set(circuit.blocks) == {"assign", "reset_points", "update", "reset_centers"}


@pytest.mark.parametrize("data", ["numpy", "tensor"])
def test_zero_tol_skips_the_variance_pass(data, monkeypatch):
    # tol's scale, the mean feature variance, is a second pass over X: only a nonzero tol
    # needs it (scikit-learn skips it too); NumPy X has it from the validation's pass
    from sktransformer.cluster import _base, _compiled

    asked = []
    real_pass, real_summary = _base._mean_and_mean_variance, _compiled.summary

    def spy_pass(X, rows, variance=True):
        asked.append(variance)
        return real_pass(X, rows, variance)

    def spy_summary(X, variance=True):
        asked.append(variance)
        return real_summary(X, variance)

    monkeypatch.setattr(_base, "_mean_and_mean_variance", spy_pass)
    monkeypatch.setattr(_compiled, "summary", spy_summary)
    X, k = DATASETS["iris"]
    X = torch.from_numpy(X) if data == "tensor" else X
    fits = [TransformerKMeans(k, tol=tol, random_state=0, device="cpu").fit(X)
            for tol in (0.0, 1e-4)]
    assert asked == [False, True]
    assert fits[0].n_iter_ >= fits[1].n_iter_


# -- scikit-learn's conventions (its own suite: tests/cluster/test_sklearn_suite.py) --------

@pytest.mark.parametrize("fit_on", ["compiled", "torch", "csr"])
def test_more_clusters_than_distinct_points_relocate_nothing(fit_on):
    """Every point on its center: relocating an empty cluster would only empty another,
    so the fit stops after one layer, with scikit-learn's warning."""
    X = np.array([[0, 0], [1, 1], [1, 1], [1, 0], [0, 1]], dtype=float)
    data = {"compiled": X, "torch": torch.from_numpy(X), "csr": sp.csr_matrix(X)}[fit_on]
    est = TransformerKMeans(5, init=X, device="cpu",
                            attention="dot" if fit_on == "torch" else "euclidean")
    with pytest.warns(ConvergenceWarning, match=r"distinct clusters \(4\)"):
        est.fit(data)
    assert est.n_iter_ == 1
    np.testing.assert_array_equal(np.asarray(est.cluster_centers_), X)


@pytest.mark.parametrize("max_iter", [1, 3, 5])
def test_swaps_stay_within_max_iter(max_iter):
    X, _ = make_blobs(400, centers=6, random_state=3)
    est = TransformerKMeans(6, max_iter=max_iter, random_state=0, device="cpu").fit(X)
    assert 1 <= est.n_iter_ <= max_iter


def test_elkan_is_scikit_learns_name_for_the_bounds():
    X, _ = make_blobs(2000, centers=5, random_state=0)
    elkan = TransformerKMeans(5, algorithm="elkan", random_state=0, device="cpu").fit(X)
    hamerly = TransformerKMeans(5, algorithm="hamerly", random_state=0, device="cpu").fit(X)
    np.testing.assert_array_equal(elkan.labels_, hamerly.labels_)
    for algorithm in ("elkan", "hamerly"):
        with pytest.warns(RuntimeWarning, match=f"algorithm='{algorithm}' doesn't make sense"):
            one = TransformerKMeans(1, algorithm=algorithm, device="cpu").fit(X)
        np.testing.assert_allclose(one.cluster_centers_[0], X.mean(0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_copy_x_false_shifts_x_in_place_and_puts_it_back(dtype):
    import tracemalloc

    X = (make_blobs(20_000, n_features=8, centers=4, random_state=1)[0] + 100).astype(dtype)
    before = X.copy()
    peaks = {}
    for copy_x in (True, False):
        tracemalloc.start()
        est = TransformerKMeans(4, random_state=0, device="cpu", copy_x=copy_x).fit(X)
        peaks[copy_x] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        np.testing.assert_allclose(X, before, rtol=0,
                                   atol=1e-4 if dtype == np.float32 else 1e-10)
        if copy_x:
            copied = est
    assert peaks[True] - peaks[False] >= 0.9 * X.nbytes  # (the shifted copy, made or not)
    np.testing.assert_array_equal(est.labels_, copied.labels_)
    np.testing.assert_allclose(est.cluster_centers_, copied.cluster_centers_,
                               rtol=1e-5 if dtype == np.float32 else 1e-12)
    frozen = before.copy()
    frozen.setflags(write=False)  # (read-only X: copied after all)
    TransformerKMeans(4, random_state=0, device="cpu", copy_x=False).fit(frozen)
    np.testing.assert_array_equal(frozen, before)


def test_transform_is_exactly_zero_at_a_center():
    """The matmul form leaves sqrt(eps) |x| of rounding at a center (6e-8 at unit scale);
    the entries within rounding of 0 are taken again by differences."""
    X, _ = make_blobs(300, n_features=5, centers=3, random_state=4)
    for data in (X, X.astype(np.float32), sp.csr_matrix(X)):
        est = TransformerKMeans(3, random_state=0, device="cpu").fit(data)
        centers = est.cluster_centers_
        np.testing.assert_array_equal(np.diag(est.transform(centers)), 0.0)
        near = centers + 1e-3
        np.testing.assert_allclose(np.diag(est.transform(near)), 1e-3 * np.sqrt(5),
                                   rtol=1e-3)
