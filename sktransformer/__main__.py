"""``python -m sktransformer``: the demo. Clusters data that ships with scikit-learn.

Prints, for each data set, TransformerKMeans (hard, dot-product form, soft) and the
variants (spherical, trimmed, robust, k-medoids) against scikit-learn's KMeans, all from the
same k-means++ initial centers: each method's own objective (``inertia_``: squared distances
for the k-means family, of the kept points for trimmed k-means, on the sphere for spherical
k-means, plain distances for k-medoids), layers, fit time, and agreement of the labels with
KMeans and with the true classes (adjusted Rand index; trimmed points count as one more
cluster, -1).
"""

import argparse
import time

import numpy as np
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.datasets import load_digits, load_iris, load_wine
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from . import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)

DATASETS = {"digits": load_digits, "iris": load_iris, "wine": load_wine}


def _timed_fit(estimator, X):
    start = time.perf_counter()
    estimator.fit(X)
    return estimator, time.perf_counter() - start


def run(names=("digits", "iris", "wine"), device="auto", random_state=0):
    """Fit every method on every data set; return the table rows as dicts."""
    rows = []
    for name in names:
        data = DATASETS[name]()
        X = StandardScaler().fit_transform(data.data)
        k = len(np.unique(data.target))
        init, _ = kmeans_plusplus(X, k, random_state=random_state)
        common = dict(init=init, n_init=1, max_iter=300, tol=1e-4)
        reference, ref_time = _timed_fit(KMeans(k, algorithm="lloyd", **common), X)
        methods = [("sklearn KMeans", reference, ref_time)]
        for label, cls, params in [
            ("TransformerKMeans", TransformerKMeans, {}),
            ("TransformerKMeans dot", TransformerKMeans, {"attention": "dot"}),
            ("TransformerKMeans soft t=1", TransformerKMeans, {"temperature": 1.0}),
            ("Spherical", SphericalTransformerKMeans, {}),
            ("Trimmed trim=0.05", TrimmedTransformerKMeans, {"trim": 0.05}),
            ("Robust beta=0.01", RobustTransformerKMeans, {}),
            ("KMedoids", TransformerKMedoids, {}),
        ]:
            params = {**common, **params}
            if cls is TransformerKMedoids:
                del params["tol"]
            est = cls(k, device=device, **params)
            methods.append((label, *_timed_fit(est, X)))
        for label, est, seconds in methods:
            rows.append({
                "data": f"{name} ({X.shape[0]}x{X.shape[1]}, k={k})",
                "method": label,
                "inertia": est.inertia_,
                "iterations": est.n_iter_,
                "time_ms": 1e3 * seconds,
                "ari_vs_kmeans": adjusted_rand_score(reference.labels_, est.labels_),
                "ari_vs_truth": adjusted_rand_score(data.target, est.labels_),
            })
    return rows


def format_table(rows):
    header = f"{'data':<24} {'method':<28} {'objective':>11} {'iter':>5} {'time ms':>8} " \
             f"{'ARI vs KMeans':>14} {'ARI vs truth':>13}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['data']:<24} {r['method']:<28} {r['inertia']:>11.2f} {r['iterations']:>5d} "
            f"{r['time_ms']:>8.1f} {r['ari_vs_kmeans']:>14.4f} {r['ari_vs_truth']:>13.4f}"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sktransformer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="+", choices=sorted(DATASETS),
                        default=["digits", "iris", "wine"])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--random-state", type=int, default=0)
    args = parser.parse_args(argv)
    print(format_table(run(args.data, device=args.device, random_state=args.random_state)))


if __name__ == "__main__":
    main()
