"""The grouped weightings against per-group dense computations."""

import numpy as np
import pytest
import torch

from sktransformer.attention import (
    group_argmax,
    group_quantile,
    group_sparsemax,
    group_sums,
    gumbel,
    sparsemax,
)
from sktransformer.attention._grouped import kth_smallest


def _problem(seed=0, n=200, k=7):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(n, generator=g, dtype=torch.float64) * 3
    groups = torch.randint(0, k, (n,), generator=g)
    groups[groups == 3] = 2  # group 3 empty
    weight = torch.randint(0, 4, (n,), generator=g).to(torch.float64)
    return scores, groups, k, weight


@pytest.mark.parametrize("lanes", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_group_sums_are_the_sums_of_each_group(dtype, lanes, monkeypatch):
    # lanes: the GPU's path (partial sums per group), here on the CPU
    from sktransformer.utils import _lanes

    monkeypatch.setattr(_lanes, "_contends", lambda index, n_targets: lanes)
    scores, groups, k, weight = _problem(4)  # group 3 empty
    sums = group_sums(scores.to(dtype), groups, k)
    assert sums.dtype == dtype and sums.shape == (k,) and sums[3] == 0
    expected = [float(scores[groups == j].sum()) for j in range(k)]
    np.testing.assert_allclose(sums.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("weighted", [False, True])
def test_group_sparsemax_is_sparsemax_of_each_group_with_repetition(weighted):
    scores, groups, k, weight = _problem()
    w = weight if weighted else None
    p = group_sparsemax(scores, groups, k, w)
    for j in range(k):
        members = groups == j
        if not members.any():
            continue
        reps = weight[members].long() if weighted else torch.ones(int(members.sum()),
                                                                  dtype=torch.long)
        if reps.sum() == 0:
            continue
        dense = sparsemax(torch.repeat_interleave(scores[members], reps)[None])[0]
        per_key = torch.zeros(int(members.sum()), dtype=torch.float64)
        per_key.index_add_(0, torch.repeat_interleave(torch.arange(len(reps)), reps), dense)
        torch.testing.assert_close(p[members], per_key)
        assert float(p[members].sum()) == pytest.approx(1.0)


@pytest.mark.parametrize("weighted", [False, True])
def test_group_sparsemax_of_huge_scores_is_one_hot_and_shifts_change_nothing(weighted):
    """Scores 1e57 apart (robust k-means of data at 1e30) put each group's weight on its
    top key, not the rounding of sums of 1e57s (weights of 1e41, infinite centers); a
    shift of every score changes no weight."""
    scores, groups, k, weight = _problem()
    w = weight if weighted else None
    p = group_sparsemax(scores, groups, k, w)
    shifted = group_sparsemax(scores - 1e6, groups, k, w)
    torch.testing.assert_close(shifted, p, rtol=0, atol=1e-9)
    huge, tau = group_sparsemax(scores * 1e57, groups, k, w, return_threshold=True)
    assert torch.isfinite(tau).all()
    for j in range(k):
        members = (groups == j) & (torch.ones_like(scores, dtype=torch.bool) if w is None
                                   else w > 0)
        if members.any():
            top = torch.nonzero(members).flatten()[scores[members].argmax()]
            assert float(huge[top]) == pytest.approx(1.0)
            assert float(huge[groups == j].sum()) == pytest.approx(1.0)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("guess", ["answer", "near", "low", "high", "random"])
def test_group_sparsemax_from_any_start_is_the_same(weighted, guess):
    # a start only saves passes: from above, below or anywhere, the same weights (up to the
    # rounding of sums that follow the keys changing side) on the same support
    scores, groups, k, weight = _problem(3)
    w = weight if weighted else None
    p, tau = group_sparsemax(scores, groups, k, w, return_threshold=True)
    g = torch.Generator().manual_seed(1)
    start = {"answer": tau, "near": tau + 1e-3 * torch.randn(k, generator=g, dtype=tau.dtype),
             "low": torch.full((k,), -1e9, dtype=tau.dtype),
             "high": torch.full((k,), 1e9, dtype=tau.dtype),
             "random": 3 * torch.randn(k, generator=g, dtype=tau.dtype)}[guess]
    p2, tau2 = group_sparsemax(scores, groups, k, w, start=start, return_threshold=True)
    assert torch.equal(p2 > 0, p > 0)
    torch.testing.assert_close(p2, p, rtol=1e-12, atol=1e-12)
    present = torch.bincount(groups, minlength=k) > 0
    torch.testing.assert_close(tau2[present], tau[present], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("q", [0.0, 0.3, 0.9, 1.0])
def test_group_quantile_is_the_weighted_inverted_cdf(q):
    scores, groups, k, weight = _problem(2)
    cut = group_quantile(scores, groups, k, weight, q=q)
    for j in range(k):
        members = (groups == j).numpy()
        if not members.any():
            assert cut[j] == np.inf
            continue
        s, w = scores.numpy()[members], weight.numpy()[members]
        if w.sum() == 0:
            continue
        above = np.array([w[s >= t].sum() for t in s])  # weight at or above each score
        valid = s[above >= q * w.sum() * (1 - 1e-9)]
        assert float(cut[j]) == valid.max()


@pytest.mark.parametrize("lanes", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_group_max_is_the_largest_of_each_group(dtype, lanes, monkeypatch):
    import sktransformer.attention._grouped as grouped
    from sktransformer.utils import _lanes

    monkeypatch.setattr(_lanes, "_contends", lambda index, n_targets: lanes)
    scores, groups, k, _ = _problem(4)  # group 3 empty
    best = grouped.group_max(scores.to(dtype), groups, k)
    assert best.dtype == dtype and best[3] == -torch.inf
    for j in (0, 1, 2):
        assert best[j] == scores.to(dtype)[groups == j].max()


@pytest.mark.parametrize("lanes", [False, True])
def test_group_argmax_ties_and_incumbent(lanes, monkeypatch):
    from sktransformer.utils import _lanes

    monkeypatch.setattr(_lanes, "_contends", lambda index, n_targets: lanes)
    scores = torch.tensor([1.0, 3.0, 3.0, 2.0, 5.0, 5.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    assert group_argmax(scores, groups, 3).tolist() == [1, 4, -1]
    incumbent = torch.tensor([2, 3, -1])  # 2 ties with the best: kept; 3 is worse: replaced
    assert group_argmax(scores, groups, 3, incumbent=incumbent).tolist() == [2, 4, -1]
    assert group_argmax(scores + torch.tensor([0, 1e-9, 0, 0, 0, 0]), groups, 3,
                        incumbent=incumbent, rtol=1e-6).tolist() == [2, 4, -1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_keep_incumbent_by_numpy_is_torchs_rule(dtype, monkeypatch):
    # on the CPU keep_incumbent runs numpy's ops: the same choices as torch's, on ties
    # within rtol, incumbents outside their group, none (-1) and an empty group
    from sktransformer.attention import _grouped

    scores, groups, k, _ = _problem(5, n=300, k=9)
    scores = (scores * 4).round().to(dtype) / 4  # (many exact ties)
    best = _grouped.group_max(scores, groups, k)
    chosen = group_argmax(scores, groups, k)
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        incumbent = torch.randint(-1, len(scores), (k,), generator=g)
        for rtol in (0.0, 1e-2):
            got = _grouped.keep_incumbent(scores, groups, best, chosen, incumbent, rtol=rtol)
            with monkeypatch.context() as m:
                m.setattr(_grouped, "through_numpy", lambda *tensors: False)
                want = _grouped.keep_incumbent(scores, groups, best, chosen, incumbent,
                                               rtol=rtol)
            assert got.dtype == want.dtype == torch.int64
            assert got.tolist() == want.tolist()
    kept = _grouped.keep_incumbent(scores, groups, best, chosen, chosen.clamp(min=0))
    assert kept[chosen >= 0].tolist() == chosen[chosen >= 0].tolist()
    assert kept[3] == -1  # (group 3 is empty: no member to keep)


def test_gumbel_max_draws_from_the_softmax():
    g = torch.Generator().manual_seed(0)
    scores = torch.tensor([0.0, 1.0, 2.0, -1.0, 0.5], dtype=torch.float64)
    groups = torch.zeros(5, dtype=torch.long)
    draws = 20000
    counts = np.zeros(5)
    for _ in range(draws):
        counts[int(group_argmax(scores + gumbel(scores, generator=g), groups, 1)[0])] += 1
    expected = torch.softmax(scores, 0).numpy()
    # 5 standard errors of a binomial proportion
    assert np.all(np.abs(counts / draws - expected) < 5 * np.sqrt(expected / draws))


@pytest.mark.parametrize("q", [0.0, 0.05, 0.5, 0.95, 1.0])
@pytest.mark.parametrize("n_groups", [1, 7])
@pytest.mark.parametrize("values", ["ties", "below float32", "float32", "float32 ties"])
def test_group_quantile_selection_equals_the_sorted_path(q, n_groups, values):
    scores, groups, k, _ = _problem(3, n=500, k=n_groups)
    if values == "ties":
        scores = torch.round(scores * 4) / 4  # many exact ties
    elif values == "below float32":  # distinct in float64, tied once rounded to float32
        scores = 1 + scores * 1e-12
    elif values == "float32":
        scores = scores.float()
    else:  # ties, zeros of both signs, the extremes
        scores = (torch.round(scores * 2) / 2).float()
        scores[::7], scores[1::7] = 0.0, -0.0
        scores[2], scores[3] = torch.finfo(torch.float32).max, torch.finfo(torch.float32).min
    fast = group_quantile(scores, groups, n_groups, None, q=q)
    sorted_path = group_quantile(scores, groups, n_groups, torch.ones_like(scores), q=q)
    assert torch.equal(fast, sorted_path)  # both are scores of the data, exactly


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.int64, torch.float16])
@pytest.mark.parametrize("order", ["random", "sorted", "reversed", "ties", "constant"])
def test_kth_smallest_is_kthvalue(order, dtype, device):
    # numpy's selection on the CPU (float16: torch's own), a sort on a GPU: the same value
    # and dtype
    g = torch.Generator().manual_seed(0)
    n = 60_000
    values = torch.randn(n, generator=g, dtype=torch.float64) * 100
    values = {"random": values, "sorted": values.sort().values,
              "reversed": values.sort(descending=True).values,
              "ties": torch.randint(0, 5, (n,), generator=g).double(),
              "constant": torch.zeros(n, dtype=torch.float64)}[order].to(dtype)
    for rank in (1, 2, n // 10, n // 2, n - 1, n):
        found = kth_smallest(values.to(device), rank)
        assert found.dtype == dtype and found.shape == () and found.device.type == device
        assert found.cpu() == torch.kthvalue(values, rank).values


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n_groups", [1, 7])
@pytest.mark.parametrize("q", [0.5, 0.9, 0.97, 1.0])
def test_group_quantile_from_a_guess_is_the_same(dtype, n_groups, q, monkeypatch):
    import sktransformer.attention._grouped as grouped

    scores, groups, k, _ = _problem(5, n=3000, k=n_groups)
    if n_groups == 1:
        groups = torch.zeros_like(groups)
    scores = (torch.round(scores * 8) / 8).to(dtype)  # ties at the thresholds
    exact = group_quantile(scores, groups, k, q=q)
    sorted_sizes = []  # the keys that the selection (one group) or the sort ran over
    spied = "kth_smallest" if n_groups == 1 else "_ranked"
    select = getattr(grouped, spied)
    monkeypatch.setattr(grouped, spied,
                        lambda s, *a: sorted_sizes.append(len(s)) or select(s, *a))
    finite = torch.where(torch.isfinite(exact), exact, 0.0)
    for below in (finite + 0.5, finite + 1e-3, finite, finite - 0.5,  # a guess too low
                  torch.full((k,), torch.inf, dtype=dtype), finite[:1] + 0.2,
                  torch.full((k,), -torch.inf, dtype=dtype)):
        sorted_sizes.clear()
        found = group_quantile(scores, groups, k, q=q, below=below.to(dtype))
        assert torch.equal(found, exact)
        # a guess above every threshold sorts only the keys below it; a guess at or under
        # one of them, all keys
        tail = bool((below > exact)[torch.isfinite(exact)].all())
        bound = below if len(below) == 1 else below[groups]
        assert sorted_sizes[0] == (int((scores < bound).sum()) if tail else len(scores))


def test_kth_smallest_keeps_large_integers_exact():
    values = torch.tensor([2**62 + 3, 5, 2**62 + 1, 2**53 + 1])  # (no float64 holds them)
    assert [int(kth_smallest(values, r)) for r in (1, 2, 3, 4)] == sorted(values.tolist())
