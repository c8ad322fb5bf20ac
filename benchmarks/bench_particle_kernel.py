"""Learned Coulomb-particle features against fixed random features, Nystroem and friends.

    python benchmarks/bench_particle_kernel.py --study real            # the defaults on real data
    python benchmarks/bench_particle_kernel.py --study recovery        # gamma 100x off
    python benchmarks/bench_particle_kernel.py --study synthetic --plot pk.png
    python benchmarks/bench_particle_kernel.py --study cost            # fit time vs the pipeline

Real data (``--study real``): repeated stratified 5-fold CV (``--seeds``, seeds no choice was
made on) of ``make_pipeline(StandardScaler(), model)`` with every model at its defaults:
``ParticleKernelClassifier(n)``, ``RBFSampler(gamma="scale", n_components=n)`` +
``LogisticRegression``, ``Nystroem(n_components=n)`` + ``LogisticRegression`` (n = 16 and
64), ``SVC(kernel="rbf")`` (probabilities by Platt scaling) and ``LogisticRegression``.
Accuracy and log loss, with the paired difference against the better of the two
fixed-feature pipelines (+- one standard error over the folds), and the fit time of each
model in the same process (each model's five folds as a block, the models alternating).
The data sets: scikit-learn's breast_cancer, wine and digits (the ones the defaults were
tuned on) and iris, palmerpenguins' penguins, statsmodels' anes96 (vote) and fair
(any affair), which no choice looked at.

Recovery (``--study recovery``): 5-fold accuracy at 64 features from gamma = "scale" times
1/100, 1, 100, with and without the learned bandwidth.

Synthetic (``--study synthetic``): the seed's claims. A nonlinear binary task
(``make_classification``: 20 features, 6 informative, 3 clusters per class; 1500 training
and 1500 test points, standardized), a fraction of the *training* labels flipped (0, 0.1,
0.2, 0.3); budgets 16 ... 256; ParticleKernelClassifier (defaults) against RBFSampler and
ImportanceSampledRFF (Sinha & Duchi) + LogisticRegression at gamma = "scale". Accuracy, log
loss, Brier and ECE (15 bins) on the clean test set, mean over seeds.

Cost (``--study cost``): fit time of ``ParticleKernelClassifier(64)`` over the fit time
of ``RBFSampler(gamma="scale", n_components=64)`` + ``LogisticRegression`` on each real
set (standardized), in alternating blocks of fits (the two libraries' thread pools are
not switched fit by fit): the median of the blocks' ratios and its standard error.
"""

import argparse
import json
import time
import warnings

import numpy as np
from _common import machine
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import (
    load_breast_cancer,
    load_digits,
    load_iris,
    load_wine,
    make_classification,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import Nystroem, RBFSampler
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from sktransformer.kernels import ImportanceSampledRFF, ParticleKernelClassifier

NOISES = [0.0, 0.1, 0.2, 0.3]
BUDGETS = [16, 32, 64, 128, 256]
TUNED_ON = ("breast_cancer", "wine", "digits")


# -- data ---------------------------------------------------------------------------------

def penguins():
    import palmerpenguins
    columns = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
    df = palmerpenguins.load_penguins().dropna(subset=columns)
    return df[columns].to_numpy(float), df["species"].to_numpy()


def anes96():
    import statsmodels.datasets
    df = statsmodels.datasets.anes96.load_pandas().data
    return df.drop(columns=["vote", "logpopul"]).to_numpy(float), df["vote"].to_numpy(int)


def fair():
    import statsmodels.datasets
    df = statsmodels.datasets.fair.load_pandas().data
    return df.drop(columns=["affairs"]).to_numpy(float), (df["affairs"] > 0).to_numpy(int)


DATASETS = {
    "breast_cancer": lambda: load_breast_cancer(return_X_y=True),
    "wine": lambda: load_wine(return_X_y=True),
    "digits": lambda: load_digits(return_X_y=True),
    "iris": lambda: load_iris(return_X_y=True),
    "penguins": penguins,
    "anes96": anes96,
    "fair": fair,
}


# -- metrics ------------------------------------------------------------------------------

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


# -- real data ----------------------------------------------------------------------------

def real_models(n, seed):
    return {
        f"ParticleKernelClassifier({n})": ParticleKernelClassifier(n, random_state=seed,
                                                                    device="cpu"),
        f"RBFSampler({n}) + LR": make_pipeline(
            RBFSampler(gamma="scale", n_components=n, random_state=seed),
            LogisticRegression(max_iter=1000)),
        f"Nystroem({n}) + LR": make_pipeline(
            Nystroem(n_components=n, random_state=seed), LogisticRegression(max_iter=1000)),
    }


def run_real(names, seeds, budgets):
    rows = []
    for name in names:
        X, y = DATASETS[name]()
        classes, y = np.unique(y, return_inverse=True)
        models = {}
        for n in budgets:
            models.update(real_models(n, 0))
        # SVC's probabilities by Platt scaling (scikit-learn 1.9's replacement for
        # probability=True)
        models["SVC(rbf)"] = CalibratedClassifierCV(SVC(kernel="rbf"), ensemble=False)
        models["LogisticRegression"] = LogisticRegression(max_iter=1000)
        scores = {m: [] for m in models}
        for seed in seeds:
            folds = list(StratifiedKFold(5, shuffle=True, random_state=seed).split(X, y))
            for m, model in models.items():  # a block of the five folds per model
                for train, test in folds:
                    model = make_pipeline(StandardScaler(), clone(model))
                    if "random_state" in model.get_params():
                        model.set_params(random_state=seed)
                    start = time.perf_counter()
                    model.fit(X[train], y[train])
                    seconds = time.perf_counter() - start
                    proba = model.predict_proba(X[test])
                    scores[m].append((accuracy_score(y[test], proba.argmax(1)),
                                      log_loss(y[test], proba, labels=range(len(classes))),
                                      seconds))
        for m, values in scores.items():
            v = np.array(values)
            rows.append({"data": name, "n": len(X), "d": X.shape[1], "classes": len(classes),
                         "method": m, "accuracy": v[:, 0].mean(), "log_loss": v[:, 1].mean(),
                         "fit_ms": 1000 * np.median(v[:, 2]), "per_fold": v.tolist()})
        for n in budgets:
            ours = np.array(scores[f"ParticleKernelClassifier({n})"])
            fixed = [f"RBFSampler({n}) + LR", f"Nystroem({n}) + LR"]
            best = max(fixed, key=lambda m: np.mean(np.array(scores[m])[:, 0]))
            theirs = np.array(scores[best])
            for j, metric in ((0, "accuracy"), (1, "log_loss")):
                diff = ours[:, j] - theirs[:, j]
                rows.append({"data": name, "method": f"diff {n}: ours - {best}",
                             "metric": metric, "mean": diff.mean(),
                             "se": diff.std(ddof=1) / np.sqrt(len(diff))})
        print(f"{name} done", flush=True)
    return rows


def print_real(rows, budgets):
    print("| data | tuned on | " + " | ".join(
        f"ours {n} | RBF {n} | Nystroem {n}" for n in budgets) + " | SVC | LR |")
    print("|" + "---|" * (2 + 3 * len(budgets) + 2))
    for name in dict.fromkeys(r["data"] for r in rows):
        acc = {r["method"]: r for r in rows if r["data"] == name and "accuracy" in r}
        cells = []
        for n in budgets:
            cells += [f"{acc[m]['accuracy']:.3f} / {acc[m]['log_loss']:.3f}" for m in (
                f"ParticleKernelClassifier({n})", f"RBFSampler({n}) + LR",
                f"Nystroem({n}) + LR")]
        cells += [f"{acc['SVC(rbf)']['accuracy']:.3f} / {acc['SVC(rbf)']['log_loss']:.3f}",
                  f"{acc['LogisticRegression']['accuracy']:.3f} / "
                  f"{acc['LogisticRegression']['log_loss']:.3f}"]
        print(f"| {name} | {'yes' if name in TUNED_ON else 'no'} | " + " | ".join(cells) + " |")
    print("\npaired differences, ours minus the better fixed-feature pipeline (+- SE):")
    for r in rows:
        if "metric" in r:
            print(f"  {r['data']:14s} {r['method']:40s} {r['metric']:9s} "
                  f"{r['mean']:+.4f} +- {r['se']:.4f}")
    print("\nmedian fit time (ms), and ours over RBFSampler + LR at the same budget:")
    for name in dict.fromkeys(r["data"] for r in rows):
        acc = {r["method"]: r for r in rows if r["data"] == name and "accuracy" in r}
        cells = []
        for n in budgets:
            ours = acc[f"ParticleKernelClassifier({n})"]["fit_ms"]
            theirs = acc[f"RBFSampler({n}) + LR"]["fit_ms"]
            cells.append(f"{n}: {ours:.0f} vs {theirs:.0f} ({ours / theirs:.1f}x)")
        print(f"  {name:14s} " + ", ".join(cells))


# -- recovery from a bad gamma ---------------------------------------------------------------

def run_recovery(names, seeds):
    rows = []
    for name in names:
        X, y = DATASETS[name]()
        y = np.unique(y, return_inverse=True)[1]
        gamma = 1.0 / (X.shape[1])  # "scale" after standardization (variance 1)
        for factor in (0.01, 1.0, 100.0):
            for learn in (True, False):
                accs = []
                for seed in seeds:
                    for train, test in StratifiedKFold(5, shuffle=True,
                                                       random_state=seed).split(X, y):
                        model = make_pipeline(StandardScaler(), ParticleKernelClassifier(
                            64, gamma=gamma * factor, learn_bandwidth=learn,
                            random_state=seed, device="cpu"))
                        accs.append(model.fit(X[train], y[train]).score(X[test], y[test]))
                rows.append({"data": name, "gamma_factor": factor, "learn_bandwidth": learn,
                             "accuracy": float(np.mean(accs))})
                print(rows[-1], flush=True)
    return rows


# -- the seed's synthetic claims --------------------------------------------------------------

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


def synthetic_models(n, seed):
    return {
        "learned particles": ParticleKernelClassifier(n, random_state=seed, device="cpu"),
        "RBFSampler": make_pipeline(RBFSampler(gamma="scale", n_components=n,
                                               random_state=seed),
                                    LogisticRegression(max_iter=2000)),
        "Sinha-Duchi": make_pipeline(ImportanceSampledRFF(n, random_state=seed),
                                     LogisticRegression(max_iter=2000)),
    }


def run_synthetic(seeds):
    rows = []
    for noise in NOISES:
        for n in BUDGETS:
            scores = {}
            for seed in seeds:
                X_train, y_train, X_test, y_test = synthetic(seed, noise)
                for name, model in synthetic_models(n, seed).items():
                    start = time.perf_counter()
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


# -- cost ---------------------------------------------------------------------------------

def run_cost(names, blocks=8, repeats=4, n_components=64):
    """Fit time of the defaults over RBFSampler + LogisticRegression on each real set
    (standardized), in alternating blocks of ``repeats`` fits: each block's median ratio,
    their median and standard error."""
    rows = []
    for name in names:
        X, y = DATASETS[name]()
        X = StandardScaler().fit_transform(X)
        models = {
            "ours": lambda r: ParticleKernelClassifier(n_components, random_state=r,
                                                       device="cpu"),
            "rbf_lr": lambda r: make_pipeline(
                RBFSampler(gamma="scale", n_components=n_components, random_state=r),
                LogisticRegression(max_iter=1000)),
        }
        times = {m: [] for m in models}
        for _ in range(blocks):
            for m, make in models.items():
                block = []
                for r in range(repeats):
                    start = time.perf_counter()
                    make(r).fit(X, y)
                    block.append(time.perf_counter() - start)
                times[m].append(float(np.median(block)))
        ratios = np.array(times["ours"]) / np.array(times["rbf_lr"])
        rows.append({"data": name, "n": len(X), "d": X.shape[1],
                     "n_components": n_components,
                     "ours_ms": 1000 * float(np.median(times["ours"])),
                     "rbf_lr_ms": 1000 * float(np.median(times["rbf_lr"])),
                     "ratio": float(np.median(ratios)),
                     "ratio_se": float(ratios.std(ddof=1) / np.sqrt(len(ratios)))})
        print(rows[-1], flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=["real", "recovery", "synthetic", "cost"],
                        default="real")
    parser.add_argument("--data", nargs="+", default=list(DATASETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102])
    parser.add_argument("--budgets", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--plot")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    try:
        from threadpoolctl import threadpool_info
        print("BLAS:", ", ".join(f"{i['internal_api']} {i.get('architecture', '?')}"
                                 for i in threadpool_info()))
    except ImportError:
        pass
    if args.study == "real":
        out = run_real(args.data, args.seeds, args.budgets)
        print_real(out, args.budgets)
        out = {"machine": machine(), "rows": out}
    elif args.study == "recovery":
        out = {"machine": machine(), "rows": run_recovery(args.data, args.seeds)}
    elif args.study == "cost":
        out = {"machine": machine(), "rows": run_cost(args.data)}
    else:
        out = run_synthetic(args.seeds)
        print_table(out, ["noise", "n_components", "method", "accuracy", "accuracy_std",
                          "log_loss", "brier", "ece", "fit_s"])
        claims(out)
        if args.plot:
            plot(out, args.plot)
        out = {"machine": machine(), "rows": out}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
