"""numba's running top-k (utils.merge_topk) against torch.topk."""

import json
import os
import subprocess
import sys

import pytest
import torch

from sktransformer.utils import _topk, merge_topk, topk_available

pytestmark = pytest.mark.skipif(not topk_available(), reason="numba is not installed: the "
                                "running top-k is compiled only (the search uses its filter)")


def _empty(rows, kk, dtype):
    return torch.full((rows, kk), -torch.inf, dtype=dtype), torch.full((rows, kk), -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kk", [1, 7, 64])
def test_merged_tiles_in_any_order_give_the_top_k(dtype, kk):
    g = torch.Generator().manual_seed(kk)
    scores = torch.randn(37, 8 * 256, generator=g, dtype=dtype)
    scores[3, 100:900] += 10  # one row's best keys all in one tile (every group hit)
    scores[5] = torch.arange(scores.shape[1], dtype=dtype)  # its best keys arrive last
    values, indices = _empty(37, kk, dtype)
    for start in torch.randperm(8, generator=g).tolist():
        merge_topk(scores[:, start * 256:(start + 1) * 256].contiguous(), start * 256,
                   values, indices)
    full = scores.topk(kk)
    assert torch.equal(values.sort(-1).values, full.values.sort(-1).values)
    assert torch.equal(indices.sort(-1).values, full.indices.sort(-1).values)
    assert (values[:, :1] == values.amin(-1, keepdim=True)).all()  # heap order: the root


def test_rows_with_fewer_finite_scores_keep_minus_inf_and_nan_never_enters():
    scores = torch.full((4, 128), -torch.inf)
    scores[0, [5, 70]] = torch.tensor([1.0, 2.0])  # two finite keys for kk = 4
    # a NaN in each group of keys (g, g + 64), second or first: it hides no key
    scores[1, :64], scores[1, 64:] = torch.arange(64.0), torch.nan
    scores[2, :64], scores[2, 64:] = torch.nan, torch.arange(64.0)
    scores[3, 0] = torch.nan
    values, indices = _empty(4, 4, torch.float32)
    merge_topk(scores, 1000, values, indices)
    assert sorted(values[0].tolist())[2:] == [1.0, 2.0]
    assert sorted(indices[0].tolist()) == [-1, -1, 1005, 1070]
    for row, first in ((1, 1060), (2, 1124)):
        assert sorted(values[row].tolist()) == [60.0, 61.0, 62.0, 63.0]
        assert sorted(indices[row].tolist()) == list(range(first, first + 4))
    assert values[3].isinf().all() and (indices[3] == -1).all()


def test_of_equal_scores_the_first_merged_stays():
    values, indices = _empty(1, 2, torch.float64)
    merge_topk(torch.ones(1, 128, dtype=torch.float64), 0, values, indices)
    merge_topk(torch.ones(1, 128, dtype=torch.float64), 128, values, indices)
    assert (indices < 128).all()


def test_merge_topk_refuses_what_it_cannot_take(monkeypatch):
    values, indices = _empty(2, 3, torch.float32)
    with pytest.raises(ValueError, match="width 64 times a power of two"):
        merge_topk(torch.zeros(2, 192), 0, values, indices)  # 3 groups of 64
    with pytest.raises(ValueError, match="width 64 times a power of two"):
        merge_topk(torch.zeros(2, 64), 0, values, indices)  # one halving at least
    with pytest.raises(ValueError, match="the same rows"):
        merge_topk(torch.zeros(3, 128), 0, values, indices)
    with pytest.raises(ValueError, match="contiguous CPU"):
        merge_topk(torch.zeros(128, 2).T, 0, values, indices)
    with pytest.raises(TypeError, match="float32 or float64"):
        merge_topk(torch.zeros(2, 128, dtype=torch.float64), 0, values, indices)
    with pytest.raises(TypeError, match="int64 indices"):
        merge_topk(torch.zeros(2, 128), 0, values, indices.int())
    assert values.isinf().all()  # nothing written
    monkeypatch.setattr(_topk._LOOPS, "enabled", False)
    assert not topk_available()
    with pytest.raises(RuntimeError, match="needs numba"):
        merge_topk(torch.zeros(2, 128), 0, values, indices)


def test_a_fresh_process_loads_the_loops_from_numba_s_cache():
    # a loop that closes over another compiled function misses numba's cache in every
    # process (it recompiled, 0.7-1 s a process, before the merge was written as one loop)
    from sktransformer.cluster._compiled import _nearest, _scatter, _sparsemax, _trim

    # (compiled and cached, if need be)
    merge, sums, trim = _topk._LOOPS.get(), _scatter._LOOPS.get(), _trim._LOOPS.get()
    sparsemax, nearest = _sparsemax._LOOPS.get(), _nearest._LOOPS.get()
    folder = os.path.dirname(_topk.__file__)
    if not os.access(os.path.join(folder, "__pycache__"), os.W_OK):
        pytest.skip("numba cannot cache here (no writable __pycache__): it compiles in memory")
    code = ("import json\n"
            "from sktransformer.cluster._compiled import _nearest, _scatter, _sparsemax, _trim\n"
            "from sktransformer.utils import _topk\n"
            "loops = [_topk._LOOPS.get(), *_scatter._LOOPS.get(), _trim._LOOPS.get(),"
            " *_sparsemax._LOOPS.get(), _nearest._LOOPS.get()]\n"
            "print(json.dumps([[sum(f.stats.cache_hits.values()) for f in loops],"
            " [sum(f.stats.cache_misses.values()) for f in loops]]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    hits, misses = json.loads(out)
    assert None not in (merge, trim, sparsemax, nearest)
    assert len(hits) == len(misses) == 3 + len(sums) + len(sparsemax)
    # float32 and float64 (the trimming pass: each with two layouts of its sums)
    trim_at = 1 + len(sums)
    assert hits[trim_at] == 4 and misses == [0] * len(hits)
    assert hits[:trim_at] + hits[trim_at + 1:] == [2] * (len(hits) - 1)
