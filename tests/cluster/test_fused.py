"""The fused assignment kernel (``cluster/_fused.py``) on the CPU, through Triton's
interpreter (``TRITON_INTERPRET=1``): the labels, distances and runner-up distances of the
torch layer, without its score tile. (On a GPU: benchmarks/gpu_check.py and the CUDA
tests.)"""

import importlib.util
import sys

import numpy as np
import pytest
import torch

from sktransformer import TransformerKMeans
from sktransformer.cluster import _fused, _lloyd

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed: it ships with the CUDA builds of torch, and `pip "
           "install triton` runs its kernels on the CPU through the interpreter")


_IMPORTED_INTERPRETED = []  # (set once Triton is imported here, under its interpreter)


@pytest.fixture
def interpreted(monkeypatch):
    """The kernel built under Triton's interpreter. The interpreter is chosen when Triton
    is first imported (its own library functions are decorated then), so Triton must not
    have been imported without it; the variable is unset again after the test."""
    if "triton" in sys.modules and not _IMPORTED_INTERPRETED:
        pytest.skip("Triton was imported before its interpreter was asked for")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    _fused._kernel()
    _IMPORTED_INTERPRETED.append(True)
    yield


def _points(X, shift):
    return _lloyd.PointTokens(X, rows=64, shift=shift)


@pytest.mark.parametrize("n, d, k", [(300, 20, 37), (64, 16, 64), (5, 3, 130)])
def test_the_kernel_gives_the_torch_layers_assignment(interpreted, n, d, k):
    g = torch.Generator().manual_seed(n + d + k)
    X = torch.randn(n, d, generator=g) * 3 + 50  # (far from the origin: the shift matters)
    shift = X.mean(0)
    centers = X[torch.randperm(n, generator=g)[:min(k, n)]] - shift
    centers = torch.cat([centers, torch.randn(k - len(centers), d, generator=g)])
    points = _points(X, shift)
    assert _fused.available(points)
    labels, dist, second = _fused.assign(points, centers, second=True)
    exact = torch.cdist((X - shift).double(), centers.double()).square()
    top = exact.topk(2, dim=1, largest=False)
    np.testing.assert_array_equal(labels.numpy(), top.indices[:, 0].numpy())
    np.testing.assert_allclose(dist.numpy(), top.values[:, 0].numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(second.numpy(), top.values[:, 1].numpy(), rtol=1e-4, atol=1e-3)


def test_ties_go_to_the_lowest_index_across_tiles(interpreted):
    X = torch.randn(40, 8, generator=torch.Generator().manual_seed(0))
    centers = torch.zeros(150, 8)
    centers[[3, 70, 140]] = X[0]  # the same center in three tiles of 64
    labels, dist = _fused.assign(_points(X, torch.zeros(8)), centers)
    assert labels[0] == 3 and float(dist[0]) == pytest.approx(0.0, abs=1e-5)


def test_predict_runs_the_kernel_where_the_compiled_loop_does_not(interpreted, monkeypatch):
    X = torch.from_numpy(np.random.default_rng(0).normal(size=(500, 6)).astype(np.float32))
    est = TransformerKMeans(5, random_state=0, device="cpu").fit(X)
    expected = est.predict(X)  # (the compiled CPU loop)
    calls = []
    monkeypatch.setattr(_lloyd, "compiled_assign", lambda *a: None)  # as on a GPU
    real = _fused.assign
    monkeypatch.setattr(_fused, "assign", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    np.testing.assert_array_equal(np.asarray(est.predict(X)), np.asarray(expected))
    assert calls
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # a CPU tensor without the interpreter:
    calls.clear()                                 # the torch layer
    np.testing.assert_array_equal(np.asarray(est.predict(X)), np.asarray(expected))
    assert not calls
