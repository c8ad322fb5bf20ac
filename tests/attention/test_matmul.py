"""The score tiles' product: oneDNN on AVX-512 CPUs, torch.matmul elsewhere, one result."""

import numpy as np
import pytest
import torch

from sktransformer import TransformerKMeans
from sktransformer.attention import _matmul, matmul_nt


def _pair(m, n, d, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, d, generator=g, dtype=dtype),
            torch.randn(n, d, generator=g, dtype=dtype))


def test_the_cpu_with_avx512_uses_onednn():
    # where torch has oneDNN and the CPU AVX-512, the probe must find the op: a failed
    # probe would silently fall back to the slower product
    if not (torch.backends.mkldnn.is_available()
            and torch.backends.cpu.get_cpu_capability() == "AVX512"):
        pytest.skip("oneDNN is only used on AVX-512 CPUs (MKL runs its own kernels elsewhere)")
    a, b = _pair(3, 4, 5)
    assert _matmul._onednn_linear() is not None
    assert _matmul.uses_onednn(a, b)


@pytest.mark.parametrize("m, n, d", [(1, 1, 1), (7, 300, 33), (4096, 64, 17), (5, 1024, 64)])
def test_matmul_nt_is_the_product(m, n, d):
    a, b = _pair(m, n, d)
    got = matmul_nt(a, b)
    assert got.shape == (m, n) and got.is_contiguous()
    expected = a.double() @ b.double().T
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5 * d)
    columns = b.T.contiguous().T  # b with contiguous columns (the soft update's tokens.T)
    assert _matmul.uses_onednn(a, columns) == _matmul.uses_onednn(a, b)
    torch.testing.assert_close(matmul_nt(a, columns).double(), expected, rtol=1e-5,
                               atol=1e-5 * d)


def test_what_onednn_does_not_take_goes_to_matmul():
    a, b = _pair(6, 5, 4)
    assert not _matmul.uses_onednn(a.double(), b.double())  # float64
    assert not _matmul.uses_onednn(a, b.unsqueeze(0))  # batched keys
    assert not _matmul.uses_onednn(a.T.contiguous().T, b)  # strided rows
    # keys that are one head of a wider projection: oneDNN takes such a view hundreds of
    # times longer than torch.matmul
    heads = torch.randn(5, 8)
    assert not _matmul.uses_onednn(a, heads[:, :4])
    torch.testing.assert_close(matmul_nt(a, heads[:, :4]), a @ heads[:, :4].T)
    a64, b64 = a.double(), b.double()
    torch.testing.assert_close(matmul_nt(a64, b64), a64 @ b64.T)
    lead = torch.stack([a, 2 * a])  # batched queries, one b: oneDNN takes them too
    assert _matmul.uses_onednn(lead, b) == (_matmul._onednn_linear() is not None)
    torch.testing.assert_close(matmul_nt(lead, b), lead @ b.T)
    torch.testing.assert_close(matmul_nt(b, lead), b @ lead.transpose(-1, -2))
    out = torch.empty(6, 5, dtype=torch.float64)
    assert matmul_nt(a64, b64, out=out) is out  # the fallback fills the buffer


def test_gradients_flow_through_the_fallback():
    a, b = _pair(6, 5, 4)
    a.requires_grad_(True)
    assert not _matmul.uses_onednn(a, b)
    matmul_nt(a, b).sum().backward()
    torch.testing.assert_close(a.grad, b.sum(0).expand(6, 4))
    with torch.no_grad():
        assert _matmul.uses_onednn(a, b) == (_matmul._onednn_linear() is not None)


@pytest.mark.parametrize("n_features, n_clusters, deep", [(40, 128, True), (12, 8, False)])
def test_kmeans_fits_the_same_with_either_product(monkeypatch, n_features, n_clusters, deep):
    from sktransformer.cluster._compiled import _engine

    monkeypatch.setattr(_engine._LOOPS, "enabled", False)  # (the torch layers' products)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, n_features)).astype(np.float32)
    X[:1000] += 4
    params = dict(n_clusters=n_clusters, random_state=0, n_init=1, device="cpu")
    op = _matmul._onednn_linear()
    calls = []
    if op is not None:  # count the layer's oneDNN products
        monkeypatch.setattr(_matmul, "_onednn_linear",
                            lambda: lambda *args: calls.append(1) or op(*args))
    fast = TransformerKMeans(**params).fit(X)
    # oneDNN scores the chunks of deep tokens only (where it measured faster in the fit)
    assert bool(calls) == (deep and op is not None)
    calls.clear()
    fast.predict(X[:100])  # a small batch: no kernel to compile for its shape
    assert not calls
    monkeypatch.setattr(_matmul, "_ENABLED", False)
    plain = TransformerKMeans(**params).fit(X)
    np.testing.assert_array_equal(fast.labels_, plain.labels_)
    np.testing.assert_allclose(fast.cluster_centers_, plain.cluster_centers_, atol=1e-5)
    assert fast.n_iter_ == plain.n_iter_


def test_strided_views_give_the_product():
    g = torch.Generator().manual_seed(1)
    A = torch.randn(50, 40, generator=g)
    B = torch.randn(30, 40, generator=g)
    cases = [(A[:, :7], B[:, :7]), (A[::2], B), (A, B[::3]),
             (torch.randn(2, 50, 40, generator=g)[:, :, :9], B[:, :9]),
             (A[:, :20], torch.randn(40, 30, generator=g).T[:, :20])]
    for a, b in cases:
        expected = a.double() @ b.double().transpose(-1, -2)
        torch.testing.assert_close(matmul_nt(a, b).double(), expected, rtol=1e-5, atol=1e-4)
