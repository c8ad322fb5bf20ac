"""Parallelism over chunks of rows, the way scikit-learn's k-means parallelizes.

A layer runs about ten short torch ops per chunk. With torch's own intra-op threads every op
is a parallel region with a barrier, and on a few cores the barriers cost more than the
work. Instead each worker thread takes a contiguous span of rows and runs its ops
single-threaded (torch releases the GIL inside ops), so the only synchronization is the
sum of the workers' partial results.
"""

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


class ChunkRunner:
    """Run ``fn(start, stop)`` over ``n_workers`` contiguous spans of ``range(n)``.

    Use as a context manager: on entry with more than one worker it sets torch's intra-op
    threads to 1 and starts the threads; on exit it restores the previous thread count.
    ``torch.set_num_threads`` is process-wide, so torch work in other threads of the program
    runs single-threaded meanwhile.

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
        if self.n_workers > 1:
            self._saved_threads = torch.get_num_threads()
            torch.set_num_threads(1)
            # (the calling thread is one of the workers)
            # each pool thread sets its own count too: OpenMP keeps it per thread, and a
            # new thread starts from the default (every core) until torch's first parallel
            # op syncs it, so a worker whose first op is a oneDNN or MKL product ran it on a
            # team of every core (two threads multiplying (64, 33) x (33, 4096) tiles: 0.96x
            # one thread's throughput, 1.8x with this)
            self._pool = ThreadPoolExecutor(self.n_workers - 1,
                                            thread_name_prefix="sktransformer",
                                            initializer=torch.set_num_threads, initargs=(1,))
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
            torch.set_num_threads(self._saved_threads)
        return False

    def map(self, fn, n):
        """``[fn(start, stop) for each span]``, in span order."""
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
