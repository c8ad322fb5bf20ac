"""Reproduce the learned-clustering study: learned layer vs Lloyd over unseen tasks.

    python benchmarks/reproduce_learned_kmeans.py                       # shipped weights
    python benchmarks/reproduce_learned_kmeans.py --ablation ablation.pt \\
        --seeds seed1.pt seed2.pt --plot learned.png --json learned.json

Mean natural log of the k-means objective after 20 layers over ``--tasks`` unseen
Gaussian-mixture tasks (the weights' d and k, sigma = 0.1) of a seed that no training, search or
validation run uses, for the learned layer, the paper's Lloyd loop (an empty cluster keeps
its center) and scikit-learn's Lloyd (which moves an empty cluster onto the farthest point)
from the same initial centers, with the paired difference and its standard error over the
tasks. Rows: random init (the first k points) at n = 512; k-means++ init; n in {128, 256,
1024, 2048}; the other noise families; the D = d ablation (``--ablation``); other layers of
the same d and k (``--seeds``: other training seeds, or layers trained on another noise).
"""

import argparse
import json

import numpy as np
import torch
from sklearn.cluster import KMeans, kmeans_plusplus

from sktransformer.cluster import LearnedKMeansLayer
from sktransformer.cluster._learned import SHIPPED, kmeans_objective, lloyd_step
from sktransformer.datasets import make_gmm_tasks

TEST_SEED = 20_261_203  # chosen after every decision; used by nothing else


SHAPE = {"d": 32, "k": 10}  # set from the weights in main()


def tasks(n_tasks, n_samples=512, noise="gaussian"):
    offset = {"gaussian": 0, "cauchy": 1, "gumbel": 2, "laplace": 3, "lognormal": 4}[noise]
    X, _ = make_gmm_tasks(n_tasks, n_samples, SHAPE["d"], SHAPE["k"], noise=noise,
                          random_state=TEST_SEED + 10 * n_samples + offset)
    return torch.from_numpy(X)


def curve(step, X, init, steps, batch=32):
    """Per-task log objective after 0..steps applications of ``step``: (steps + 1, tasks)."""
    out = []
    for s in range(0, len(X), batch):
        x, c = X[s:s + batch], init[s:s + batch]
        rows = [torch.log(kmeans_objective(x, c))]
        with torch.no_grad():
            for _ in range(steps):
                c = step(x, c)
                rows.append(torch.log(kmeans_objective(x, c)))
        out.append(torch.stack(rows))
    return torch.cat(out, 1).double().numpy()


def sklearn_lloyd(X, init, steps):
    """Per-task log objective of scikit-learn's KMeans (Lloyd, relocation) after ``steps``."""
    return np.array([np.log(KMeans(len(c), init=c.numpy(), n_init=1, max_iter=steps, tol=0,
                                   algorithm="lloyd").fit(x.numpy()).inertia_)
                     for x, c in zip(X.double(), init.double())])


def paired(a, b):
    diff = a - b
    return float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(len(diff)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default=SHIPPED)
    parser.add_argument("--seeds", nargs="*", default=[], help="layers of other seeds")
    parser.add_argument("--ablation", help="a layer trained with --no-scratch")
    parser.add_argument("--tasks", type=int, default=320)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--sizes", type=int, nargs="*", default=[128, 256, 1024, 2048])
    parser.add_argument("--noises", nargs="*",
                        default=["cauchy", "gumbel", "laplace", "lognormal"])
    parser.add_argument("--plot")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    torch.manual_seed(0)  # dropout is off in eval mode; nothing here draws from it
    layer = LearnedKMeansLayer.load(args.weights)
    SHAPE.update(d=layer.n_features, k=layer.n_clusters)
    k = layer.n_clusters
    rows, curves = {}, {}

    def row(name, X, init, candidate=layer):
        learned = curve(candidate.step, X, init, args.steps)
        lloyd = curve(lloyd_step, X, init, args.steps)
        relocating = sklearn_lloyd(X, init, args.steps)
        curves[name] = (learned.mean(1), lloyd.mean(1))
        rows[name] = {"learned": float(learned[-1].mean()), "lloyd": float(lloyd[-1].mean()),
                      "sklearn": float(relocating.mean()),
                      "vs_lloyd": paired(learned[-1], lloyd[-1]),
                      "vs_sklearn": paired(learned[-1], relocating)}
        r = rows[name]
        print(f"| {name} | {r['learned']:.3f} | {r['lloyd']:.3f} | {r['sklearn']:.3f} | "
              f"{r['vs_lloyd'][0]:+.3f} +- {r['vs_lloyd'][1]:.3f} | "
              f"{r['vs_sklearn'][0]:+.3f} +- {r['vs_sklearn'][1]:.3f} |", flush=True)

    print(f"mean log k-means objective after {args.steps} layers, {args.tasks} unseen tasks "
          f"(d={layer.n_features}, k={k}), differences paired over tasks (+- one standard "
          f"error)")
    print("| setting | learned | Lloyd (paper) | Lloyd (scikit-learn) | learned - paper | "
          "learned - scikit-learn |")
    print("|---|---|---|---|---|---|")
    X = tasks(args.tasks)
    row("random init, n=512", X, X[:, :k])
    init = torch.stack([torch.from_numpy(kmeans_plusplus(x.numpy(), k, random_state=i)[0])
                        for i, x in enumerate(X)])
    row("k-means++ init, n=512", X, init)
    for n in args.sizes:
        Xn = tasks(args.tasks, n)
        row(f"random init, n={n}", Xn, Xn[:, :k])
    for noise in args.noises:
        Xn = tasks(args.tasks, noise=noise)
        row(f"{noise} noise, n=512", Xn, Xn[:, :k])
    if args.ablation:
        row("ablation D=d, n=512", X, X[:, :k], LearnedKMeansLayer.load(args.ablation))
    for i, path in enumerate(args.seeds):
        row(f"{path}, n=512", X, X[:, :k], LearnedKMeansLayer.load(path))

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tasks": args.tasks, "steps": args.steps, "test_seed": TEST_SEED,
                       "rows": rows,
                       "curves": {k: [list(map(float, v[0])), list(map(float, v[1]))]
                                  for k, v in curves.items()}}, f, indent=1)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        names = list(curves)
        cols = 4
        n_rows = -(-len(names) // cols)
        fig, axes = plt.subplots(n_rows, cols, figsize=(4 * cols, 3.2 * n_rows),
                                 squeeze=False)
        for ax, name in zip(axes.flat, names):
            learned, lloyd = curves[name]
            steps = np.arange(len(learned))
            ax.plot(steps[1:], learned[1:], "o-", ms=3, label="learned layer")
            ax.plot(steps[1:], lloyd[1:], "s-", ms=3, label="Lloyd")
            ax.axhline(rows[name]["sklearn"], color="gray", ls=":",
                       label="scikit-learn Lloyd (20)")
            ax.set_title(name, fontsize=9)
            ax.set_xlabel("layers (steps)")
        axes.flat[0].set_ylabel("mean log k-means objective")
        axes.flat[0].legend(fontsize=8)
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"plot -> {args.plot}")


if __name__ == "__main__":
    main()
