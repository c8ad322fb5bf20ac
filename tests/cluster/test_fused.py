"""The fused assignment kernel (``cluster/_fused.py``) on the CPU, through Triton's
interpreter (``TRITON_INTERPRET=1``): the labels, distances and runner-up distances of the
torch layer, without its score tile. (On a GPU: benchmarks/gpu_check.py and the CUDA
tests.)

Triton chooses its interpreter when it is first imported, and torch may import it first,
so the tests run in a child process started with the variable set."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sktransformer import TransformerKMeans
from sktransformer.cluster import _fused, _lloyd

CHILD = os.environ.get("TRITON_INTERPRET") == "1"
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed: it ships with the CUDA builds of torch, and `pip "
           "install triton` runs its kernels on the CPU through the interpreter")
in_child = pytest.mark.skipif(not CHILD, reason="run under Triton's interpreter by "
                                                "test_the_kernel_under_the_interpreter")


@pytest.mark.skipif(CHILD, reason="(the child run itself)")
def test_the_kernel_under_the_interpreter():
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(Path(__file__).relative_to(root))], cwd=root,
                         env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "\n8 passed" in run.stdout  # (every test of the child ran)


@pytest.fixture
def interpreted(monkeypatch):
    """(The child's variable, set again for each test: some set it to 0.)"""
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _points(X, shift):
    return _lloyd.PointTokens(X, rows=64, shift=shift)


@in_child
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


@in_child
def test_ties_go_to_the_lowest_index_across_tiles(interpreted):
    X = torch.randn(40, 8, generator=torch.Generator().manual_seed(0))
    centers = torch.zeros(150, 8)
    centers[[3, 70, 140]] = X[0]  # the same center in three tiles of 64
    labels, dist = _fused.assign(_points(X, torch.zeros(8)), centers)
    assert labels[0] == 3 and float(dist[0]) == pytest.approx(0.0, abs=1e-5)


@in_child
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


@in_child
@pytest.mark.parametrize("make", [
    lambda: TransformerKMeans(5, random_state=0, device="cpu", swaps=0, verbose=1),
    lambda: __import__("sktransformer").TrimmedTransformerKMeans(5, random_state=0,
                                                                  device="cpu"),
    lambda: __import__("sktransformer").TransformerKMedoids(5, metric="sqeuclidean",
                                                             random_state=0, device="cpu"),
])
def test_the_layers_on_the_kernel_fit_as_the_torch_layers(interpreted, monkeypatch, make):
    """Hard layers whose assignment is the kernel's (the members summed after it; trimming's
    radius as weights of 0) fit what the torch layers fit: verbose=1 keeps
    TransformerKMeans off the compiled CPU loop, as a GPU would."""
    import logging

    monkeypatch.setattr(logging.getLogger("sktransformer"), "disabled", True)
    rng = np.random.default_rng(1)
    X = torch.from_numpy(np.concatenate([rng.normal(size=(400, 4)) + 6 * rng.integers(
        0, 3, size=(400, 1)), rng.normal(scale=40, size=(8, 4))]).astype(np.float32))
    calls = []
    real = _fused.assign
    monkeypatch.setattr(_fused, "assign", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    fused = make().fit(X)
    assert calls
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    reference = make().fit(X)
    np.testing.assert_array_equal(np.asarray(fused.labels_), np.asarray(reference.labels_))
    np.testing.assert_allclose(np.asarray(fused.cluster_centers_),
                               np.asarray(reference.cluster_centers_), rtol=1e-5, atol=1e-5)
    assert fused.n_iter_ == reference.n_iter_
