"""Selecting k: GridSearchCV with the default score against the usual criteria.

On Gaussian-mixture tasks with a known number of clusters (k 2-9, d 2-30, n 400-2,000,
unequal sizes and spreads, centers a few noise standard deviations apart), each method picks
k from 2..12:

* ``GridSearchCV(TransformerKMeans(random_state=0), {"n_clusters": range(2, 13)}, cv=3)``
  with the default score (the held-out mixture log-likelihood), and with ``temperature``
  added to the grid;
* ``GaussianMixture(covariance_type="spherical")`` with the lowest BIC;
* scikit-learn's ``KMeans`` with the highest silhouette;
* the gap statistic (Tibshirani et al., 2001; 10 uniform reference sets in the data's box,
  the smallest k with ``gap(k) >= gap(k + 1) - s(k + 1)``).

The tasks of ``--seeds`` (default: 1000 onwards) were never used to choose anything in the
score; the choices were made on seeds 0-23 (``--first-seed 0 --tasks 24``). Then the same
on real labeled sets, with the class count as "true k". Writes
``benchmarks/results/model_selection.json``.

    python benchmarks/bench_model_selection.py --tasks 50
"""

import argparse
import json
import os
import time
import warnings

import numpy as np
from _common import machine
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler

from sktransformer import TransformerKMeans

K_GRID = list(range(2, 13))
RESULTS = os.path.join(os.path.dirname(__file__), "results", "model_selection.json")


def make_task(seed):
    """One Gaussian-mixture task: (X, true k, its description)."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 10))
    d = int(rng.integers(2, 31))
    n = int(rng.integers(400, 2001))
    sizes = rng.dirichlet(np.full(k, 3.0))  # unequal sizes, none tiny
    sizes = np.maximum((sizes * n).astype(int), max(10, n // (5 * k)))
    spreads = rng.uniform(0.5, 1.5, size=k)  # unequal noise standard deviations
    separation = rng.uniform(4.0, 6.0)  # in noise standard deviations (the larger of the pair)
    centers = []
    scale = 1.0
    while len(centers) < k:
        candidate = rng.normal(scale=scale, size=d)
        j = len(centers)
        if all(np.linalg.norm(candidate - c) >= separation * max(spreads[i], spreads[j])
               for i, c in enumerate(centers)):
            centers.append(candidate)
        else:
            scale *= 1.02
    X = np.concatenate([c + s * rng.standard_normal((m, d))
                        for c, s, m in zip(centers, spreads, sizes)])
    rng.shuffle(X)
    return X, k, {"k": k, "d": d, "n": int(len(X)), "separation": round(float(separation), 2)}


def pick_grid_search(X, temperatures=False):
    grid = {"n_clusters": K_GRID}
    if temperatures:  # a user's grid: fractions of the mean feature variance
        v = float(X.var(0).mean())
        grid["temperature"] = [None, 0.03 * v, 0.1 * v, 0.3 * v]
    search = GridSearchCV(TransformerKMeans(random_state=0), grid, cv=3).fit(X)
    return search.best_params_["n_clusters"]


def pick_bic(X):
    bics = [GaussianMixture(k, covariance_type="spherical", random_state=0).fit(X).bic(X)
            for k in K_GRID]
    return K_GRID[int(np.argmin(bics))]


def pick_silhouette(X):
    scores = [silhouette_score(X, KMeans(k, random_state=0).fit_predict(X)) for k in K_GRID]
    return K_GRID[int(np.argmax(scores))]


def pick_gap(X, n_refs=10, seed=0):
    rng = np.random.default_rng(seed)
    low, high = X.min(0), X.max(0)
    grid = K_GRID + [K_GRID[-1] + 1]
    gaps, sks = [], []
    refs = [rng.uniform(low, high, size=X.shape) for _ in range(n_refs)]
    for k in grid:
        log_w = np.log(KMeans(k, random_state=0).fit(X).inertia_)
        ref = np.log([KMeans(k, random_state=0).fit(R).inertia_ for R in refs])
        gaps.append(ref.mean() - log_w)
        sks.append(ref.std() * np.sqrt(1 + 1 / n_refs))
    for i, k in enumerate(K_GRID):
        if gaps[i] >= gaps[i + 1] - sks[i + 1]:
            return k
    return K_GRID[-1]


METHODS = {
    "grid_search_score": pick_grid_search,
    "grid_search_score_temperature": lambda X: pick_grid_search(X, temperatures=True),
    "gmm_spherical_bic": pick_bic,
    "silhouette": pick_silhouette,
    "gap_statistic": pick_gap,
}


def real_sets():
    from sklearn import datasets

    out = {}
    for name in ("iris", "wine", "digits", "breast_cancer"):
        data = getattr(datasets, f"load_{name}")()
        out[name] = data.data, len(np.unique(data.target))
    try:
        from palmerpenguins import load_penguins

        df = load_penguins().dropna()
        cols = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
        out["penguins"] = df[cols].to_numpy(float), df["species"].nunique()
    except ImportError:
        pass
    return {name: (StandardScaler().fit_transform(X), k) for name, (X, k) in out.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--no-real", action="store_true")
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args()
    methods = args.methods.split(",")
    warnings.filterwarnings("ignore")
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.tasks):
        X, k, info = make_task(seed)
        row = {"seed": seed, **info, "picked": {}, "seconds": {}}
        for name in methods:
            start = time.perf_counter()
            row["picked"][name] = int(METHODS[name](X))
            row["seconds"][name] = round(time.perf_counter() - start, 3)
        rows.append(row)
        print(seed, info, row["picked"], flush=True)
    summary = {}
    for name in methods:
        hits = np.array([r["picked"][name] == r["k"] for r in rows], dtype=float)
        ref = np.array([r["picked"]["grid_search_score"] == r["k"] for r in rows], float) \
            if "grid_search_score" in methods else hits
        diff = ref - hits
        summary[name] = {
            "correct": int(hits.sum()), "tasks": len(rows),
            "rate": float(hits.mean()), "se": float(hits.std(ddof=1) / np.sqrt(len(hits))),
            "score_minus_this": float(diff.mean()),
            "paired_se": float(diff.std(ddof=1) / np.sqrt(len(diff))),
            "seconds_per_task": float(np.mean([r["seconds"][name] for r in rows])),
        }
        print(f"{name:32s} {int(hits.sum()):3d}/{len(rows)}  "
              f"score - this {diff.mean():+.3f} +- {summary[name]['paired_se']:.3f}")
    real = {}
    if not args.no_real:
        for set_name, (X, k) in real_sets().items():
            real[set_name] = {"classes": int(k), "n": int(len(X)), "d": int(X.shape[1]),
                              "picked": {name: int(METHODS[name](X)) for name in methods}}
            print(set_name, real[set_name], flush=True)
    result = {"benchmark": "model_selection", "machine": machine(), "k_grid": K_GRID,
              "seeds": [args.first_seed, args.first_seed + args.tasks - 1],
              "summary": summary, "tasks": rows, "real": real}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
