"""KNNAttentionRegressor against scikit-learn's neighbours and kernel regressors.

    python benchmarks/bench_knn_regressor.py [--json results.json]

5-fold cross-validated R^2 (shuffled folds, the same for every model) on diabetes
(442 x 10) and make_friedman1 (1000 x 10, noise 1), with the time of one whole
cross-validation run. Models:

- KNNAttentionRegressor with defaults: exact top-k gradients, and ``gradient="sampled"``
  (lazy-Gumbel draws, random-walk gradients), and ``max_iter=0`` (identity projection,
  what the attention alone gives), and tuned (temperature and max_iter by an inner 3-fold
  grid search);
- KNeighborsRegressor(16, weights="distance") on standardized features;
- KernelRidge(kernel="rbf") on standardized features, alpha and gamma tuned by an inner
  3-fold grid search (the strong peer).
"""

import argparse
import json
import time

from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktransformer import KNNAttentionRegressor


def models():
    kr = GridSearchCV(KernelRidge(kernel="rbf"),
                      {"alpha": [0.01, 0.1, 1.0], "gamma": [0.01, 0.03, 0.1, 0.3]}, cv=3)
    return {
        "ours (exact gradients)": KNNAttentionRegressor(random_state=0),
        "ours (sampled gradients)": KNNAttentionRegressor(gradient="sampled", random_state=0),
        "ours (identity projection)": KNNAttentionRegressor(max_iter=0, random_state=0),
        "ours (tuned)": GridSearchCV(KNNAttentionRegressor(random_state=0),
                                     {"temperature": [1.0, 4.0, 16.0],
                                      "max_iter": [20, 100]}, cv=3),
        "KNeighborsRegressor(16, distance)": make_pipeline(
            StandardScaler(), KNeighborsRegressor(16, weights="distance")),
        "KernelRidge(rbf, tuned)": make_pipeline(StandardScaler(), kr),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    args = parser.parse_args()
    data = {"diabetes": load_diabetes(return_X_y=True),
            "friedman1": make_friedman1(1000, noise=1.0, random_state=0)}
    cv = KFold(5, shuffle=True, random_state=0)
    rows = []
    for name, (X, y) in data.items():
        base = None
        for model_name, model in models().items():
            start = time.perf_counter()
            scores = cross_val_score(model, X, y, cv=cv)
            seconds = time.perf_counter() - start
            if base is None:
                base = scores.mean()
            rows.append({"data": name, "model": model_name, "r2": scores.mean(),
                         "r2_std": scores.std(), "seconds": seconds})
            print(f"{name:10s} {model_name:36s} R^2 {scores.mean():.3f} +- {scores.std():.3f}"
                  f"  (ours exact - this: {base - scores.mean():+.3f})  {seconds:6.2f} s",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
