"""Full Lloyd on a Dask cluster: against dask-ml's KMeans, and on data larger than the workers.

    python benchmarks/bench_dask.py --study peers [--seeds 0 1 2] [--json F]
    python benchmarks/bench_dask.py --study memory [--gigabytes 4] [--json F]

Both run on a LocalCluster of 2 worker processes with one thread each, on 127.0.0.1.

``peers``: a mixture of 16 Gaussians in 16 dimensions, 2,000,000 rows (256 MB) persisted on
the workers; ``TransformerKMeans`` and dask-ml's ``KMeans`` with their defaults (both
k-means|| initialization, tol 1e-4), interleaved per seed. Wall time, inertia and layers;
the ratios and their paired standard errors over seeds. The inertia of both is recomputed
here from the fitted centers, by scikit-learn on each block: dask-ml's own ``inertia_``
was once 4 times below the noise floor of this data.

``memory``: the same mixture, generated lazily block by block on the workers (never stored),
``--gigabytes`` of float64 against a ``memory_limit`` of 1 GB per worker. The fit reads the
data once per pass; the client process's peak resident memory (sampled every 50 ms, with
the in-process scheduler) is reported next to the data's size.
"""

import argparse
import json
import threading
import time

import numpy as np
import psutil
from _common import blas_kernels

from sktransformer import TransformerKMeans

K, D = 16, 16
ROWS_PER_BLOCK = 250_000


def mixture(n, seed=0):
    """A lazy (n, D) float64 mixture of K unit Gaussians whose centers are 6 apart on average."""
    import dask.array as da

    centers = np.random.default_rng(seed).normal(scale=3.0, size=(K, D))
    n_blocks = -(-n // ROWS_PER_BLOCK)
    sizes = tuple(min(ROWS_PER_BLOCK, n - i * ROWS_PER_BLOCK) for i in range(n_blocks))

    def block(block_id=None):
        rng = np.random.default_rng([seed, block_id[0]])
        m = sizes[block_id[0]]
        return centers[rng.integers(0, K, m)] + rng.standard_normal((m, D))

    return da.map_blocks(block, chunks=(sizes, (D,)), dtype=np.float64,
                         meta=np.empty((0, D)))


def cluster(**worker):
    from distributed import Client, LocalCluster

    local = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address=None, **worker)
    return local, Client(local)


class PeakMemory:
    """The peak resident memory of this process while the block runs, by sampling."""

    def __enter__(self):
        self.process, self.peak, self.running = psutil.Process(), 0, True
        self.start = self.process.memory_info().rss

        def sample():
            while self.running:
                self.peak = max(self.peak, self.process.memory_info().rss)
                time.sleep(0.05)

        self.thread = threading.Thread(target=sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def inertia(X, centers):
    """The k-means objective of ``centers`` on X, by scikit-learn's distances per block."""
    from sklearn.metrics.pairwise import euclidean_distances

    def block(b):
        return euclidean_distances(b, centers, squared=True).min(1)

    return float(X.map_blocks(block, drop_axis=1, dtype=np.float64).sum().compute())


def peers(seeds):
    from dask_ml.cluster import KMeans as DaskMLKMeans

    local, client = cluster()
    with local, client:
        X = mixture(2_000_000).persist()
        rows = []
        for seed in seeds:
            row = {"seed": seed}
            for name, make in (("ours", lambda: TransformerKMeans(K, random_state=seed)),
                               ("dask_ml", lambda: DaskMLKMeans(K, random_state=seed))):
                start = time.perf_counter()
                model = make().fit(X)
                row[f"{name}_s"] = time.perf_counter() - start
                row[f"{name}_inertia"] = inertia(X, np.asarray(model.cluster_centers_))
                row[f"{name}_reported_inertia"] = float(model.inertia_)
                row[f"{name}_n_iter"] = int(model.n_iter_)
            rows.append(row)
            print(f"seed {seed}: ours {row['ours_s']:.1f} s ({row['ours_n_iter']} layers, "
                  f"inertia {row['ours_inertia']:.6g}); dask-ml {row['dask_ml_s']:.1f} s "
                  f"({row['dask_ml_n_iter']} iterations, inertia {row['dask_ml_inertia']:.6g})",
                  flush=True)
    time_ratio = np.array([r["ours_s"] / r["dask_ml_s"] for r in rows])
    inertia_ratio = np.array([r["ours_inertia"] / r["dask_ml_inertia"] for r in rows])

    def se(x):
        return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")

    summary = {"time_ratio": float(time_ratio.mean()), "time_ratio_se": se(time_ratio),
               "inertia_ratio": float(inertia_ratio.mean()),
               "inertia_ratio_se": se(inertia_ratio)}
    print(f"ours / dask-ml: time {summary['time_ratio']:.2f} +- {summary['time_ratio_se']:.2f}"
          f", inertia {summary['inertia_ratio']:.4f} +- {summary['inertia_ratio_se']:.4f}")
    return {"rows": rows, "summary": summary}


def memory(gigabytes, max_iter):
    n = int(gigabytes * 1e9 / (8 * D))
    local, client = cluster(memory_limit="1GB")
    with local, client:
        X = mixture(n)
        with PeakMemory() as mem:
            start = time.perf_counter()
            model = TransformerKMeans(K, random_state=0, max_iter=max_iter, verbose=0).fit(X)
            seconds = time.perf_counter() - start
        counts = np.bincount(model.labels_.compute(), minlength=K)
    row = {"n": n, "gigabytes": n * D * 8 / 1e9, "worker_memory_limit_gb": 1.0,
           "seconds": seconds, "n_iter": int(model.n_iter_), "inertia_per_row":
           model.inertia_ / n, "client_rss_start_mb": mem.start / 2 ** 20,
           "client_rss_peak_mb": mem.peak / 2 ** 20, "smallest_cluster": int(counts.min())}
    print(f"{row['gigabytes']:.1f} GB ({n} rows) on 2 workers of 1 GB: {seconds:.0f} s, "
          f"{row['n_iter']} layers, inertia per row {row['inertia_per_row']:.3f} (noise "
          f"alone: {D}); client RSS {row['client_rss_start_mb']:.0f} MB at the start, "
          f"peak {row['client_rss_peak_mb']:.0f} MB", flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=["peers", "memory"], default="peers")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--gigabytes", type=float, default=4.0)
    parser.add_argument("--max-iter", type=int, default=10)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(f"BLAS in this process: {blas_kernels()}")
    result = peers(args.seeds) if args.study == "peers" else memory(args.gigabytes,
                                                                       args.max_iter)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
