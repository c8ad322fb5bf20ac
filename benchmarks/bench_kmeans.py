"""Hard TransformerKMeans against scikit-learn's KMeans and faiss, same init, 20 iterations.

    python benchmarks/bench_kmeans.py                 # the three large configurations
    python benchmarks/bench_kmeans.py --configs 0 --repeats 5
    python benchmarks/bench_kmeans.py --configs --variants 0 3   # only the variants table
    python benchmarks/bench_kmeans.py --configs --variants --seeding 0 1 2   # k-means++

The third table (``--seeding``) times the default start: one layer from k-means++ seeding
(``init="k-means++", max_iter=1``, each fit its own seed), scikit-learn's
KMeans against hard TransformerKMeans, the seeding being most of it.

The second table times each clustering variant's layer against hard TransformerKMeans' on
the same data and init (``tol=0``; a layer's time is the difference of a 20-layer fit and
a 1-layer fit, over their difference in layers, so a fit's fixed costs are left out),
with faiss's spherical k-means as the peer of the spherical variant (scikit-learn-extra's
KMedoids does not import beside numpy 2, and materializes the n x n distance matrix in any
case).

With numba installed (the ``fast`` extra), sktransformer's large fits sum the members by a
compiled loop (``sktransformer.utils.index_add_rows``); loading it is a one-time cost of the
process, printed, and kept out of both tables as the imports are.

Times are taken in this one process, the libraries interleaved repeat by repeat, each
repeat in a new random order (seeded) with a pause before each fit, and the minimum over
repeats is reported (this machine's timings vary by tens of percent from one run to the
next), with the ratio of the minima and the median of the repeats' own ratios to
scikit-learn's time. The order and the pauses matter: each OpenMP runtime (scikit-learn's,
faiss's, torch's) keeps its threads spinning for a while after a parallel region, so in a
fixed order a fit always ran on a machine its predecessor had left in the same state, which
measurably favoured some (see docs/benchmarks.md). The script prints the share of the CPU
time the hypervisor took during each configuration's timings (``steal``): on a shared
virtual machine a run with much of it is noise. Peak memory is measured in fresh child
processes per library (5 by default; the median, and the maximum): the rise in peak RSS
during ``fit`` over the RSS once data and init exist. Data: uniform float32 in [0, 1)^d,
initial centers = k distinct random rows, the same for all libraries.

Fairness: faiss runs with ``max_points_per_centroid`` large enough not to subsample and
``early_stop_threshold=-1`` so that it does all iterations; scikit-learn runs with
``algorithm="lloyd", n_init=1, tol=0`` (it still stops on strict convergence: the table
says how many iterations each ran). Inertia is compared on the first two configurations;
the third leaves empty clusters, which each library relocates its own way.
"""

import argparse
import json
import random
import subprocess
import sys
import time

import numpy as np
from _common import Steal, blas_kernels, machine

CONFIGS = [(100_000, 32, 64), (1_000_000, 16, 16), (200_000, 128, 256)]
ITERS = 20
PAUSE_S = 0.3  # before each timed fit: the last fit's spinning threads go to sleep


def interleaved(fits, repeats, label, seed=0):
    """Time each ``fits[name]()`` ``repeats`` times, each repeat in a new random order with
    a pause before each fit, and print the hypervisor's share of the CPU time meanwhile
    after ``label``; returns ``({name: [seconds]}, {name: last result})``."""
    order, times, results = random.Random(seed), {name: [] for name in fits}, {}
    with Steal() as steal:
        for _ in range(repeats):
            names = list(fits)
            order.shuffle(names)
            for name in names:
                time.sleep(PAUSE_S)
                start = time.perf_counter()
                results[name] = fits[name]()
                times[name].append(time.perf_counter() - start)
    share = ("unknown" if steal.share is None else f"{100 * steal.share:.1f}%")
    print(f"{label}: {share} of the CPU time taken by the hypervisor (steal)", flush=True)
    return times, results


def make_data(n, d, k, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d), dtype=np.float32)
    init = X[rng.choice(n, k, replace=False)].copy()
    return X, init


def fit_sklearn(X, init):
    from sklearn.cluster import KMeans
    km = KMeans(len(init), init=init, n_init=1, max_iter=ITERS, tol=0, algorithm="lloyd").fit(X)
    return km.cluster_centers_, km.n_iter_


def fit_ours(X, init, **params):
    from sktransformer import TransformerKMeans
    km = TransformerKMeans(len(init), init=init, n_init=1, max_iter=ITERS, tol=0,
                           device=params.pop("device", "cpu"), **params).fit(X)
    return km.cluster_centers_, km.n_iter_


def fit_faiss(X, init):
    import faiss
    km = faiss.Kmeans(X.shape[1], len(init), niter=ITERS, max_points_per_centroid=10**9,
                      min_points_per_centroid=1, early_stop_threshold=-1, verbose=False)
    km.train(X, init_centroids=init)
    return km.centroids, ITERS


LIBRARIES = {"sklearn": fit_sklearn, "sktransformer": fit_ours, "faiss": fit_faiss}

VARIANT_CONFIGS = CONFIGS + [(20_000, 32, 16)]


def _variant(cls_name, **params):
    def fit(X, init, max_iter=ITERS):
        import sktransformer
        est = getattr(sktransformer, cls_name)(len(init), init=init, n_init=1,
                                               max_iter=max_iter, device="cpu", **params)
        if "tol" in est.get_params():
            est.set_params(tol=0)
        return est.fit(X).n_iter_
    return fit


def fit_faiss_spherical(X, init, max_iter=ITERS):
    import faiss
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    km = faiss.Kmeans(X.shape[1], len(init), niter=max_iter, max_points_per_centroid=10**9,
                      min_points_per_centroid=1, early_stop_threshold=-1, spherical=True,
                      verbose=False)
    km.train(Xn, init_centroids=init / np.linalg.norm(init, axis=1, keepdims=True))
    return max_iter


VARIANTS = {
    "TransformerKMeans (hard)": _variant("TransformerKMeans"),
    "TransformerKMeans soft t=0.1": _variant("TransformerKMeans", temperature=0.1),
    "SphericalTransformerKMeans": _variant("SphericalTransformerKMeans"),
    "faiss spherical": fit_faiss_spherical,
    "TrimmedTransformerKMeans global": _variant("TrimmedTransformerKMeans"),
    "TrimmedTransformerKMeans per_cluster": _variant("TrimmedTransformerKMeans",
                                                     trimming="per_cluster"),
    "RobustTransformerKMeans": _variant("RobustTransformerKMeans"),
    "TransformerKMedoids sqeuclidean": _variant("TransformerKMedoids", metric="sqeuclidean"),
    "TransformerKMedoids euclidean": _variant("TransformerKMedoids"),
}
# the Euclidean medoid cost is O(n^2 d / k) per layer: only on the small configuration
QUADRATIC = {"TransformerKMedoids euclidean"}


def run_seeding(configs, repeats):
    """k-means++ seeding and one layer, scikit-learn against sktransformer (the seeds
    differ between the libraries' generators, the work does not)."""
    from sklearn.cluster import KMeans

    from sktransformer import TransformerKMeans
    rows = []
    for config in configs:
        n, d, k = CONFIGS[config]
        X, _ = make_data(n, d, k)
        seed = iter(range(10**6))
        fits = {
            "sklearn": lambda: KMeans(k, n_init=1, max_iter=1, random_state=next(seed)).fit(X),
            "sktransformer": lambda: TransformerKMeans(k, n_init=1, max_iter=1, device="cpu",
                                                       random_state=next(seed)).fit(X),
        }
        for fit in fits.values():
            fit()  # warm up (and load numba's loops)
        times, _ = interleaved(fits, repeats, f"k-means++ n={n} d={d} k={k}")
        for lib in fits:
            rows.append({"config": f"n={n} d={d} k={k}", "library": lib,
                         "time_s": min(times[lib]),
                         "median_s": float(np.median(times[lib])),
                         **paired(np.array(times[lib]) / np.array(times["sklearn"]))})
    print_table(rows, ["config", "library", "time_s", "median_s", "paired_ratio_median",
                       "paired_ratio_mean", "paired_ratio_se"])
    return rows


def paired(ratios):
    """The per-repeat ratios (each of two fits run close together) summed up: their
    median, what a slow phase of the machine moves least, and their mean with its
    standard error, the spread a claim against a bar must allow for."""
    ratios = np.asarray(ratios, dtype=float)
    se = ratios.std(ddof=1) / np.sqrt(len(ratios)) if len(ratios) > 1 else float("nan")
    return {"paired_ratio_median": float(np.median(ratios)),
            "paired_ratio_mean": float(ratios.mean()), "paired_ratio_se": float(se)}


def run_variants(configs, repeats):
    """Each variant's time per layer against the hard layer's: the difference of a fit of
    ``ITERS`` layers and one of a single layer, over the difference of their layers, so
    that a fit's fixed costs (validation, the tokens, the final labels) do not count (a
    k-medoids fit that stops after 2 layers would carry them on 2 layers, where the hard
    fit spreads them over 20). Both fits are in the interleaved repeats."""
    rows = []
    for config in configs:
        n, d, k = VARIANT_CONFIGS[config]
        X, init = make_data(n, d, k)
        names = [v for v in VARIANTS if v not in QUADRATIC or n <= 50_000]
        if not available("faiss"):
            names.remove("faiss spherical")
        warm_up("sktransformer", X, init)
        for name in names:
            VARIANTS[name](X[:2000], init)  # warm up
        fits = {}
        for name in names:
            fits[name] = lambda name=name: VARIANTS[name](X, init)
            fits[name, 1] = lambda name=name: VARIANTS[name](X, init, max_iter=1)
        times, layers = interleaved(fits, repeats, f"n={n} d={d} k={k}")

        def per_layer(name):  # (per repeat, best): seconds a layer; None for one layer
            extra = layers[name] - layers[name, 1]
            if extra <= 0:
                return None, None
            each = (np.array(times[name]) - np.array(times[name, 1])) / extra
            return each, (min(times[name]) - min(times[name, 1])) / extra

        hard_each, hard = per_layer("TransformerKMeans (hard)")
        for name in names:
            each, best = per_layer(name)
            row = {"config": f"n={n} d={d} k={k}", "variant": name,
                   "time_s": min(times[name]), "layers": int(layers[name]),
                   "fixed_s": min(times[name, 1]) - (best or 0.0)}
            if best is not None:
                row.update(ms_per_layer=1e3 * best, per_layer_ratio_vs_hard=best / hard,
                           **paired(each / hard_each))
            rows.append(row)
    print_table(rows, ["config", "variant", "time_s", "layers", "fixed_s", "ms_per_layer",
                       "per_layer_ratio_vs_hard", "paired_ratio_median", "paired_ratio_mean",
                       "paired_ratio_se"])
    return rows


def print_table(rows, header):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        cells = [r.get(h, "") for h in header]
        cells = [f"{c:.3f}" if isinstance(c, float) else str(c) for c in cells]
        print("| " + " | ".join(cells) + " |")


def inertia(X, centers):
    """Sum of squared distances to the closest center, in float64, by chunks."""
    total = 0.0
    c = centers.astype(np.float64)
    c_sq = (c * c).sum(1)
    for s in range(0, len(X), 50_000):
        x = X[s:s + 50_000].astype(np.float64)
        d = (x * x).sum(1)[:, None] - 2 * x @ c.T + c_sq
        total += d.min(1).clip(0).sum()
    return total


def _status_mb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(field)


def warm_up(lib, X, init):
    """A process's one-time costs, kept out of the timings and of the fit's memory: the
    imports, the first products' kernels, and for sktransformer with numba installed its
    compiled sums, which a large fit loads on first use (the script prints that cost)."""
    LIBRARIES[lib](X[:2000], init)
    if lib == "sktransformer":
        from sktransformer.cluster._compiled import compiled_available

        start, rss = time.perf_counter(), _status_mb("VmRSS")
        if compiled_available() and not getattr(warm_up, "said", False):
            warm_up.said = True
            print(f"numba's compiled sums (large fits; once per process, in no table): "
                  f"{time.perf_counter() - start:.2f} s, {_status_mb('VmRSS') - rss:.0f} MB",
                  flush=True)


def memory_child(lib, config):
    X, init = make_data(*CONFIGS[config])
    warm_up(lib, X, init)  # import and warm up outside the measurement
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current RSS
    base = _status_mb("VmRSS")
    LIBRARIES[lib](X, init)
    print(json.dumps({"extra_peak_mb": _status_mb("VmHWM") - base, "data_mb": X.nbytes / 2**20}))


def measure_memory(lib, config, repeats):
    """The fit's extra peak RSS in ``repeats`` fresh processes: the median, the minimum and
    the maximum. One process is not enough: sktransformer's peak on the first configuration
    moved between 8 and 16 MB from process to process, by glibc's dynamic mmap and trim
    thresholds (the score tiles oneDNN returns per chunk reuse freed heap memory or not); with
    ``MALLOC_TRIM_THRESHOLD_`` set, which fixes them, it was 7.5 MB in every process."""
    peaks = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, __file__, "--memory-child", lib, str(config)],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        peaks.append(row["extra_peak_mb"])
    return {"extra_peak_mb": float(np.median(peaks)), "extra_peak_mb_min": min(peaks),
            "extra_peak_mb_max": max(peaks), "data_mb": row["data_mb"]}


def available(lib):
    try:
        __import__({"sklearn": "sklearn", "sktransformer": "sktransformer", "faiss": "faiss"}[lib])
        return True
    except ImportError:
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--variants", type=int, nargs="*", default=[0, 3],
                        help="configurations of the variants table (3 = 20000 x 32, k=16)")
    parser.add_argument("--seeding", type=int, nargs="*", default=[],
                        help="configurations of the k-means++ table (one layer from it)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--memory-repeats", type=int, default=5,
                        help="fresh processes per library for the peak memory (median)")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child[0], int(args.memory_child[1]))
        return
    import torch
    from threadpoolctl import threadpool_info
    libs = [lib for lib in LIBRARIES if available(lib)]
    print(f"threads: torch {torch.get_num_threads()}, BLAS/OpenMP "
          f"{sorted({(i['internal_api'], i['num_threads']) for i in threadpool_info()})}; "
          f"BLAS kernels {blas_kernels()}; torch's CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()} (oneDNN's products need AVX512)")
    results = []
    for config in args.configs:
        n, d, k = CONFIGS[config]
        X, init = make_data(n, d, k)
        for lib in libs:
            warm_up(lib, X, init)
        times, fitted = interleaved(
            {lib: (lambda lib=lib: LIBRARIES[lib](X, init)) for lib in libs}, args.repeats,
            f"n={n} d={d} k={k}")
        for lib in libs:
            row = {"config": f"n={n} d={d} k={k}", "library": lib,
                   "time_s": min(times[lib]), "median_s": float(np.median(times[lib])),
                   "n_iter": int(fitted[lib][1]),
                   "inertia": inertia(X, np.asarray(fitted[lib][0]))}
            row["time_ratio_vs_sklearn"] = row["time_s"] / min(times["sklearn"])
            row.update(paired(np.array(times[lib]) / np.array(times["sklearn"])))
            if not args.no_memory:
                row.update(measure_memory(lib, config, args.memory_repeats))
            results.append(row)
        name = f"n={n} d={d} k={k}"
        ref = next(r for r in results if r["config"] == name and r["library"] == "sklearn")
        for r in results:
            if r["config"] == ref["config"]:
                r["inertia_ratio_vs_sklearn"] = r["inertia"] / ref["inertia"]
                if "extra_peak_mb" in r:
                    r["memory_ratio_vs_sklearn"] = (
                        r["extra_peak_mb"] / max(ref["extra_peak_mb"], 1e-9))
    header = ["config", "library", "time_s", "median_s", "time_ratio_vs_sklearn",
              "paired_ratio_median", "paired_ratio_mean", "paired_ratio_se", "n_iter",
              "inertia_ratio_vs_sklearn", "extra_peak_mb", "extra_peak_mb_max",
              "memory_ratio_vs_sklearn"]
    if results:
        print_table(results, header)
    variants = run_variants(args.variants, args.repeats) if args.variants else []
    seeding = run_seeding(args.seeding, args.repeats) if args.seeding else []
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "libraries": results, "variants": variants,
                       "seeding": seeding}, f, indent=1)


if __name__ == "__main__":
    main()
