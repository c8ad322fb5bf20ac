"""Learned Coulomb-particle features vs fixed random features vs importance sampling.

    python benchmarks/bench_particle_kernel.py                  # both studies
    python benchmarks/bench_particle_kernel.py --study synthetic --seeds 0 1 2 --plot pk.png
    python benchmarks/bench_particle_kernel.py --study real

Synthetic study: a nonlinear binary task (``make_classification``: 20 features, 6
informative, 3 clusters per class; 1500 training and 1500 test points, standardized), a
fraction of the *training* labels flipped (label noise 0, 0.1, 0.2, 0.3; test labels clean),
feature budgets 16 ... 256; the same LogisticRegression on three feature maps of the same
RBF width (gamma = 1 / d): ParticleKernelSampler (learned particles, defaults),
RBFSampler (fixed), ImportanceSampledRFF (Sinha & Duchi). Accuracy, log loss, Brier and
ECE (15 bins) on the test set, mean over seeds.

Real data (scikit-learn's breast_cancer, digits, wine; standardized): 5-fold CV accuracy of
ParticleKernelClassifier, RBFSampler + LogisticRegression (64 features each) and
SVC(kernel="rbf"), all with gamma = 1 / d, the same folds.
"""

import argparse
import json
import time

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine, make_classification
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from sktransformer.kernels import (
    ImportanceSampledRFF,
    ParticleKernelClassifier,
    ParticleKernelSampler,
)

NOISES = [0.0, 0.1, 0.2, 0.3]
BUDGETS = [16, 32, 64, 128, 256]


def ece(proba, y, n_bins=15):
    """Expected calibration error: |accuracy - confidence| over 15 equal-width bins."""
    confidence = proba.max(1)
    correct = proba.argmax(1) == y
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        inside = bins == b
        if inside.any():
            total += inside.mean() * abs(correct[inside].mean() - confidence[inside].mean())
    return total


def brier(proba, y):
    """Mean over samples of sum_c (p_c - 1[y = c])^2 (for two classes, twice the binary
    (p - y)^2)."""
    onehot = np.eye(proba.shape[1])[y]
    return float(((proba - onehot) ** 2).sum(1).mean())


def synthetic(seed, noise):
    X, y = make_classification(3000, n_features=20, n_informative=6, n_redundant=2,
                               n_clusters_per_class=3, class_sep=1.0, flip_y=0.0,
                               random_state=seed)
    X = StandardScaler().fit_transform(X)
    X_train, y_train, X_test, y_test = X[:1500], y[:1500].copy(), X[1500:], y[1500:]
    rng = np.random.default_rng(seed)
    flip = rng.random(1500) < noise
    y_train[flip] = 1 - y_train[flip]
    return X_train, y_train, X_test, y_test


def samplers(n, gamma, seed):
    return {
        "learned particles": ParticleKernelSampler(n, gamma=gamma, random_state=seed,
                                                   device="cpu"),
        "RBFSampler": RBFSampler(gamma=gamma, n_components=n, random_state=seed),
        "Sinha-Duchi": ImportanceSampledRFF(n, gamma=gamma, random_state=seed),
    }


def run_synthetic(seeds):
    rows = []
    for noise in NOISES:
        for n in BUDGETS:
            scores = {}
            for seed in seeds:
                X_train, y_train, X_test, y_test = synthetic(seed, noise)
                gamma = 1.0 / X_train.shape[1]
                for name, sampler in samplers(n, gamma, seed).items():
                    start = time.perf_counter()
                    model = make_pipeline(sampler, LogisticRegression(max_iter=2000))
                    model.fit(X_train, y_train)
                    proba = model.predict_proba(X_test)
                    scores.setdefault(name, []).append([
                        accuracy_score(y_test, proba.argmax(1)), log_loss(y_test, proba),
                        brier(proba, y_test), ece(proba, y_test),
                        time.perf_counter() - start])
            for name, values in scores.items():
                mean, std = np.mean(values, 0), np.std(values, 0)
                rows.append({"noise": noise, "n_components": n, "method": name,
                             "accuracy": mean[0], "accuracy_std": std[0], "log_loss": mean[1],
                             "brier": mean[2], "ece": mean[3], "fit_s": mean[4]})
            print(f"noise {noise} budget {n}: " + ", ".join(
                f"{r['method']} {r['accuracy']:.3f}" for r in rows[-3:]), flush=True)
    return rows


def run_real():
    rows = []
    for name, loader in [("breast_cancer", load_breast_cancer), ("digits", load_digits),
                         ("wine", load_wine)]:
        X, y = loader(return_X_y=True)
        X = StandardScaler().fit_transform(X)
        gamma = 1.0 / X.shape[1]
        cv = StratifiedKFold(5, shuffle=True, random_state=0)
        models = {
            "ParticleKernelClassifier (64)": ParticleKernelClassifier(
                64, gamma=gamma, random_state=0, device="cpu"),
            "RBFSampler (64) + LogisticRegression": make_pipeline(
                RBFSampler(gamma=gamma, n_components=64, random_state=0),
                LogisticRegression(max_iter=2000)),
            "SVC(kernel='rbf')": SVC(kernel="rbf", gamma=gamma),
        }
        for method, model in models.items():
            start = time.perf_counter()
            acc = cross_val_score(model, X, y, cv=cv)
            rows.append({"data": name, "method": method, "accuracy": acc.mean(),
                         "accuracy_std": acc.std(), "seconds": time.perf_counter() - start})
    return rows


def print_table(rows, keys):
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k])
                                for k in keys) + " |")


def claims(rows):
    """The paper's two claims, checked on the synthetic table."""
    acc = {(r["noise"], r["n_components"], r["method"]): r["accuracy"] for r in rows}
    for noise in NOISES:
        wins = [n for n in BUDGETS if acc[noise, n, "learned particles"] >
                max(acc[noise, n, "RBFSampler"], acc[noise, n, "Sinha-Duchi"])]
        print(f"noise {noise}: learned particles beat both baselines at budgets {wins}")
    for method in ("learned particles", "RBFSampler", "Sinha-Duchi"):
        kept = np.mean([acc[noise, 64, method] / acc[noise, 256, method] for noise in NOISES])
        print(f"{method}: accuracy at 64 features / at 256, mean over noise: {kept:.3f}")


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(NOISES), figsize=(4 * len(NOISES), 3.3), sharey=True)
    for ax, noise in zip(axes, NOISES):
        for method in ("learned particles", "RBFSampler", "Sinha-Duchi"):
            sub = [r for r in rows if r["noise"] == noise and r["method"] == method]
            ax.errorbar([r["n_components"] for r in sub], [r["accuracy"] for r in sub],
                        [r["accuracy_std"] for r in sub], marker="o", ms=3, capsize=2,
                        label=method)
        ax.set_xscale("log", base=2)
        ax.set_title(f"label noise {noise}")
        ax.set_xlabel("features")
    axes[0].set_ylabel("test accuracy")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot -> {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=["synthetic", "real", "both"], default="both")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--plot")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    out = {}
    if args.study in ("synthetic", "both"):
        out["synthetic"] = run_synthetic(args.seeds)
        print_table(out["synthetic"], ["noise", "n_components", "method", "accuracy",
                                       "accuracy_std", "log_loss", "brier", "ece", "fit_s"])
        claims(out["synthetic"])
        if args.plot:
            plot(out["synthetic"], args.plot)
    if args.study in ("real", "both"):
        out["real"] = run_real()
        print_table(out["real"], ["data", "method", "accuracy", "accuracy_std", "seconds"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
