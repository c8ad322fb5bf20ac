"""Streaming k-means: TransformerKMeans.partial_fit against MiniBatchKMeans.partial_fit.

    python benchmarks/bench_partial_fit.py [--repeats 3] [--json results.json]

One pass over a stream of uniform float32 data in batches, from the same initial centers
(k distinct random rows), with scikit-learn's random reassignment off
(``reassignment_ratio=0``) so that both run the same update. Time of the whole pass (the
minimum over interleaved repeats, in this one process), the largest difference between the
two sets of final centers, and the ratio of the final inertias on all the data.
"""

import argparse
import json
import time

import numpy as np
from sklearn.cluster import MiniBatchKMeans

from sktransformer import TransformerKMeans

CONFIGS = [(1_000_000, 16, 16, 10_000), (200_000, 64, 64, 4_096)]


def stream(model, X, batch):
    for a in range(0, len(X), batch):
        model.partial_fit(X[a:a + batch])
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for n, d, k, batch in CONFIGS:
        rng = np.random.default_rng(0)
        X = rng.random((n, d), dtype=np.float32)
        init = X[rng.choice(n, k, replace=False)].copy()
        times = {"ours": [], "sklearn": []}
        for _ in range(args.repeats):
            start = time.perf_counter()
            ours = stream(TransformerKMeans(k, init=init, device="cpu"), X, batch)
            times["ours"].append(time.perf_counter() - start)
            start = time.perf_counter()
            theirs = stream(MiniBatchKMeans(k, init=init, n_init=1, reassignment_ratio=0.0),
                            X, batch)
            times["sklearn"].append(time.perf_counter() - start)
        row = {"n": n, "d": d, "k": k, "batch": batch,
               "ours_s": min(times["ours"]), "sklearn_s": min(times["sklearn"]),
               "max_center_diff": float(np.abs(ours.cluster_centers_
                                               - theirs.cluster_centers_).max()),
               "inertia_ratio": ours.score(X) / theirs.score(X)}
        row["time_ratio"] = row["ours_s"] / row["sklearn_s"]
        rows.append(row)
        print(f"n={n} d={d} k={k} batch={batch}: ours {row['ours_s']:.3f} s, sklearn "
              f"{row['sklearn_s']:.3f} s, ratio {row['time_ratio']:.2f}; centers differ by "
              f"{row['max_center_diff']:.2e}, inertia ratio {row['inertia_ratio']:.6f}",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
