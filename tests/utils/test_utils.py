import numpy as np
import pytest
import torch

from sktransformer.cluster._compiled import compiled_available, index_add_rows
from sktransformer.utils import (
    chunk_rows,
    flatnonzero,
    greater,
    iter_chunks,
    make_generator,
    resolve_device,
    to_numpy,
    to_tensor,
)


def test_generator_is_seeded_from_random_state():
    a = torch.rand(5, generator=make_generator(3))
    b = torch.rand(5, generator=make_generator(3))
    c = torch.rand(5, generator=make_generator(4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    rs = np.random.RandomState(0)
    first, second = make_generator(rs).initial_seed(), make_generator(rs).initial_seed()
    assert first != second  # a RandomState instance is advanced, as in scikit-learn


def test_generator_from_none_does_not_touch_the_global_seed():
    state = torch.get_rng_state()
    g1, g2 = make_generator(None), make_generator(None)
    assert g1.initial_seed() != g2.initial_seed()
    assert torch.equal(torch.get_rng_state(), state)


def test_chunks_cover_every_row_once():
    rows = chunk_rows(1000, 64, batch_size=None)
    covered = np.concatenate([np.arange(1000)[sl] for sl in iter_chunks(1000, rows)])
    np.testing.assert_array_equal(covered, np.arange(1000))
    assert chunk_rows(10, 3, batch_size=4) == 4
    assert chunk_rows(10, 3, batch_size=400) == 10
    # the tile stays bounded when k is large
    assert chunk_rows(10**7, 4096) * 4096 <= 2 * (1 << 19)


def test_chunks_on_a_gpu_are_larger_and_still_bounded():
    # (a torch.device("cuda") is only a name: no GPU is needed to choose its tile)
    cpu = chunk_rows(10**7, 1024)
    assert chunk_rows(10**7, 1024, device="cpu") == cpu
    gpu = chunk_rows(10**7, 1024, device="cuda")
    assert gpu >= 32 * cpu and gpu * 1024 <= 1 << 25
    assert chunk_rows(10**7, 1024, batch_size=300, device="cuda") == 300


def test_to_tensor_shares_memory_on_cpu_and_to_numpy_copies_back():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = to_tensor(a, "cpu")
    assert t.data_ptr() == a.__array_interface__["data"][0]
    assert isinstance(to_numpy(t * 2), np.ndarray)


def test_resolve_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(ValueError, match="not a valid device"):
        resolve_device("tpu-ish")
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda:0")
    with pytest.warns(UserWarning, match="using the CPU"):
        assert resolve_device("cuda", fallback=True) == torch.device("cpu")


def test_chunk_runner_splits_restores_threads_and_carries_inference_mode():
    from sktransformer.utils import ChunkRunner
    before = torch.get_num_threads()
    seen = []

    def span(lo, hi):
        seen.append((lo, hi, torch.get_num_threads(), torch.is_inference_mode_enabled()))
        return hi - lo

    with torch.inference_mode(), ChunkRunner(3) as runner:
        assert sum(runner.map(span, 10)) == 10
    assert sorted(s[:2] for s in seen) == [(0, 3), (3, 6), (6, 10)]
    assert all(threads == 1 and inference for _, _, threads, inference in seen)
    assert torch.get_num_threads() == before
    assert ChunkRunner(1).map(span, 4) == [4]


def test_chunk_runner_workers_run_one_openmp_thread_each():
    # OpenMP's thread count is per thread: a new thread starts from the default (every
    # core), so a worker whose first op is a oneDNN or MKL product would run it on a team
    # of every core beside the other workers (oversubscribed)
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from pathlib import Path

    from sktransformer.utils import ChunkRunner

    torch_dir = Path(torch.__file__).resolve().parent  # not "torch" in the path: a venv
    # at /opt/torch/.venv holds every library's OpenMP under such a path

    def torch_openmp(lo, hi):  # the OpenMP library torch links, as this thread sees it
        return [i["num_threads"] for i in threadpoolctl.threadpool_info()
                if i["internal_api"] == "openmp"
                and torch_dir in Path(i["filepath"]).resolve().parents]

    if not torch_openmp(0, 0) or torch.get_num_threads() < 2:
        pytest.skip("torch without OpenMP, or one core: nothing to oversubscribe")
    with ChunkRunner(2) as runner:
        assert runner.map(torch_openmp, 10) == [[1], [1]]


def test_chunk_runner_maps_in_span_order_and_waits_for_its_threads_on_error():
    import threading
    import time

    from sktransformer.utils import ChunkRunner
    caller = threading.get_ident()
    done = []

    def span(lo, hi):
        if hi == 10:  # the last span: the calling thread's own
            assert threading.get_ident() == caller
            raise RuntimeError("boom")
        time.sleep(0.05)
        done.append((lo, hi))
        return lo

    with ChunkRunner(3) as runner:
        assert runner.map(lambda lo, hi: (lo, hi), 10) == [(0, 3), (3, 6), (6, 10)]
        assert runner.map(lambda lo, hi: (lo, hi), 0) == [(0, 0)]
        with pytest.raises(RuntimeError, match="boom"):
            runner.map(span, 10)
        assert sorted(done) == [(0, 3), (3, 6)]  # the others finished before the error left


def test_chunk_runners_share_their_worker_threads_and_nest():
    import os
    import threading

    from sktransformer.utils import ChunkRunner
    seen = []

    def span(lo, hi):
        seen.append(threading.current_thread())  # (objects: a new thread may reuse an id)
        return hi - lo

    with ChunkRunner(2) as runner:
        runner.map(span, 10)
    first = set(seen) - {threading.current_thread()}
    for _ in range(3):
        with ChunkRunner(2) as runner:
            assert runner.map(span, 10) == [5, 5]
    workers = set(seen) - {threading.current_thread()}
    alive = set(threading.enumerate())
    assert first and all(t in alive for t in workers)  # kept from one runner to the next

    with ChunkRunner(2) as runner:  # a runner needing more threads than the pool has
        with ChunkRunner((os.cpu_count() or 1) + 2) as more:  # leaves this one its pool
            assert sum(more.map(span, 10)) == 10
        assert runner.map(span, 10) == [5, 5]

    def outer(lo, hi):  # a runner inside a span: in a worker, its spans run there
        with ChunkRunner(2) as inner:
            return [(a, b, threading.get_ident() == me)
                    for a, b, me in inner.map(lambda a, b: (a, b, threading.get_ident()),
                                              hi - lo)]

    parts = []

    def nested():
        with ChunkRunner(2) as runner:
            parts.extend(runner.map(outer, 10))

    thread = threading.Thread(target=nested, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "a nested runner waited on busy worker threads"
    assert parts[0] == [(0, 5, True)]  # in the worker: one span, in its own thread
    assert [p[:2] for p in parts[1]] == [(0, 2), (2, 5)]  # in the caller: two spans


def _map_in_child():
    from sktransformer.utils import ChunkRunner
    with ChunkRunner(2) as runner:
        assert runner.map(lambda lo, hi: hi - lo, 10) == [5, 5]


@pytest.mark.filterwarnings("ignore:This process:DeprecationWarning")
def test_chunk_runner_works_in_a_forked_child():
    import multiprocessing
    import os

    from sktransformer.utils import ChunkRunner
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    with ChunkRunner(2) as runner:  # the parent's worker thread exists, idle
        runner.map(lambda lo, hi: None, 10)
    child = multiprocessing.get_context("fork").Process(target=_map_in_child)
    child.start()
    child.join(60)
    if child.exitcode is None:
        child.kill()
    assert child.exitcode == 0  # (a child submitting to its parent's threads hung)


def test_fit_leaves_torch_threads_as_it_found_them():
    from sktransformer import TransformerKMeans
    before = torch.get_num_threads()
    TransformerKMeans(3, device="cpu", random_state=0).fit(np.random.rand(50_000, 4))
    assert torch.get_num_threads() == before


def test_single_threaded_sets_one_thread_inside_and_restores_it():
    from sktransformer.utils import single_threaded
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with single_threaded():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with single_threaded(small=False):
            assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), single_threaded():
            raise RuntimeError
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_particle_kernel_fit_leaves_torch_threads_as_it_found_them():
    from sktransformer.kernels import ParticleKernelClassifier
    X, y = np.random.default_rng(0).normal(size=(200, 4)), np.arange(200) % 2
    before = torch.get_num_threads()
    ParticleKernelClassifier(8, n_iter=5, device="cpu", random_state=0).fit(X, y)
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.float16])
def test_greater_and_flatnonzero_are_torch_ops(dtype):
    # numpy's on the CPU (float16: torch's own), the same results, strided views included
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(2000, 3, generator=g) * 4).round().to(dtype)[:, 1]  # a strided view
    for b in (a.flip(0), a[:1], torch.zeros((), dtype=dtype)):
        mask = greater(a, b)
        assert mask.dtype == torch.bool and torch.equal(mask, a > b)
        found = flatnonzero(mask)
        assert found.dtype == torch.int64 and torch.equal(found, torch.nonzero(a > b).flatten())
    assert flatnonzero(torch.zeros(0, dtype=torch.bool)).shape == (0,)
    grad = torch.ones(3, requires_grad=True)
    assert torch.equal(greater(grad, torch.zeros(3)), torch.ones(3, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("weighted", [None, "weight", "weight and shift"])
def test_index_add_rows_compiled_is_index_add_to_the_bit(dtype, weighted):
    g = torch.Generator().manual_seed(0)
    source = torch.randn(5000, 17, generator=g, dtype=dtype) * 100
    index = torch.randint(0, 9, (5000,), generator=g)
    weight = torch.rand(5000, generator=g, dtype=dtype) if weighted else None
    shift = torch.randn(17, generator=g, dtype=dtype) if weighted == "weight and shift" else None
    rows = source if shift is None else source - shift
    expected = torch.zeros(10, 17, dtype=dtype).index_add_(
        0, index, rows if weight is None else rows * weight.unsqueeze(1))
    for compiled in (False, True):
        acc = torch.zeros(10, 17, dtype=dtype)
        assert index_add_rows(acc, index, source, weight, shift=shift,
                              compiled=compiled) is acc
        assert torch.equal(acc, expected)  # the same operations in the same order


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("within", [False, True])
def test_row_adder_by_chunks_is_index_add_rows_over_all_rows(compiled, weighted, within):
    from sktransformer.cluster._compiled import RowAdder

    g = torch.Generator().manual_seed(0)
    n = 1000
    source = torch.randn(n, 6, generator=g, dtype=torch.float64)
    index = torch.randint(0, 9, (n,), generator=g)
    weight = torch.rand(n, generator=g, dtype=torch.float64) if weighted else None
    dist, radius = torch.rand(n, generator=g, dtype=torch.float64), torch.rand(9, generator=g,
                                                                               dtype=torch.float64)
    expected = index_add_rows(torch.zeros(10, 6, dtype=torch.float64), index, source, weight,
                              within=(dist, radius) if within else None)
    acc = torch.zeros(10, 6, dtype=torch.float64)
    add = RowAdder(acc, index, weight, compiled=compiled)
    for sl in (slice(0, 300), slice(300, 999), slice(999, 1000)):  # the rows of each chunk
        assert add(sl, source[sl], within=(dist[sl], radius) if within else None) is acc
    if within and compiled and compiled_available():
        acc[-1] = expected[-1]  # (the compiled loop skips the rows beyond their radius)
    torch.testing.assert_close(acc, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("within", [False, True])
def test_index_add_rows_by_partial_rows_is_index_add(within, monkeypatch):
    # the GPU's path (each target spread over LANES partial rows), here on the CPU
    import sktransformer.utils._lanes as lanes

    g = torch.Generator().manual_seed(0)
    source = torch.randn(5000, 17, generator=g, dtype=torch.float64)
    index = torch.randint(0, 9, (5000,), generator=g)
    weight = torch.rand(5000, generator=g, dtype=torch.float64)
    limits = None
    if within:  # (trimming's radius: the points beyond it go to the last row)
        limits = (torch.rand(5000, generator=g, dtype=torch.float64), torch.full((1,), 0.5))
    expected = index_add_rows(torch.zeros(10, 17, dtype=torch.float64), index, source,
                              weight, within=limits)
    monkeypatch.setattr(lanes, "_contends", lambda index, n_targets: True)
    assert lanes.spread(index, 10) is not None
    acc = torch.zeros(10, 17, dtype=torch.float64)
    assert index_add_rows(acc, index, source, weight, within=limits) is acc
    torch.testing.assert_close(acc, expected, rtol=1e-12, atol=1e-12)


def test_spread_only_where_adds_contend_on_a_gpu():
    from sktransformer.utils import LANES, spread

    assert spread(torch.zeros(1 << 16, dtype=torch.long), 9) is None  # (the CPU)
    if torch.cuda.is_available():
        index = torch.randint(0, 9, (1 << 16,), device="cuda")
        lanes = spread(index, 9)
        assert torch.equal(lanes // LANES, index)
        assert torch.equal(lanes % LANES, torch.arange(1 << 16, device="cuda") % LANES)
        assert spread(index, (1 << 16) // LANES + 1) is None  # (more partial rows than adds)
        assert spread(index[:1000], 9) is None


def test_index_add_rows_takes_torch_s_path_where_the_loop_cannot(monkeypatch):
    import sktransformer.cluster._compiled._scatter as scatter

    calls = []
    kernels = scatter._LOOPS.get()
    if kernels is None:
        pytest.skip("numba is not installed: only torch's path exists")
    monkeypatch.setattr(scatter._LOOPS, "_loops",
                        tuple(lambda *a, f=f: calls.append(1) or f(*a) for f in kernels))
    acc, index, source = torch.zeros(3, 4), torch.tensor([0, 2, 2]), torch.ones(3, 4)
    index_add_rows(acc, index, source, compiled=True)
    assert calls == [1] and acc[2].tolist() == [2.0] * 4
    for args in ((acc, index.int(), source),  # int32 index
                 (acc, index, torch.ones(4, 3).T),  # a strided source
                 (acc, index, torch.ones(3, 4, requires_grad=True)),
                 (acc.half(), index, source.half())):
        with torch.no_grad():
            index_add_rows(*args, compiled=True)
    assert calls == [1] and acc[2].tolist() == [8.0] * 4  # torch's index_add_ for each
    monkeypatch.setattr(scatter._LOOPS, "enabled", False)
    assert not compiled_available()
    index_add_rows(acc, index, source, compiled=True)
    assert calls == [1] and acc[2].tolist() == [10.0] * 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("radii", [1, 9])
@pytest.mark.parametrize("weighted", [False, True])
def test_index_add_rows_within_a_radius(dtype, radii, weighted):
    # only the rows within their group's radius; torch's path puts the others in the last
    # row, the compiled one skips them: the groups' rows are the same to the bit
    g = torch.Generator().manual_seed(1)
    source = torch.randn(4000, 5, generator=g, dtype=dtype)
    index = torch.randint(0, 9, (4000,), generator=g)
    dist = torch.rand(4000, generator=g, dtype=dtype)
    dist[::50] = -1e-7  # (rounding: within any radius)
    radius = torch.rand(radii, generator=g, dtype=dtype)
    dist[1:20] = radius[0] if radii == 1 else radius[index[1:20]]  # at the radius: within
    weight = torch.rand(4000, generator=g, dtype=dtype) if weighted else None
    inside = dist <= (radius if radii == 1 else radius[index])
    kept = source[inside] if weight is None else (source * weight.unsqueeze(1))[inside]
    expected = torch.zeros(10, 5, dtype=dtype).index_add_(0, index[inside], kept)
    for compiled in (False, True):
        acc = torch.zeros(10, 5, dtype=dtype)
        index_add_rows(acc, index, source, weight, within=(dist, radius), compiled=compiled)
        assert torch.equal(acc[:9], expected[:9])
        assert (acc[9] == 0).all() == (compiled and compiled_available())


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("bad", [-1, 3])
def test_index_add_rows_refuses_an_index_out_of_range(weighted, bad):
    # both paths raise (the compiled loop checks the index though not other bounds)
    acc, source = torch.zeros(3, 4), torch.ones(5, 4)
    index = torch.tensor([0, 1, bad, 2, 0])
    weight = torch.ones(5) if weighted else None
    for compiled in (False, True):
        with pytest.raises((IndexError, RuntimeError)):
            index_add_rows(acc, index, source, weight, compiled=compiled)


def test_index_add_rows_without_a_numba_cache_or_numba_s_loop(monkeypatch):
    # no writable cache: compiled in memory; no loop at all: torch's path, with a warning
    numba = pytest.importorskip("numba")
    import sktransformer.cluster._compiled._scatter as scatter

    njit = numba.njit

    def uncached(*args, cache=False, **kwargs):
        if cache:
            raise RuntimeError("cannot cache function: no locator available")
        return njit(*args, **kwargs)

    def broken(*args, **kwargs):
        raise RuntimeError("no compiler")

    acc, index, source = torch.zeros(2, 3), torch.tensor([1, 1]), torch.ones(2, 3)
    try:
        for fake, built in ((uncached, True), (broken, False)):
            monkeypatch.setattr(numba, "njit", fake)
            scatter._LOOPS.forget()
            if built:
                assert compiled_available()
            else:
                with pytest.warns(RuntimeWarning, match="torch's index_add_ serves"):
                    assert not compiled_available()
            index_add_rows(acc, index, source, compiled=True)
        assert acc[1].tolist() == [4.0] * 3 and acc[0].tolist() == [0.0] * 3
    finally:
        monkeypatch.undo()
        scatter._LOOPS.forget()


@pytest.mark.parametrize("layout", ["numpy", "reversed", "fortran", "big-endian", "read-only",
                                    "sparse", "tensor"])
def test_squared_scale_catches_the_largest_magnitude_in_every_layout(layout):
    import scipy.sparse as sp

    from sktransformer.utils import check_squared_scale

    def make(value):
        X = np.zeros((100, 4))
        X[37, 2] = value
        return {"numpy": lambda: X, "reversed": lambda: X[::-1],
                "fortran": lambda: np.asfortranarray(X).astype(np.float32),
                "big-endian": lambda: X.astype(">f8"),
                "read-only": lambda: np.lib.stride_tricks.as_strided(X, writeable=False),
                "sparse": lambda: sp.csr_matrix(X),
                "tensor": lambda: torch.from_numpy(X)}[layout]()

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no warning either: a read-only array is only read)
        check_squared_scale(make(-1e10))  # far from overflowing
    big = 1e18 if layout == "fortran" else 1e154  # (float32 or float64)
    for value in (-big, big):
        with pytest.raises(ValueError, match="sums of their squared differences"):
            check_squared_scale(make(value))


def test_chunk_runner_gives_each_worker_enough_work(monkeypatch):
    from sktransformer.utils import ChunkRunner, _parallel

    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    rows, per_row = _parallel.ROWS_PER_WORKER, _parallel.WORK_PER_WORKER
    mkl = _parallel.MKL_WORK_PER_WORKER
    assert mkl < per_row

    def workers(n, work=None, device="cpu", onednn=True):
        return ChunkRunner.for_device(device, n, 1024, work=work, onednn=onednn).n_workers

    assert workers(20_000) == 4  # (no work given: one worker per thread, as chunks allow)
    assert workers(1500) == 2
    assert workers(20_000, work=20_000 * 33 * 16) == 1  # too small to share
    assert workers(3 * rows, work=0) == 3  # enough rows for three
    assert workers(10 * rows, work=0) == 4
    assert workers(20_000, work=2 * per_row) == 2  # few rows, but a heavy pass
    # MKL's products share worse on torch's threads: workers from less work
    assert workers(20_000, work=2 * mkl) == 1
    assert workers(20_000, work=2 * mkl, onednn=False) == 2
    assert workers(20_000, work=mkl - 1, onednn=False) == 1
    assert workers(10 * rows, work=0, device="meta") == 1  # not the CPU


def test_one_blas_thread_limits_blas_inside_and_restores_it_after(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from sktransformer.utils import _numba, one_blas_thread

    monkeypatch.setattr(_numba, "_blas", None)  # (listed afresh: every library loaded now)

    def blas():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info()
                if i["user_api"] == "blas"]

    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        before = blas()
        if not before:
            pytest.skip("no BLAS library threadpoolctl can see")
        with one_blas_thread():
            assert set(blas()) == {1}
            with one_blas_thread():  # (nested: nothing to change, nothing to restore)
                assert set(blas()) == {1}
            assert set(blas()) == {1}
        assert blas() == before
