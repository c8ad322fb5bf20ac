"""ONNX export of hard TransformerKMeans, checked in onnxruntime."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

from sktransformer import RobustTransformerKMeans, TransformerKMeans

onnxruntime = pytest.importorskip(
    "onnxruntime", reason="the [onnx] extra (skl2onnx, onnxruntime) is not installed")
pytest.importorskip("skl2onnx", reason="the [onnx] extra (skl2onnx) is not installed")
from sktransformer.onnx import to_onnx  # noqa: E402


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("attention", ["euclidean", "dot"])
def test_onnx_labels_and_distances_equal_the_estimators(dtype, attention):
    X = load_digits().data.astype(dtype)
    km = TransformerKMeans(10, attention=attention, random_state=0, device="cpu").fit(X)
    session = onnxruntime.InferenceSession(to_onnx(km, X).SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    label, scores = session.run(None, {session.get_inputs()[0].name: X})
    np.testing.assert_array_equal(label, km.predict(X))
    np.testing.assert_allclose(scores, km.transform(X),
                               rtol=1e-4 if dtype == np.float32 else 1e-9, atol=1e-3)


def test_only_hard_kmeans_exports():
    X = np.random.default_rng(0).normal(size=(40, 3))
    for est in (TransformerKMeans(3, temperature=0.5, device="cpu").fit(X),
                RobustTransformerKMeans(3, device="cpu").fit(X)):
        with pytest.raises(ValueError, match="ONNX export supports TransformerKMeans with "
                                             "temperature=None"):
            to_onnx(est, X)
