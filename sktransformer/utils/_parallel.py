"""Parallelism over chunks of rows, the way scikit-learn's k-means parallelizes.

A layer runs about ten short torch ops per chunk. With torch's own intra-op threads every op
is a parallel region with a barrier, and on a few cores the barriers cost more than the
work. Instead each worker thread takes a contiguous span of rows and runs its ops
single-threaded (torch releases the GIL inside ops), so the only synchronization is the
sum of the workers' partial results.
"""

import contextlib
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import torch

# Where workers pay (k-means fits on 2 cores, numba's sums loaded; the fit time with this
# rule over two workers always, paired, in random order with pauses between fits): 0.90 at
# 20,000 x 32, k = 16; 0.85 at 50,000 x 16, k = 16; 0.95 at 131,072 x 8, k = 8; 0.81 at
# 20,000 x 64, k = 128; 1.02 at 100,000 x 32, k = 64 (2.1e8 multiply-adds). Two workers
# stay faster from 2^18 rows on (10^6 x 16, k = 16: 0.86 of one thread's time) and for
# heavy products (100,000 x 128, k = 256: 0.91)
# That rule was measured where oneDNN multiplies (AVX-512). Where MKL does (an AVX2
# machine, float64), its own two threads scale poorly on the layer's short tiles ((64, 33) x
# (33, 8192): 85 GFLOP/s on two torch threads, 103 in two workers of one thread each; (256,
# 129) x (129, 2048): 67 against 159), and two workers pay from a quarter of the work: fit
# times against the calling thread, paired, on an AVX2 machine, 0.75 at 100,000 x 32, k =
# 64; 0.71 at 50,000 x 32, k = 64; 0.91 at 20,000 x 64, k = 128; but 1.16 at 20,000 x 32,
# k = 16 (1.1e7 multiply-adds), which stays in the calling thread
ROWS_PER_WORKER = 1 << 17
WORK_PER_WORKER = 1 << 27
MKL_WORK_PER_WORKER = 1 << 25


_shared = None, 0  # the process's worker threads (a pool) and how many
_shared_lock = threading.Lock()
_local = threading.local()  # ``worker``: set in the pool's threads


def _start_worker():
    torch.set_num_threads(1)
    _local.worker = True


def _worker_threads(n):
    """A pool of at least ``n`` worker threads, made once and kept for the next runners.

    Runners made their own threads and dropped them on exit, so each call paid for a new
    thread and for its first ops' set-up (what MKL and the allocator keep per thread).
    With the threads kept, repeated exact kNN searches (:func:`~sktransformer.attention.topk_keys`,
    64 dimensions, 32 neighbors; new against old, interleaved) took 0.82-0.87 of the time
    at 2,048 queries x 16,384 keys and 0.93 at 4,096 x 32,768 (standard errors 0.02), the
    same at 1,024 queries; k-means fits at 100,000 x 32, k = 64, 0.96 +- 0.03 (another
    pairing: 1.03 +- 0.04).

    Each thread sets its OpenMP team to one thread when it starts: OpenMP keeps the count
    per thread, and a new thread starts from the default (every core) until torch's first
    parallel op syncs it, so a worker whose first op was a oneDNN or MKL product ran it on
    a team of every core (two threads multiplying (64, 33) x (33, 4096) tiles: 0.96x one
    thread's throughput, 1.8x with this)."""
    global _shared
    with _shared_lock:
        pool, size = _shared
        if size < n:  # (threads are made as spans come: at most as many as run at once)
            size = max(n, os.cpu_count() or 1)
            pool = ThreadPoolExecutor(size, thread_name_prefix="sktransformer",
                                      initializer=_start_worker)
            _shared = pool, size  # (a runner holding the last pool still uses it)
        return pool


def _after_fork_in_child():
    """In a forked child: the parent's threads did not come along (nor may its lock be
    free), so the next runner makes new ones; and the OpenMP runtimes (torch's and the
    compiled loops') run on one thread: GNU OpenMP's team of the parent is gone, and its
    next parallel region in the child would wait for it forever, or abort the process (as
    scikit-learn's KMeans does there). A child that wants more threads sets them again
    (``torch.set_num_threads``)."""
    global _shared, _shared_lock
    _shared, _shared_lock = (None, 0), threading.Lock()
    torch.set_num_threads(1)
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.set_num_threads(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class ChunkRunner:
    """Run ``fn(start, stop)`` over ``n_workers`` contiguous spans of ``range(n)``.

    Use as a context manager: on entry with more than one worker it sets torch's intra-op
    threads to 1 and takes the process's worker threads (made on first use, kept for the
    next runners); on exit it restores the previous thread count.
    ``torch.set_num_threads`` is process-wide, so torch work in other threads of the program
    runs single-threaded meanwhile. A runner entered inside a worker's span runs its spans
    in that thread (the pool's threads may all be busy: waiting on them would deadlock).

    Parameters
    ----------
    n_workers : int
        Threads working, the calling thread one of them; 1 runs in the calling thread and
        changes nothing (GPU, tiny data).
    """

    def __init__(self, n_workers=1):
        self.n_workers = max(1, int(n_workers))
        self._pool = None
        self._saved_threads = None

    @classmethod
    def for_device(cls, device, n_samples, rows, *, work=None, onednn=True):
        """One worker per torch thread on the CPU when there are chunks enough to share.

        ``work``, the multiply-adds of one pass over the rows: then each worker needs
        ``ROWS_PER_WORKER`` rows or ``WORK_PER_WORKER`` multiply-adds
        (``MKL_WORK_PER_WORKER`` where the pass's products are MKL's, ``onednn=False``); a
        pass too small for two runs in the calling thread on torch's own threads, which
        measured faster.
        """
        if torch.device(device).type != "cpu":
            return cls(1)
        n_workers = min(torch.get_num_threads(), -(-n_samples // rows))
        if work is not None:
            per_worker = WORK_PER_WORKER if onednn else MKL_WORK_PER_WORKER
            n_workers = min(n_workers, max(1, n_samples // ROWS_PER_WORKER,
                                           work // per_worker))
        return cls(n_workers)

    def __enter__(self):
        if self.n_workers > 1 and not getattr(_local, "worker", False):
            self._saved_threads = torch.get_num_threads()
            torch.set_num_threads(1)  # (the calling thread is one of the workers)
            _local.saved_threads = self._saved_threads
            self._pool = _worker_threads(self.n_workers - 1)
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool = None
            _local.saved_threads = None
            torch.set_num_threads(self._saved_threads)
        return False

    def map(self, fn, n):
        """``[fn(start, stop) for each span]``, in span order; the one span ``(0, n)``
        with one worker, or for a runner entered in a worker's span."""
        if self._pool is None:
            return [fn(0, n)]
        # grad and inference modes are thread-local: carry the caller's into the workers
        inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()

        def run(lo, hi):
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                return fn(lo, hi)

        bounds = [n * i // self.n_workers for i in range(self.n_workers + 1)]
        spans = [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo] or [(0, n)]
        # the calling thread takes the last span itself (it would only wait): one thread
        # wake-up less per map
        futures = [self._pool.submit(run, lo, hi) for lo, hi in spans[:-1]]
        try:
            last = fn(*spans[-1])
        except BaseException:
            wait(futures)  # no work left running when the error leaves
            raise
        return [f.result() for f in futures] + [last]


def thread_budget():
    """The threads this thread's parallel work may use: torch's count (which follows
    ``OMP_NUM_THREADS``, ``torch.set_num_threads`` and threadpoolctl's OpenMP limits, as
    in a joblib worker), the process's own while a runner holds torch to one thread; 1 in
    a runner's worker."""
    if getattr(_local, "worker", False):
        return 1
    saved = getattr(_local, "saved_threads", None)
    return saved if saved else torch.get_num_threads()


# Below this many multiply-adds an op, torch's second intra-op thread costs more than it
# gives (particle-kernel fits on 2 cores, interleaved with scikit-learn's fits, whose BLAS
# threads then wait for the same cores: one thread took 0.63-0.91 of the time from 150 to
# 1,800 rows at 64 features; at 5,000 rows, 1.06)
SMALL_OP = 1 << 24


@contextlib.contextmanager
def single_threaded(small=True):
    """Torch's intra-op threads set to one inside the block when ``small`` (restored on
    exit). Each parallel op of a small problem is mostly its barrier, and between ops the
    waiting threads spin on cores that other thread pools (BLAS) want. Process-wide, as
    :class:`ChunkRunner`'s setting; nothing changes inside a runner's worker."""
    saved = torch.get_num_threads()
    if not small or saved == 1 or getattr(_local, "worker", False):
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)
