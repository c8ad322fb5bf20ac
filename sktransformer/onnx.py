"""ONNX export of the estimators whose inference is a standard graph (optional: skl2onnx).

Hard :class:`~sktransformer.TransformerKMeans` predicts by the assignment block alone: the
closest center, with distances as ``transform``. That is scikit-learn's ``KMeans`` graph,
so skl2onnx's converter for it applies unchanged. Install the extra with
``pip install scikit-transformer[onnx]`` (skl2onnx, onnxruntime).
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .cluster import TransformerKMeans

SUPPORTED = "TransformerKMeans with temperature=None and weights=None"


def _register():
    from skl2onnx import update_registered_converter
    from skl2onnx.operator_converters.k_means import convert_sklearn_kmeans
    from skl2onnx.shape_calculators.k_means import calculate_sklearn_kmeans_output_shapes

    update_registered_converter(TransformerKMeans, "SktransformerTransformerKMeans",
                                calculate_sklearn_kmeans_output_shapes,
                                convert_sklearn_kmeans, options={"gemm": [True, False]})


def to_onnx(estimator, X, *, target_opset=None):
    """The ONNX model of a fitted estimator: ``label`` (int64) and ``scores`` (distances).

    Parameters
    ----------
    estimator : TransformerKMeans
        Fitted, hard (``temperature=None``) and without learned weights.
    X : array-like of shape (n_samples, n_features)
        A sample of the input; its dtype (float32 or float64) is the model's input type.
    target_opset : int or None, default=None
        skl2onnx's opset (its default when None).

    Returns
    -------
    onnx.ModelProto

    Examples
    --------
    >>> import numpy as np
    >>> from sktransformer import TransformerKMeans
    >>> from sktransformer.onnx import to_onnx
    >>> X = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    >>> model = to_onnx(TransformerKMeans(3, random_state=0, device="cpu").fit(X), X)
    >>> [o.name for o in model.graph.output]  # doctest: +SKIP
    ['label', 'scores']
    """
    if not isinstance(estimator, TransformerKMeans) or \
            estimator.temperature is not None or estimator.weights is not None:
        raise ValueError(f"ONNX export supports {SUPPORTED}; got {estimator!r}.")
    check_is_fitted(estimator)
    try:
        import skl2onnx
    except ImportError as exc:
        raise ImportError("ONNX export needs skl2onnx: pip install "
                          "scikit-transformer[onnx]") from exc
    _register()
    X = np.asarray(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float32)
    return skl2onnx.to_onnx(estimator, X[:1], target_opset=target_opset)
