"""kNN attention against exact softmax attention (float64, small n)."""

import pytest
import torch

from sktransformer.attention import _matmul, knn_attention, knn_attention_grad, topk_keys
from sktransformer.attention._knn import _CHUNK, _GROUP, _compiles, _filters
from sktransformer.utils import merge_topk, topk_available


def _qkv(n=300, d=16, bound=2.0, heads=(2,), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(*heads, n, d, generator=g, dtype=torch.float64) * 2 - 1) * bound
            for _ in range(3)]


def _exact(q, k, v, causal=False):
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -torch.inf)
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("causal", [False, True])
def test_all_keys_is_exact_attention_and_blocks_do_not_matter(causal):
    q, k, v = _qkv()
    exact = _exact(q, k, v, causal)
    torch.testing.assert_close(knn_attention(q, k, v, 300, causal=causal), exact)
    torch.testing.assert_close(knn_attention(q, k, v, 300, causal=causal, block=7), exact)


def test_topk_by_blocks_equals_a_full_topk():
    q, k, _ = _qkv()
    scores, idx = topk_keys(q, k, 10, block=13)
    full = torch.topk(q @ k.transpose(-1, -2) / 4, 10, dim=-1)
    torch.testing.assert_close(scores, full.values)
    assert torch.equal(idx, full.indices)


def test_no_queries_give_empty_results():
    q, k, _ = _qkv()
    scores, idx = topk_keys(q[..., :0, :], k, 10)
    assert scores.shape == idx.shape == (2, 0, 10)
    assert scores.dtype == q.dtype and idx.dtype == torch.long


def _full_topk(q, k, kk, causal=False, exclude=None):
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    n_q, n_k = s.shape[-2:]
    if causal:
        later = torch.arange(n_k) > (torch.arange(n_q) + n_k - n_q).unsqueeze(-1)
        s = s.masked_fill(later, -torch.inf)
    if exclude is not None:
        s = s.masked_fill(torch.arange(n_k) == exclude.unsqueeze(-1), -torch.inf)
    return torch.topk(s, kk, dim=-1)


@pytest.mark.parametrize("n_k, kk, q_lead, k_lead", [
    (2500, 4, (2,), (2,)),  # a partial last tile
    (16500, 30, (), ()),
    (4096, 8, (2, 3), (3,)),  # broadcast heads
    (2100, 8, (2,), ()),  # filtered from 256 kk keys when oneDNN scores (heads, one k)
])
@pytest.mark.parametrize("mask", ["none", "causal", "exclude"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])  # float32: oneDNN's tiles
def test_filtered_search_equals_a_full_topk(n_k, kk, q_lead, k_lead, mask, dtype):
    g = torch.Generator().manual_seed(n_k)
    n_q = 600  # blocks of 256 (oneDNN's tiles in float32) and a last one of 88 (torch's)
    q = torch.randn(*q_lead, n_q, 16, generator=g, dtype=dtype)
    k = torch.randn(*k_lead, n_k, 16, generator=g, dtype=dtype)
    exclude = torch.randint(0, n_k, (n_q,), generator=g) if mask == "exclude" else None
    # the queries' best keys fill two groups of the filter (keys _CHUNK // _GROUP apart in
    # the first tile, and the next ones)
    step = _CHUNK // _GROUP
    best = torch.cat([torch.arange(_GROUP) * step, torch.arange(_GROUP) * step + 1])
    first = q.reshape(-1, 16)[0]
    k[..., best, :] = 5 * first * torch.linspace(1, 1.1, len(best)).unsqueeze(-1)
    with torch.no_grad():
        onednn = _matmul.uses_onednn(q, k)
    assert _filters(q, k, kk) == (n_k >= (256 if onednn else 512) * kk)
    scores, idx = topk_keys(q, k, kk, causal=mask == "causal", exclude=exclude, block=256)
    full = _full_topk(q, k, kk, causal=mask == "causal", exclude=exclude)
    torch.testing.assert_close(scores, full.values)
    seen = torch.isfinite(full.values)  # a causal query sees fewer than kk keys at first
    assert bool((idx >= 0).all()) and bool((idx < n_k).all())
    if dtype == torch.float64:
        assert torch.equal(idx[seen], full.indices[seen])
    else:  # keys within a rounding of each other may swap: the chosen keys' exact scores
        # are the exact top-k's, and each key is chosen once
        exact = _full_topk(q.double(), k.double(), n_k, causal=mask == "causal",
                           exclude=exclude)
        chosen = torch.gather(q.double() @ k.double().transpose(-1, -2) / 4, -1, idx)
        torch.testing.assert_close(chosen[seen], exact.values[..., :kk][seen], rtol=0,
                                   atol=1e-5)
        full_rows = idx[seen.all(-1)]
        assert (full_rows.sort(-1).values.diff(dim=-1) > 0).all()


@pytest.mark.parametrize("n_q, n_k, kk, q_lead, k_lead", [
    (600, 4500, 8, (), ()),  # a partial last tile; two workers' spans of 300 queries
    (1100, 4096, 30, (2,), (2,)),  # three blocks of 256 queries a head
    (300, 8192, 64, (2, 3), (3,)),  # broadcast heads
])
@pytest.mark.parametrize("mask", ["none", "causal", "exclude"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_compiled_search_equals_a_full_topk(n_q, n_k, kk, q_lead, k_lead, mask, dtype,
                                            monkeypatch):
    # numba's running top-k (utils.merge_topk) by tiles of the workers' queries
    if not topk_available():
        pytest.skip("numba is not installed: the search takes its group filter")
    from sktransformer.attention import _knn

    monkeypatch.setattr(_knn, "_COMPILED_MIN_SCORES", 0)  # (a large search, made small)
    merged = []
    monkeypatch.setattr(_knn, "merge_topk", lambda *a: merged.append(1) or merge_topk(*a))
    dims, matmul = [], _knn.matmul_nt  # one head's tile at a time: 2-D products (oneDNN's)
    monkeypatch.setattr(_knn, "matmul_nt", lambda a, b, **kw: dims.append(
        (a.dim(), b.dim())) or matmul(a, b, **kw))
    g = torch.Generator().manual_seed(n_k + kk)
    q = torch.randn(*q_lead, n_q, 16, generator=g, dtype=dtype)
    k = torch.randn(*k_lead, n_k, 16, generator=g, dtype=dtype)
    best = 5 * q.reshape(-1, 16)[0] * torch.linspace(1, 1.1, 100, dtype=dtype).unsqueeze(-1)
    k[..., 1500:1600, :] = best  # a query's best keys all in one tile
    exclude = torch.randint(0, n_k, (n_q,), generator=g) if mask == "exclude" else None
    assert _compiles(q, k, kk)
    scores, idx = topk_keys(q, k, kk, causal=mask == "causal", exclude=exclude)
    assert merged and set(dims) == {(2, 2)}
    full = _full_topk(q, k, kk, causal=mask == "causal", exclude=exclude)
    torch.testing.assert_close(scores, full.values)
    assert bool((idx >= 0).all()) and bool((idx < n_k).all())
    if mask == "causal":  # a query's position (n_k - n_q + i) bounds its keys
        assert bool((idx <= torch.arange(n_q).unsqueeze(-1) + n_k - n_q).all())
    if dtype == torch.float64:
        assert torch.equal(idx, full.indices)
    else:  # as for the filter: keys within a rounding may swap; each is chosen once
        chosen = torch.gather(q.double() @ k.double().transpose(-1, -2) / 4, -1, idx)
        exact = _full_topk(q.double(), k.double(), kk, causal=mask == "causal",
                           exclude=exclude)
        torch.testing.assert_close(chosen, exact.values, rtol=0, atol=1e-5)
        assert (idx.sort(-1).values.diff(dim=-1) > 0).all()


def test_compiled_causal_search_stops_at_the_last_visible_key(monkeypatch):
    # each query's best key is the last it sees (queries aligned at the end of the keys,
    # one key ahead): the block of queries 512-1023 ends at position 1024, a tile's first
    # key, which its last query needs
    if not topk_available():
        pytest.skip("numba is not installed: the search takes its group filter")
    from sktransformer.attention import _knn

    monkeypatch.setattr(_knn, "_COMPILED_MIN_SCORES", 0)
    k = torch.randn(4608, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    q = 2 * k[1:]
    scores, idx = topk_keys(q, k, 4, causal=True)
    full = _full_topk(q, k, 4, causal=True)
    torch.testing.assert_close(scores, full.values)
    seen = torch.isfinite(full.values)  # (query 0 sees two keys, query 1 three)
    assert torch.equal(idx[:, 0], torch.arange(1, 4608)) and torch.equal(idx[seen],
                                                                         full.indices[seen])


def test_the_search_runs_compiled_where_it_measured_faster(monkeypatch):
    from sktransformer.attention import _knn

    monkeypatch.setattr(_knn, "_COMPILED_MIN_SCORES", 0)
    q, k = torch.zeros(2, 16), torch.zeros(64 * 256, 16)
    assert _compiles(q, k, 256) == topk_available()
    assert not _compiles(q, k, 257)  # a deep heap per query: the filter
    assert not _compiles(q, k[:4 * _CHUNK - 1], 8)  # few keys: one tile's top-k
    assert not _compiles(q.half(), k.half(), 8) and not _compiles(q, k.double(), 8)
    monkeypatch.setattr(_knn, "_COMPILED_MIN_SCORES", 2 * 64 * 256 + 1)
    assert not _compiles(q, k, 8)  # a small search never loads numba


def test_causal_output_never_depends_on_later_tokens():
    q, k, v = _qkv()
    out = knn_attention(q, k, v, 8, causal=True)
    v2 = v.clone()
    v2[..., 200:, :] += 100.0
    k2 = k.clone()
    k2[..., 200:, :] *= -3
    out2 = knn_attention(q, k2, v2, 8, causal=True)
    torch.testing.assert_close(out[..., :200, :], out2[..., :200, :])
    _, idx = topk_keys(q, k, 8, causal=True)
    rows = torch.arange(300).view(1, -1, 1)
    scores, _ = topk_keys(q, k, 8, causal=True)
    assert bool(((idx <= rows) | torch.isinf(scores)).all())


def test_truncated_error_falls_with_k():
    q, k, v = _qkv(bound=3.0)
    exact = _exact(q, k, v)
    errors = [float((knn_attention(q, k, v, kk) - exact).abs().mean()) for kk in (1, 4, 16, 64)]
    assert all(a > b for a, b in zip(errors, errors[1:]))
    assert errors[-1] < 0.05 * errors[0]


@pytest.mark.parametrize("estimator", ["tail", "gumbel"])
def test_sampled_estimators_converge_with_samples(estimator):
    _, k, v = _qkv(n=200, heads=(1,), bound=2.0)
    q = _qkv(n=20, heads=(1,), bound=2.0, seed=1)[0]
    exact = _exact(q, k, v)
    errors = []
    for n_samples in (16, 256):
        out = knn_attention(q, k, v, 14, estimator=estimator, n_samples=n_samples,
                            generator=torch.Generator().manual_seed(0))
        errors.append(float((out - exact).abs().mean()))
    assert errors[1] < 0.5 * errors[0]


def test_lazy_gumbel_is_unbiased():
    """The mean over many draws approaches the exact output even when the top-k hold little
    of the mass (k = 3 of 100 keys): the tail keys are sampled, not dropped."""
    _, k, v = _qkv(n=100, heads=(1,), bound=1.0)
    q = _qkv(n=10, heads=(1,), bound=1.0, seed=1)[0]
    exact = _exact(q, k, v)
    out = knn_attention(q, k, v, 3, estimator="gumbel", n_samples=4000,
                        generator=torch.Generator().manual_seed(0))
    truncated = knn_attention(q, k, v, 3)
    gumbel_error = float((out - exact).abs().mean())
    assert gumbel_error < 0.25 * float((truncated - exact).abs().mean())
    # within Monte Carlo error of 4000 draws: std(v) / sqrt(4000) * sqrt(2 / pi)
    assert gumbel_error < 2 * (1 / 3) ** 0.5 / 4000 ** 0.5
    mom = knn_attention(q, k, v, 3, estimator="gumbel", n_samples=4000, n_groups=10,
                        generator=torch.Generator().manual_seed(1))
    assert float((mom - exact).abs().mean()) < 2 * gumbel_error + 0.01


def test_unknown_estimator():
    q, k, v = _qkv(n=10)
    with pytest.raises(ValueError, match="Unknown estimator 'exact'"):
        knn_attention(q, k, v, 3, estimator="exact")


# the second case: values broadcast over more leading dims than queries and keys
@pytest.mark.parametrize("qk_lead, v_lead", [(2, 2), (1, 3)])
def test_topk_backward_is_the_exact_gradient_of_the_truncated_forward(qk_lead, v_lead):
    g = torch.Generator().manual_seed(0)
    q, k = [torch.randn(qk_lead, 40, 6, generator=g, dtype=torch.float64,
                        requires_grad=True) for _ in range(2)]
    v = torch.randn(v_lead, 40, 6, generator=g, dtype=torch.float64, requires_grad=True)
    d_out = torch.randn(v_lead, 40, 6, generator=g, dtype=torch.float64)
    ours = torch.autograd.grad(knn_attention_grad(q, k, v, 5, backward="topk"), (q, k, v),
                               d_out)
    ref = torch.autograd.grad(knn_attention(q, k, v, 5), (q, k, v), d_out)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("backward", ["topk", "sampled"])
def test_the_gradient_by_blocks_of_queries_equals_one_block(backward, monkeypatch):
    from sktransformer.attention import _knn_grad

    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 1, 40, 6, generator=g, dtype=torch.float64, requires_grad=True)
    k, v = [torch.randn(2, 3, 40, 6, generator=g, dtype=torch.float64, requires_grad=True)
            for _ in range(2)]  # q broadcast over the heads
    d_out = torch.randn(2, 3, 40, 6, generator=g, dtype=torch.float64)

    def grads():
        out = knn_attention_grad(q, k, v, 5, backward=backward, causal=True,
                                 generator=torch.Generator().manual_seed(1))
        return (out, *torch.autograd.grad(out, (q, k, v), d_out))

    whole = grads()
    monkeypatch.setattr(_knn_grad, "_TILE", 4 * 2 * 3 * 5 * 6 * 7)  # blocks of 7 queries
    assert len(list(_knn_grad._query_blocks(torch.zeros(2, 3, 40, 5), 6))) == 6
    for a, b in zip(grads(), whole):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b)


def test_sampled_gradients_approach_the_exact_attention_gradients():
    g = torch.Generator().manual_seed(0)
    q, k, v = [torch.randn(1, 50, 8, generator=g, dtype=torch.float64, requires_grad=True)
               for _ in range(3)]
    d_out = torch.randn(1, 50, 8, generator=g, dtype=torch.float64)
    exact = torch.autograd.grad(_exact(q, k, v), (q, k, v), d_out)
    errors = []
    for n_samples in (100, 1600):
        out = knn_attention_grad(q, k, v, 8, backward="sampled", n_samples=n_samples,
                                 generator=torch.Generator().manual_seed(1))
        got = torch.autograd.grad(out, (q, k, v), d_out)
        errors.append([float((a - b).norm() / b.norm()) for a, b in zip(got, exact)])
    for small, large in zip(*errors):
        assert large < 0.5 * small  # Monte Carlo: 16x the draws, about 4x less error
    assert max(errors[1]) < 0.15


def _augment(Z, role):
    if role == "query":
        return torch.cat([Z, torch.ones_like(Z[..., :1])], -1)
    return torch.cat([2 * Z, -Z.square().sum(-1, keepdim=True)], -1)


def test_descent_with_sampled_gradients_reaches_the_exact_gradient_loss():
    """A small regression task: learn the projection P of Euclidean attention over the
    training set (leave-one-out, targets as values) on make_friedman1. Adam with the
    sampled gradients of full softmax attention reaches the full-softmax leave-one-out
    loss that the same steps with exact autograd gradients reach (0.083 vs 0.078 here,
    from 0.471; the top-k backward: 0.078)."""
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(300, random_state=5)
    Xs = torch.tensor((X - X.mean(0)) / X.std(0))
    Ys = torch.tensor((y - y.mean()) / y.std()).reshape(-1, 1)
    n, scale = len(Xs), 0.25
    eye = torch.eye(n, dtype=torch.bool)

    def full(queries, keys, rows):
        s = (queries @ keys.T * scale).masked_fill(eye[rows], -torch.inf)
        return torch.softmax(s, -1) @ Ys

    def loo_loss(P):
        Z = Xs @ P
        return float((full(_augment(Z, "query"), _augment(Z, "key"), slice(None)) - Ys)
                     .square().mean())

    def train(attend, steps=100):
        g = torch.Generator().manual_seed(0)
        P = torch.eye(10, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.Adam([P], lr=0.05)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1 - t / steps)
        for _ in range(steps):
            rows = torch.randperm(n, generator=g)[:128]
            Z = Xs @ P
            pred = attend(_augment(Z[rows], "query"), _augment(Z, "key"), rows, g)
            loss = (pred - Ys[rows]).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        return loo_loss(P.detach())

    start = loo_loss(torch.eye(10, dtype=torch.float64))
    exact = train(lambda qq, kk, rows, g: full(qq, kk, rows))
    sampled = train(lambda qq, kk, rows, g: knn_attention_grad(
        qq, kk, Ys, 16, backward="sampled", scale=scale, n_samples=32, generator=g,
        exclude=rows))
    topk = train(lambda qq, kk, rows, g: knn_attention_grad(
        qq, kk, Ys, 16, backward="topk", scale=scale, exclude=rows))
    assert exact < 0.2 * start
    assert sampled < 1.15 * exact
    assert topk < 1.15 * exact


def test_rao_blackwellized_draws_are_exact_when_the_top_k_hold_the_mass():
    q, k, v = _qkv(n=50, heads=(1,), bound=1.0)
    out = knn_attention(q, k, v, 50, estimator="gumbel", n_samples=4,
                        generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(out, _exact(q, k, v))


def test_rao_blackwellization_lowers_the_error_of_the_same_draws():
    """Peaked scores (B = 4, k = 8 of 300): the same 32 draws per query, averaged plainly
    or Rao-Blackwellized over the top-k; both unbiased, the second 3x closer here
    (0.073 vs 0.221)."""
    from sktransformer.attention import rao_blackwell, sample_keys

    q, k, v = _qkv(n=300, d=16, heads=(1,), bound=4.0)
    exact = _exact(q, k, v)
    draws = sample_keys(q, k, 8, 32, generator=torch.Generator().manual_seed(0), lazy=True)
    plain = v[0][draws].mean(-2)
    scores, idx = topk_keys(q, k, 8)
    keys, w = rao_blackwell(scores, idx, draws)
    rb = (w.unsqueeze(-1) * v[0][keys]).sum(-2)
    torch.testing.assert_close(w.sum(-1), torch.ones_like(w[..., 0]))
    assert float((rb - exact).abs().mean()) < 0.5 * float((plain - exact).abs().mean())


def test_ivf_index_scanning_every_cell_is_the_exact_top_k():
    pytest.importorskip("faiss", reason="IVFIndex is optional; faiss-cpu is in the test extra")
    from sktransformer.attention import IVFIndex

    q, k, v = _qkv(n=800, d=8, heads=(2,))
    exact_scores, exact_idx = topk_keys(q, k, 6)
    index = IVFIndex(n_lists=16, n_probe=16)
    scores, idx = topk_keys(q, k, 6, index=index)
    torch.testing.assert_close(scores, exact_scores)
    assert torch.equal(idx, exact_idx)
    torch.testing.assert_close(knn_attention(q, k, v, 6, index=index), knn_attention(q, k, v, 6))
    few = topk_keys(q, k, 6, index=IVFIndex(n_lists=16, n_probe=2))[1]
    recall = float((few.unsqueeze(-1) == exact_idx.unsqueeze(-2)).any(-1).float().mean())
    assert 0.2 < recall < 1.0  # approximate: most, not all, of the true neighbours


def test_ivf_index_is_reused_for_the_same_keys_and_rebuilt_for_changed_ones():
    pytest.importorskip("faiss", reason="IVFIndex is optional; faiss-cpu is in the test extra")
    from sktransformer.attention import IVFIndex

    q, k, _ = _qkv(n=2000, d=8, heads=(2,))
    index = IVFIndex(n_probe=1.0, train_size=500)  # every cell: exact
    exact = topk_keys(q, k, 5)[1]
    assert torch.equal(topk_keys(q, k, 5, index=index)[1], exact)
    built = index._built["indexes"]
    assert len(built) == 2 and index._built["indexes"][0].nlist == int(2000 ** 0.5)
    assert torch.equal(topk_keys(q[..., :50, :], k, 5, index=index)[1], exact[..., :50, :])
    assert index._built["indexes"] is built  # reused
    k.mul_(-1)  # changed in place: rebuilt
    assert torch.equal(topk_keys(q, k, 5, index=index)[1], topk_keys(q, k, 5)[1])
    assert index._built["indexes"] is not built
    fraction = IVFIndex(n_lists=40, n_probe=0.1)
    assert fraction._probes(40) == 4 and IVFIndex(n_probe=3)._probes(40) == 3


def test_ivf_index_refuses_what_it_cannot_do():
    pytest.importorskip("faiss", reason="IVFIndex is optional; faiss-cpu is in the test extra")
    from sktransformer.attention import IVFIndex

    q, k, v = _qkv(n=100)
    with pytest.raises(ValueError, match="cannot be causal"):
        knn_attention(q, k, v, 4, causal=True, index=IVFIndex())
    with pytest.raises(ValueError, match="needs the exact top-k"):
        knn_attention(q, k, v, 4, estimator="gumbel", index=IVFIndex())


@pytest.mark.parametrize("estimator", ["truncated", "tail", "gumbel"])
def test_exclude_hides_one_key_from_each_query(estimator):
    """Leave-one-out: hiding key i from query i is attention over the other keys, for every
    estimator (sampled ones: the excluded key is never drawn)."""
    q, k, v = _qkv(n=60, heads=(1,), bound=1.0)
    n = q.shape[-2]
    exclude = torch.arange(n)
    s = q @ k.transpose(-1, -2) / 4
    s = s.masked_fill(torch.eye(n, dtype=torch.bool), -torch.inf)
    exact = torch.softmax(s, -1) @ v
    scores, idx = topk_keys(q, k, 5, exclude=exclude)
    assert not bool((idx == exclude.view(1, -1, 1)).any())
    out = knn_attention(q, k, v, 59 if estimator == "truncated" else 5, estimator=estimator,
                        n_samples=3000, exclude=exclude,
                        generator=torch.Generator().manual_seed(0))
    tol = 1e-10 if estimator == "truncated" else 0.05
    assert float((out - exact).abs().max()) < tol


@pytest.mark.parametrize("lazy, path", [(True, "tail"), (True, "tiny tiles"),
                                         (True, "rows"), (False, "rows")])
@pytest.mark.parametrize("causal", [False, True])
def test_sampled_keys_follow_the_softmax(lazy, path, causal, monkeypatch):
    """Both samplers (lazy Gumbel from the top-k, multinomial over all keys) draw from the
    full softmax: the empirical frequencies of 20000 draws match P to Monte Carlo error,
    and hidden keys (later ones, the excluded one) are never drawn. The lazy sampler is
    run on each of its paths: tail candidates (forced, though these draws would rather
    take full rows), the same by blocks of 7 queries and runs of 156250 candidates, and
    the full rows it switches to when they are cheaper."""
    from sktransformer.attention import _knn, sample_keys

    if path != "rows":
        monkeypatch.setattr(_knn, "_DENSE", float("inf"))
    if path == "tiny tiles":
        monkeypatch.setattr(_knn, "_TILE", 5_000_000)

    q, k, _ = _qkv(n=40, d=4, heads=(1,), bound=1.5)
    exclude = torch.arange(40).roll(1)
    j = sample_keys(q, k, 4, 20000, causal=causal, exclude=exclude, lazy=lazy,
                    generator=torch.Generator().manual_seed(0))
    s = q @ k.transpose(-1, -2) / 2
    hidden = torch.zeros(40, 40, dtype=torch.bool)
    hidden[torch.arange(40), exclude] = True
    if causal:
        hidden |= torch.ones(40, 40, dtype=torch.bool).triu(1)
    p = torch.softmax(s.masked_fill(hidden, -torch.inf), -1)
    freq = torch.zeros_like(p).scatter_add_(-1, j, torch.ones_like(j, dtype=p.dtype)) / 20000
    assert float(freq[..., hidden].sum()) == 0.0
    assert float((freq - p).abs().max()) < 5 * (0.25 / 20000) ** 0.5


def test_small_query_batches_compile_no_onednn_kernel(monkeypatch):
    # oneDNN compiles a kernel per new shape: fewer than 256 queries keep torch.matmul
    op = _matmul._onednn_linear()
    if op is None:
        pytest.skip("oneDNN is only used on AVX-512 CPUs")
    calls = []
    monkeypatch.setattr(_matmul, "_onednn_linear",
                        lambda: lambda *args: calls.append(1) or op(*args))
    g = torch.Generator().manual_seed(0)
    k = torch.randn(5000, 16, generator=g)
    q = torch.randn(300, 16, generator=g)
    few, _ = topk_keys(q[:100], k, 8)
    assert not calls
    many, _ = topk_keys(q, k, 8)
    assert calls
    torch.testing.assert_close(few, many[:100])
