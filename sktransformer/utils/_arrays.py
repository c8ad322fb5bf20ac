"""The array boundary: what an estimator takes in and hands back.

In: numpy arrays and what scikit-learn's ``validate_data`` accepts (lists, DataFrames,
scipy sparse where an estimator allows it), and *tensors*: torch tensors on any device and
other array-API arrays (array-api-strict, CuPy: through DLPack), validated where they
live, never copied to the host. float32 stays float32; other numbers become float64.

Out: numpy, as scikit-learn returns, unless scikit-learn's ``array_api_dispatch`` is on and
X was not numpy: then outputs and fitted arrays follow X's namespace and device (a torch
tensor on X's GPU for a CUDA tensor). A model whose fitted arrays are CUDA tensors pickles
with them moved to the CPU (:class:`ArrayAPISupport`), so it loads anywhere.
"""

import functools

import numpy as np
import scipy.sparse as sp
import torch
from sklearn import get_config
from sklearn.utils.validation import (
    check_array,
    check_consistent_length,
    column_or_1d,
    validate_data,
)

FLOAT_DTYPES = [np.float64, np.float32]


def _compat():
    """array-api-compat: the installed package, else the copy scikit-learn vendors."""
    try:
        import array_api_compat
    except ImportError:  # pragma: no cover - scikit-learn always carries a copy
        from sklearn.externals import array_api_compat
    return array_api_compat


def is_tensor(X):
    """A torch tensor, or another array-API array that is not numpy (DLPack)."""
    if isinstance(X, torch.Tensor):
        return True
    return (not isinstance(X, np.ndarray) and not sp.issparse(X) and hasattr(X, "__dlpack__")
            and hasattr(X, "shape") and hasattr(X, "dtype"))


def as_tensor(X):
    """A torch tensor sharing memory (and device) with the array-API array X."""
    return X if isinstance(X, torch.Tensor) else torch.from_dlpack(X)


def _all_finite(t, block=1 << 20):
    """Whether every value of the 2-D tensor ``t`` is finite, by blocks of rows (no mask of
    X's size)."""
    rows = max(1, block // max(1, t.shape[1]))
    return all(bool(torch.isfinite(t[a:a + rows]).all()) for a in range(0, t.shape[0], rows))


def dense_values(t, name="X", *, accept_sparse=False):
    """``t``, unless it is a tensor on the meta device (shapes, no values) or a sparse
    tensor: a clear error."""
    if t.device.type == "meta":
        raise ValueError(f"{name} is a tensor on the meta device, which holds shapes but no "
                         "values; fill a tensor on a real device with the data first.")
    if t.layout != torch.strided:
        raise TypeError(f"A sparse torch tensor ({t.layout}) is not supported; pass "
                        f"{name}.to_dense(), or a scipy.sparse CSR matrix" +
                        (" instead." if accept_sparse else " to an estimator that takes one."))
    return t


def check_data(estimator, X, *, reset, accept_sparse=False, name="X", finite=True):
    """Validate X: a float numpy array (or CSR matrix), or a float tensor where X lives.

    Parameters
    ----------
    estimator : estimator instance
        Gets (``reset``) or checks ``n_features_in_`` and ``feature_names_in_``.
    X : array-like, sparse matrix, torch tensor or array-API array
    reset : bool
    accept_sparse : bool, default=False
        Whether a scipy sparse matrix is allowed (it is then returned as CSR with sorted,
        unique entries: a copy where the caller's were not, which is never modified).
    finite : bool, default=True
        Whether NumPy and sparse X are checked for NaN and infinity here (False: the
        caller checks them, in a pass of its own; tensors are always checked).

    Returns
    -------
    X : ndarray, csr_matrix or torch.Tensor
        2-D, finite, float32 or float64.
    """
    if not is_tensor(X):
        _reject_unmeasured(X, name)
        X = validate_data(estimator, X, dtype=FLOAT_DTYPES, order="C",
                          accept_sparse="csr" if accept_sparse else False, reset=reset,
                          ensure_all_finite=finite)
        if sp.issparse(X) and not X.has_canonical_format:
            # unsorted or duplicate entries: canonicalize a copy, never the caller's matrix
            X = X.copy()
            X.sum_duplicates()
        return X
    t = dense_values(as_tensor(X).detach(), name, accept_sparse=accept_sparse)
    if t.is_complex():
        raise ValueError("Complex data not supported.")
    if t.dim() != 2:
        raise ValueError(f"Expected a 2D array, got a {t.dim()}D tensor of shape "
                         f"{tuple(t.shape)} instead. Reshape your data, e.g. with "
                         "X.reshape(-1, 1) for a single feature.")
    if t.shape[0] < 1 or t.shape[1] < 1:
        raise ValueError(f"Found array with shape {tuple(t.shape)}: at least one sample "
                         "and one feature are required.")
    if t.dtype not in (torch.float32, torch.float64):
        t = t.to(torch.float64)
    if not _all_finite(t):
        raise ValueError(f"Input {name} contains NaN or infinity.")
    validate_data(estimator, t, skip_check_array=True, reset=reset)
    return t.contiguous()


def _reject_unmeasured(X, name):
    """Masked arrays (whose masked entries NumPy's conversion would silently keep) and
    dates or durations (whose conversion to float is an arbitrary unit) are errors."""
    if isinstance(X, np.ma.MaskedArray) and np.ma.getmaskarray(X).any():
        raise TypeError(f"{name} is a masked array: its masked entries would be used as "
                        f"numbers. Drop or impute them first, e.g. {name}.filled(value) or "
                        f"sklearn.impute.SimpleImputer on {name}.filled(np.nan).")
    kinds = [np.dtype(t).kind for t in getattr(X, "dtypes", [getattr(X, "dtype", None)])
             if t is not None]
    if any(kind in "mM" for kind in kinds):
        raise TypeError(f"{name} holds dates or durations (datetime64 or timedelta64): "
                        f"convert them to numbers in a unit of your choice first, e.g. "
                        f"({name} - start) / np.timedelta64(1, 'D').")


def check_data_and_target(estimator, X, y, *, multi_output=False, y_numeric=False):
    """:func:`check_data` for X (reset) and scikit-learn's checks of y.

    y, small next to X, is checked on the host (a tensor y is copied there).
    """
    if not is_tensor(X):
        _reject_unmeasured(X, "X")
        return validate_data(estimator, X, as_numpy(y), dtype=FLOAT_DTYPES,
                             multi_output=multi_output, y_numeric=y_numeric)
    X = check_data(estimator, X, reset=True)
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the "
                         "target y is None.")
    y = as_numpy(y)
    if multi_output:
        y = check_array(y, ensure_2d=False, dtype="numeric" if y_numeric else None,
                        input_name="y")
    else:
        y = column_or_1d(y, warn=True)
        if y_numeric and y.dtype.kind == "O":
            y = y.astype(np.float64)
        if y.dtype.kind in "fc":
            check_array(y, ensure_2d=False, dtype=None, input_name="y")  # finite
    check_consistent_length(X, y)
    return X, y


def numpy_dtype(X):
    """X's dtype as a numpy dtype (X: numpy, sparse, a tensor or an array-API array)."""
    if is_tensor(X):
        return np.dtype(str(as_tensor(X).dtype).removeprefix("torch."))
    return np.dtype(X.dtype)


def torch_dtype(X):
    """X's dtype as a torch dtype (X: numpy, sparse, a tensor or an array-API array)."""
    if is_tensor(X):
        return as_tensor(X).dtype
    return getattr(torch, np.dtype(X.dtype).name)


def output_space(X):
    """Where outputs for X go: ``None`` (numpy), or ``(namespace, device)`` of X when
    scikit-learn's ``array_api_dispatch`` is on and X is not numpy."""
    if not get_config().get("array_api_dispatch", False) or not is_tensor(X):
        return None
    compat = _compat()
    return compat.array_namespace(X), compat.device(X)


def as_numpy(value):
    """A numpy view or copy of a numpy array, tensor or array-API array (host memory)."""
    if isinstance(value, np.ndarray) or value is None or np.isscalar(value):
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if is_tensor(value):
        return as_tensor(value).cpu().numpy()
    return np.asarray(value)


def to_output(value, space):
    """``value`` (a tensor or numpy array) as numpy, or in ``space``'s namespace/device
    (labels that are not numbers, a classifier's string classes, stay numpy)."""
    if space is None or (isinstance(value, np.ndarray) and value.dtype.kind not in "biuf"):
        return as_numpy(value)
    xp, device = space
    if _compat().is_torch_namespace(xp):
        t = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.asarray(value))
        return t.detach().to(device)
    return xp.asarray(as_numpy(value), device=device)


def _space_of(value):
    """(namespace name, device) of an array; numpy for anything that is not a tensor."""
    if not is_tensor(value):
        return "numpy", "cpu"
    compat = _compat()
    return compat.array_namespace(value).__name__, str(compat.device(value))


def follows_input(method):
    """Decorate ``predict``-like methods: under ``array_api_dispatch`` X must be in the
    namespace and on the device of the fitted arrays (scikit-learn's rule), and the result
    (a tensor or numpy array) is returned as :func:`to_output` puts it for X."""
    @functools.wraps(method)
    def wrapper(self, X, *args, **kwargs):
        space = output_space(X)
        if get_config().get("array_api_dispatch", False):
            fitted = self._fitted_space()  # None before fit: the method says it is unfitted
            if fitted is not None and _space_of(X) != fitted:
                raise ValueError(
                    f"Inputs passed to {type(self).__name__}.{method.__name__}() must use the "
                    "same namespace and the same device as those passed to fit(): fit saw "
                    f"{fitted[0]} on {fitted[1]}, {method.__name__} got {_space_of(X)[0]} on "
                    f"{_space_of(X)[1]}. Refit, or convert X.")
        return to_output(method(self, X, *args, **kwargs), space)
    return wrapper


class ArrayAPISupport:
    """Mixin: the ``array_api_support`` tag, fitted arrays that follow X's namespace under
    ``array_api_dispatch``, and pickles that load on a CPU-only machine.

    An estimator lists its fitted array attributes in ``_array_attributes``; ``fit`` calls
    :meth:`_publish` with :func:`output_space` of X at its end.
    """

    _array_attributes = ()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.array_api_support = True
        return tags

    def _publish(self, space):
        for name in self._array_attributes:
            if name in self.__dict__:
                self.__dict__[name] = to_output(self.__dict__[name], space)
        self._space = ("numpy", "cpu") if space is None else (space[0].__name__,
                                                              str(space[1]))

    def _fitted_space(self):
        """(namespace, device) of the fitted arrays (that of the first one, if any), or
        None before fit."""
        for name in self._array_attributes:
            if name in self.__dict__:
                return _space_of(self.__dict__[name])
        return getattr(self, "_space", None)

    def __getstate__(self):
        state = super().__getstate__()
        state = {key: value.detach().cpu() if isinstance(value, torch.Tensor) else value
                 for key, value in state.items()}
        if "_space" in state and state["_space"][0] != "numpy":
            state["_space"] = (state["_space"][0], "cpu")
        return state
