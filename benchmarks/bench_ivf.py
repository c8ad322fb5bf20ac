"""IVFIndex: recall and time against the fraction of cells scanned, on four kinds of keys.

    python benchmarks/bench_ivf.py [--n 65536] [--queries 2048] [--json F]
    python benchmarks/bench_ivf.py --exact 65536 262144 [--repeats 7]

Keys and queries of d = 64 from one distribution (queries drawn apart from the keys):
``gaussian`` (isotropic), ``clustered`` (256 tight Gaussian clusters of random scales),
``low-rank`` (rank 8 plus small noise), and ``embeddings``: real data, the Rotten Tomatoes
reviews' TF-IDF vectors reduced to 64 dimensions by a truncated SVD (12,808 rows: 10,760
keys, 2,048 queries). The top 32 keys by inner product; recall is the share of the exact
top 32 found. For each kind: the build (``sqrt(n)`` cells, k-means on a 16,384-key
subsample), the search at ``n_probe`` fractions, and in the same run the exact search of
``topk_keys`` and of ``faiss.knn`` (inner product), with the BLAS kernel printed.

``--exact``: only the exact searches on Gaussian keys of the given sizes, ``topk_keys``
and ``faiss.knn`` interleaved ``--repeats`` times; prints the median of the paired time
ratios and their range.
"""

import argparse
import contextlib
import json
import time

import faiss
import numpy as np
import torch
from _common import blas_kernels

from sktransformer.attention import IVFIndex, topk_keys
from sktransformer.utils import _topk, topk_available

K, D = 32, 64
FRACTIONS = [0.01, 0.02, 0.05, 0.1, 0.2]


def keys_and_queries(kind, n, n_queries, seed=0):
    rng = np.random.default_rng(seed)
    total = n + n_queries
    if kind == "gaussian":
        X = rng.standard_normal((total, D))
    elif kind == "clustered":
        centers = rng.standard_normal((256, D)) * 3
        scale = rng.uniform(0.1, 1.0, 256)
        label = rng.integers(0, 256, total)
        X = centers[label] + rng.standard_normal((total, D)) * scale[label, None]
    elif kind == "low-rank":
        X = rng.standard_normal((total, 8)) @ rng.standard_normal((8, D)) \
            + 0.1 * rng.standard_normal((total, D))
    else:  # real embeddings
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        from sktransformer.datasets import load_rotten_tomatoes

        text, _ = load_rotten_tomatoes(return_X_y=True)
        X = TruncatedSVD(D, random_state=0).fit_transform(TfidfVectorizer().fit_transform(text))
        X = X[rng.permutation(len(X))]
        n = len(X) - n_queries
    X = torch.as_tensor(X, dtype=torch.float32)
    return X[n_queries:n_queries + n], X[:n_queries]


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def recall(found, exact):
    return float((found.unsqueeze(-1) == exact.unsqueeze(-2)).any(-1).float().mean())


def exact_study(sizes, n_queries, repeats):
    """Paired time ratios topk_keys / faiss.knn, interleaved in one process; with numba
    installed, topk_keys also without its compiled merge (the group filter), in turn."""
    rows = []
    for n in sizes:
        keys, queries = keys_and_queries("gaussian", n, n_queries)
        ratios, filter_ratios, times = [], [], []
        for _ in range(repeats):
            (_, ours), t_ours = timed(lambda: topk_keys(queries, keys, K))
            (_, theirs), t_faiss = timed(lambda: faiss.knn(
                queries.numpy(), keys.numpy(), K, metric=faiss.METRIC_INNER_PRODUCT))
            t_filter = None
            if topk_available():
                with compiled_merge(False):
                    (_, filtered), t_filter = timed(lambda: topk_keys(queries, keys, K))
                assert recall(filtered, ours) > 0.999
                filter_ratios.append(t_filter / t_faiss)
            ratios.append(t_ours / t_faiss)
            times.append((t_ours, t_faiss, t_filter))
        assert recall(torch.from_numpy(theirs), ours) > 0.999
        med = float(np.median(ratios))
        print(f"n = {n}: topk_keys / faiss.knn median {med:.2f} (range {min(ratios):.2f}-"
              f"{max(ratios):.2f}); median times {np.median([t[0] for t in times]):.3f} / "
              f"{np.median([t[1] for t in times]):.3f} s", flush=True)
        if filter_ratios:
            print(f"  without the compiled merge (the group filter): median "
                  f"{np.median(filter_ratios):.2f} (range {min(filter_ratios):.2f}-"
                  f"{max(filter_ratios):.2f}), {np.median([t[2] for t in times]):.3f} s",
                  flush=True)
        rows.append({"n_keys": n, "n_queries": n_queries, "ratios": ratios,
                     "filter_ratios": filter_ratios, "times": times})
    return rows


@contextlib.contextmanager
def compiled_merge(enabled):
    """topk_keys with numba's running top-k on or off (its tests' switch)."""
    saved, _topk._ENABLED = _topk._ENABLED, enabled
    try:
        yield
    finally:
        _topk._ENABLED = saved


def warm_up():
    """A process's one-time costs, kept out of the timings: torch's set-up on the first
    call, and numba's compiled merge, which a large search loads on first use (printed)."""
    warm_k, warm_q = keys_and_queries("gaussian", 4096, 256)
    topk_keys(warm_q, warm_k, K)
    start = time.perf_counter()
    if topk_available():
        print(f"numba's compiled merge (large searches; once per process, in no table): "
              f"{time.perf_counter() - start:.2f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=65536)
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--exact", type=int, nargs="+")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(f"BLAS: {blas_kernels()}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    warm_up()
    rows = exact_study(args.exact, args.queries, args.repeats) if args.exact else recall_study(
        args.n, args.queries)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def recall_study(n, n_queries):
    """Recall and search time at each fraction of cells, on the four kinds of keys."""
    rows = []
    for kind in ("gaussian", "clustered", "low-rank", "embeddings"):
        keys, queries = keys_and_queries(kind, n, n_queries)
        (_, exact), t_exact = timed(lambda: topk_keys(queries, keys, K))
        (_, faiss_idx), t_faiss = timed(lambda: faiss.knn(
            queries.numpy(), keys.numpy(), K, metric=faiss.METRIC_INNER_PRODUCT))
        assert recall(torch.from_numpy(faiss_idx), exact) > 0.99
        index = IVFIndex(n_probe=FRACTIONS[0])
        _, t_build = timed(lambda: index.search(queries[:1], keys, K))
        n_lists = index._built["indexes"][0].nlist
        print(f"{kind} ({len(keys)} keys): exact topk_keys {t_exact:.3f} s, faiss.knn "
              f"{t_faiss:.3f} s; IVF build {t_build:.2f} s ({n_lists} cells)", flush=True)
        for fraction in FRACTIONS:
            index.n_probe = fraction
            found, t_search = timed(lambda: index.search(queries, keys, K))
            row = {"kind": kind, "n_keys": len(keys), "n_lists": n_lists,
                   "n_probe": fraction, "recall": recall(found, exact),
                   "search_s": t_search, "build_s": t_build, "exact_topk_s": t_exact,
                   "faiss_knn_s": t_faiss}
            rows.append(row)
            print(f"  n_probe {fraction:.2f}: recall {row['recall']:.3f}, search "
                  f"{t_search:.3f} s ({t_search / t_exact:.2f} of the exact topk_keys)",
                  flush=True)
    return rows


if __name__ == "__main__":
    main()
