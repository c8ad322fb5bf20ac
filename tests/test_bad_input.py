"""Generated bad input for every public estimator: a clear error or a finite, valid answer.

Hypothesis draws data with non-finite, overflowing, tiny and ordinary values, degenerate
shapes, float32 / float64 / integer dtypes, and bad weights and targets. Each fit either
raises a ``ValueError`` or ``TypeError`` whose message names the problem, or succeeds, and
then every output (predict, transform, predict_proba, score) is finite and of the right
shape. Never a silent ``NaN``.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sklearn.base import is_classifier, is_regressor
from sklearn.exceptions import ConvergenceWarning

from sktransformer import SphericalTransformerKMeans, TransformerKMeans
from sktransformer.cluster import KMeansCircuit
from tests.test_common import _instance, public_estimators

# the words a clear message uses: what is wrong, or how to fix it
CLEAR = ("NaN", "infinity", "overflow", "n_samples", "sample", "feature", "class", "label",
         "weight", "dtype", "float", "shape", "dimension", "empty", "n_clusters",
         "leave-one-out", "array", "must", "should", "Unknown", "minimum", "positive",
         "numeric", "trim", "X", "y", "Complex", "allocate", "tensor")

VALUES = st.one_of(
    st.floats(-3, 3, allow_nan=False),
    st.sampled_from([0.0, 1e-300, -1e-300, 1e20, -1e20, 1e38, 1e154, -1e154, 1e300,
                     np.nan, np.inf, -np.inf]),
)


@st.composite
def bad_data(draw, estimator):
    n = draw(st.sampled_from([0, 1, 3, 8, 16, 24, 24, 24]))
    d = draw(st.sampled_from([0, 1, 2, 3, 4, 1, 2, 3]))
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int64]))
    kind = draw(st.sampled_from(["scaled", "one bad value", "all drawn"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    X = rng.normal(size=(n, d))
    if kind == "scaled":  # ordinary data at an extreme scale
        X = X * draw(st.sampled_from([1.0, 1e-150, 1e-40, 1e-20, 1e15, 1e30, 1e100, 1e152]))
    elif n and d and kind == "one bad value":
        X[draw(st.integers(0, n - 1)), draw(st.integers(0, d - 1))] = draw(VALUES)
    elif n:
        X = np.array(draw(st.lists(VALUES, min_size=n * d, max_size=n * d))).reshape(n, d)
    with np.errstate(all="ignore"):
        if dtype is np.int64:
            X = np.nan_to_num(X, posinf=2**40, neginf=-(2**40)).clip(-2**40, 2**40)
        X = X.astype(dtype)
    X = _container(X, draw(st.sampled_from(["NumPy"] * 5 + ["CSR", "tensor", "dask"])))
    y = None
    if is_regressor(estimator):
        y = rng.normal(size=n) * draw(st.sampled_from([1.0, 1e200, np.nan]))
    elif (is_classifier(estimator) or estimator.__sklearn_tags__().target_tags.required
          or ("y" in _fit_parameters(estimator) and "n_clusters" not in
              estimator.get_params() and draw(st.booleans()))):  # supervised samplers
        y = rng.integers(0, draw(st.sampled_from([1, 2, 2, 3])), size=n)
    weight = None
    if draw(st.booleans()) and "sample_weight" in _fit_parameters(estimator):
        weight = draw(st.sampled_from([np.zeros(n), -np.ones(n), np.full(n, np.nan),
                                       np.ones(n + 1), rng.random(n)]))
    return X, y, weight


def _container(X, kind):
    """X as ``kind``: a NumPy array, a CSR matrix with its entries unsorted and the first
    of each row duplicated (halves of it), a torch tensor or a dask array."""
    if kind == "tensor":
        import torch
        return torch.from_numpy(X)
    if kind == "dask":
        import dask.array as da
        return da.from_array(X, chunks=(max(1, X.shape[0] // 2), max(1, X.shape[1])))
    if kind == "CSR" and X.dtype.kind == "f":
        indptr, indices, data = [0], [], []
        for row in X:
            idx = list(np.flatnonzero(row)[::-1])
            val = list(row[idx])
            if idx:
                idx, val = [idx[0]] + idx, [val[0] / 2, val[0] / 2] + val[1:]
            indices += idx
            data += val
            indptr.append(len(indices))
        return sp.csr_matrix((np.array(data, X.dtype), np.array(indices, np.int32),
                              np.array(indptr)), shape=X.shape)
    return X


def _snapshot(X):
    """What the caller holds of X, to compare after the calls (None: not host memory)."""
    if sp.issparse(X):
        return X.indptr.copy(), X.indices.copy(), X.data.copy()
    return X.copy() if isinstance(X, np.ndarray) else None


def _unchanged(before, X):
    if before is None:
        return True
    if isinstance(before, tuple):
        return all(np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
                   for a, b in zip(before, _snapshot(X)))
    return np.array_equal(before, X, equal_nan=True)


def _fit_parameters(estimator):
    import inspect
    return inspect.signature(estimator.fit).parameters


ESTIMATORS = [cls for cls in public_estimators()
              if not cls().__sklearn_tags__().input_tags.string]  # text: tests/sequence


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_bad_input_is_a_clear_error_or_a_finite_answer(cls):
    estimator = _instance(cls)
    if "random_state" in estimator.get_params():
        estimator.set_params(random_state=0)
    if "n_clusters" in estimator.get_params():
        estimator.set_params(n_clusters=2)
    if "n_components" in estimator.get_params():
        estimator.set_params(n_components=8)
    if "max_epochs" in estimator.get_params():
        estimator.set_params(max_epochs=2, n_iter=5)
    examples = 12 if "max_epochs" in estimator.get_params() else 40

    @settings(max_examples=examples, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=bad_data(estimator))
    def check(data):
        X, y, weight = data
        before = _snapshot(X)
        kwargs = {} if weight is None else {"sample_weight": weight}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted = estimator.fit(X, y, **kwargs) if y is not None else estimator.fit(
                    X, **kwargs)
        except (ValueError, TypeError) as exc:
            assert any(word in str(exc) for word in CLEAR), f"unclear: {exc!r}"
            assert _unchanged(before, X), "fit changed the caller's X"
            event("fit: a clear error")
            return
        event("fit: a finite answer")
        for method in ("predict", "transform", "predict_proba", "decision_function"):
            if not hasattr(fitted, method):
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = np.asarray(getattr(fitted, method)(X))
            except (ValueError, TypeError) as exc:
                assert any(word in str(exc) for word in CLEAR), f"unclear: {exc!r}"
                continue
            assert out.shape[0] == X.shape[0]
            if out.dtype.kind == "f":
                assert np.isfinite(out).all(), f"{method} gave non-finite values"
        for name in ("inertia_", "cluster_centers_", "particles_"):
            if hasattr(fitted, name):
                assert np.isfinite(getattr(fitted, name)).all(), name
        assert _unchanged(before, X), "the calls changed the caller's X"

    check()


def _target(estimator, n):
    """An ordinary ``y`` of ``n`` samples for the estimators that take one, else None."""
    if is_regressor(estimator):
        return np.arange(float(n))
    if is_classifier(estimator) or estimator.__sklearn_tags__().target_tags.required:
        return np.arange(n) % 2
    return None


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_a_meta_tensor_is_a_clear_error(cls):
    import torch

    estimator = _instance(cls)
    X = torch.empty(12, 3, device="meta")
    y = _target(estimator, 12)
    with pytest.raises(ValueError, match="meta device"):
        estimator.fit(X) if y is None else estimator.fit(X, y)


def _fit_tiny(cls, scale, dtype):
    estimator = _instance(cls)
    X = (np.random.default_rng(0).normal(size=(40, 3)) * scale).astype(dtype)
    y = _target(estimator, 40)
    return estimator.fit(X) if y is None else estimator.fit(X, y)


# the estimators that fit on distances of X's rows (the sequence models embed X first)
DISTANCES = [cls for cls in ESTIMATORS if not cls.__name__.startswith("Sequence")]


@pytest.mark.parametrize("cls", DISTANCES, ids=lambda c: c.__name__)
def test_data_whose_squares_underflow_is_a_clear_error(cls):
    # float32 values of 1e-40 are subnormal: every squared distance is 0 or rounding
    with pytest.raises(ValueError, match="underflow float32.*rescale X"):
        _fit_tiny(cls, 1e-40, np.float32)


@pytest.mark.parametrize("cls", [c for c in DISTANCES if "KMeans" in c.__name__],
                         ids=lambda c: c.__name__)
def test_small_data_that_does_not_underflow_fits(cls):
    # the same values in float64: their squares are normal numbers, and the fit is valid
    fitted = _fit_tiny(cls, 1e-40, np.float64)
    assert np.isfinite(fitted.cluster_centers_).all()
    if not cls.__name__.startswith("Spherical"):  # (whose centers are unit vectors)
        assert np.abs(fitted.cluster_centers_).max() < 1e-38
    # and a model fitted at an ordinary scale predicts data that small
    fitted = _fit_tiny(cls, 1.0, np.float32)
    assert fitted.predict(np.full((2, 3), 1e-40, dtype=np.float32)).shape == (2,)


@pytest.mark.parametrize("shape", [(10, 0, 3), (10, 5, 0)])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_empty_sequences_are_a_clear_error(shape, as_tensor):
    import torch

    from sktransformer import SequenceAttentionClassifier

    X = torch.zeros(shape) if as_tensor else np.zeros(shape)
    with pytest.raises(ValueError, match="at least one"):
        SequenceAttentionClassifier(max_epochs=1).fit(X, np.arange(10) % 2)


def _skt(name, **params):
    return lambda: getattr(__import__("sktransformer"), name)(**params)


@pytest.mark.parametrize("make, fit, named", [
    (_skt("ImportanceSampledRFF", n_candidates=10**9), True, "n_candidates"),
    (_skt("ImportanceSampledRFF", n_components=10**9), True, "n_components"),
    (_skt("KNNAttentionRegressor", n_samples=10**9, gradient="sampled", max_iter=2), True,
     "n_samples"),
    (_skt("KNNAttentionRegressor", n_samples=10**9, approximation="gumbel", max_iter=2),
     False, "n_samples"),
    (_skt("KNNAttentionRegressor", n_components=10**9, max_iter=2), True, "n_components"),
    (_skt("ParticleKernelSampler", n_components=10**9), True, "n_components"),
    (_skt("ParticleKernelClassifier", n_components=10**9), True, "n_components"),
    (_skt("SequenceAttentionClassifier", d_model=10**9), True, "d_model"),
    (_skt("SequenceAttentionClassifier", n_layers=10**9), True, "n_layers"),
    (_skt("SequenceAttentionClassifier", n_components=10**9), True, "n_components"),
], ids=["n_candidates", "n_components (its candidates)", "n_samples sampled gradient",
        "n_samples gumbel predict", "kNN n_components", "sampler n_components",
        "classifier n_components", "d_model", "n_layers", "sequence n_components"])
def test_a_parameter_typo_is_an_error_before_any_allocation(make, fit, named):
    import tracemalloc

    estimator = make()
    rng = np.random.default_rng(0)
    sequences = type(estimator).__name__.startswith("Sequence")
    X = rng.integers(1, 20, size=(40, 12)) if sequences else rng.normal(size=(40, 3))
    y = np.arange(40) % 2
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=f"{named}=1000000000 would allocate about "
                                             r".* GiB"):
            if fit:
                estimator.fit(X, y)
            else:
                estimator.fit(X, X[:, 0]).predict(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20  # numpy's allocations while failing: nothing of the typo's size


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("layout", ["COO", "CSR"])
def test_a_sparse_tensor_is_a_clear_error(cls, layout):
    import torch

    estimator = _instance(cls)
    dense = torch.from_numpy(np.random.default_rng(0).normal(size=(12, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch calls its CSR tensors beta)
        X = dense.to_sparse() if layout == "COO" else dense.to_sparse_csr()
    y = _target(estimator, 12)
    with pytest.raises(TypeError, match=r"sparse torch tensor .*to_dense\(\)"):
        estimator.fit(X) if y is None else estimator.fit(X, y)


def test_weights_whose_sums_overflow_are_a_clear_error():
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValueError, match="sample_weight sums to infinity"):
        TransformerKMeans(3).fit(X, sample_weight=np.full(50, 1e308))
    with pytest.raises(ValueError, match="weighted by a sample_weight of total"):
        TransformerKMeans(3).fit(X, sample_weight=np.full(50, 1e306))
    # large weights whose sums stay finite fit, as unit weights do (only ratios matter)
    heavy = TransformerKMeans(3, random_state=0).fit(X, sample_weight=np.full(50, 1e100))
    plain = TransformerKMeans(3, random_state=0).fit(X)
    np.testing.assert_array_equal(heavy.labels_, plain.labels_)


def test_misused_parameters_and_files_are_clear_errors(tmp_path):
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValueError, match="'n_clusters' parameter .* got True"):
        TransformerKMeans(n_clusters=True).fit(X)
    with pytest.raises(ValueError, match="is a directory"):
        TransformerKMeans(3, weights=tmp_path).fit(X)
    with pytest.raises(ValueError, match=r"built for 3 features .* got \(10, 5\)"):
        KMeansCircuit(3, 2)(torch.randn(10, 5), torch.randn(2, 5))


@pytest.mark.parametrize("d", [2, 3, 10])
def test_spherical_scores_are_finite_on_repeated_points(d):
    rng = np.random.default_rng(0)
    X = np.repeat(rng.normal(size=(5, d)), 20, axis=0)
    km = SphericalTransformerKMeans(5, random_state=0).fit(X)
    assert np.all(np.isfinite(km.score_samples(X))) and np.isfinite(km.bic(X))
    single = rng.normal(size=(20, d))  # (k = n: every cluster one point)
    km = SphericalTransformerKMeans(20, random_state=0).fit(single)
    assert np.isfinite(km.score(single)) and np.isfinite(km.bic(single))


def test_shapes_that_would_allocate_too_much_are_a_clear_error():
    import resource

    from sktransformer import KNNAttentionRegressor

    rng = np.random.default_rng(0)
    wide = sp.csr_matrix((np.ones(200), (rng.integers(0, 100, 200),
                                         rng.integers(0, 2**31, 200))), shape=(100, 2**31))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match=r"X.shape\[1\]=2147483648 would allocate .* fewer "
                                         r"features"):
        TransformerKMeans(3).fit(wide)
    with pytest.raises(ValueError, match=r"X.shape\[1\]=2147483648 would allocate"):
        TransformerKMeans(3).partial_fit(wide)
    with pytest.raises(ValueError, match="n_components=1000000 would allocate"):
        KNNAttentionRegressor(n_components=10**6).fit(rng.normal(size=(60, 3)),
                                                      rng.normal(size=60))
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # (KiB on Linux)
    assert grown < 256 << 10


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_masked_arrays_and_dates_are_clear_errors(cls):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.arange(40) % 2
    estimator = _instance(cls)
    if type(estimator).__name__.startswith("Sequence"):
        pytest.skip("sequence models take token ids, validated as integers")
    masked = np.ma.masked_array(X, mask=rng.random(X.shape) < 0.1)
    dates = np.datetime64("2020-01-01") + np.arange(40 * 3).reshape(40, 3).astype(
        "timedelta64[D]")
    for bad, named in [(masked, "masked array"), (dates, "dates or durations"),
                       (dates - dates[0, 0], "dates or durations")]:
        with pytest.raises(TypeError, match=named):
            estimator.fit(bad, y)


def test_a_prediction_that_would_overflow_names_the_row():
    X = np.random.default_rng(0).normal(size=(100, 3))
    km = TransformerKMeans(3, random_state=0).fit(X)
    batch = X[:5].copy()
    batch[2, 1] = -1e200
    for data in (batch, sp.csr_matrix(batch), torch.tensor(batch)):
        with pytest.raises(ValueError, match="overflow.* in row 2"):
            km.predict(data)
    # a mask with nothing masked is an array like any other
    assert km.predict(np.ma.masked_array(X[:5])).shape == (5,)


def test_an_untrained_learned_layer_warns():
    from sktransformer.cluster import LearnedKMeansLayer

    X = np.random.default_rng(0).normal(size=(200, 4))
    with pytest.warns(UserWarning, match="still its random initialization"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # (what its centers then do)
        try:
            TransformerKMeans(3, weights=LearnedKMeansLayer(4, 3), max_iter=3,
                              random_state=0).fit(X)
        except ValueError:  # (its centers may also overflow: a clear error of its own)
            pass


def test_kmedoids_warns_when_max_iter_stops_moving_medoids():
    from sktransformer import TransformerKMedoids

    X = np.random.default_rng(0).normal(size=(300, 2))
    with pytest.warns(ConvergenceWarning, match="Maximum number of iterations"):
        TransformerKMedoids(8, max_iter=1, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert TransformerKMedoids(8, random_state=0).fit(X).n_iter_ < 300
