"""Reproduce the learned-clustering study: learned layer vs Lloyd over unseen tasks.

    python benchmarks/reproduce_learned_kmeans.py                       # shipped weights
    python benchmarks/reproduce_learned_kmeans.py --seeds a.pt b.pt c.pt \\
        --ablation ablation.pt --plot learned.png --json learned.json

Mean natural log of the k-means objective over ``--tasks`` unseen Gaussian-mixture tasks
(d = 32, k = 10, sigma = 0.1; a seed no training or validation run uses), after 0..20 layers,
the learned layer and Lloyd from the same initial centers, for: random init (the first k
points) at n = 512; k-means++ init; n in {128, 256, 1024, 2048}; the D = d ablation; and
the 20-step margin over each training seed given with ``--seeds``.
"""

import argparse
import json

import numpy as np
import torch
from sklearn.cluster import kmeans_plusplus

from sktransformer.cluster import LearnedKMeansLayer
from sktransformer.cluster._learned import SHIPPED
from sktransformer.cluster._train import evaluate
from sktransformer.datasets import make_gmm_tasks

TEST_SEED = 2**31 - 2


def tasks(n_tasks, n_samples):
    X, _ = make_gmm_tasks(n_tasks, n_samples, 32, 10, random_state=TEST_SEED + n_samples)
    return torch.from_numpy(X)


def curves(layer, X, init, steps, batch=32):
    """evaluate() over batches of tasks; the mean of logs is a mean over all tasks."""
    parts = [evaluate(layer, X[s:s + batch], init[s:s + batch], steps)
             for s in range(0, len(X), batch)]
    weights = np.array([min(batch, len(X) - s) for s in range(0, len(X), batch)])
    learned = sum(w * p[0] for w, p in zip(weights, parts)) / weights.sum()
    lloyd = sum(w * p[1] for w, p in zip(weights, parts)) / weights.sum()
    return learned, lloyd


def sklearn_lloyd(X, init, steps):
    """Mean log objective of scikit-learn's Lloyd after ``steps`` iterations: unlike the
    paper's loop it moves an empty cluster onto the farthest point, a stronger baseline."""
    from sklearn.cluster import KMeans
    return float(np.mean([np.log(KMeans(10, init=c.numpy(), n_init=1, max_iter=steps, tol=0,
                                        algorithm="lloyd").fit(x.numpy()).inertia_)
                          for x, c in zip(X.double(), init.double())]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default=SHIPPED)
    parser.add_argument("--seeds", nargs="*", default=[], help="layers of other seeds")
    parser.add_argument("--ablation", help="a layer trained with --no-scratch")
    parser.add_argument("--tasks", type=int, default=320)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--sizes", type=int, nargs="*", default=[128, 256, 1024, 2048])
    parser.add_argument("--plot")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    layer = LearnedKMeansLayer.load(args.weights)
    results, relocating = {}, {}

    X = tasks(args.tasks, 512)
    results["random init, n=512"] = curves(layer, X, X[:, :10], args.steps)
    relocating["random init, n=512"] = sklearn_lloyd(X, X[:, :10], args.steps)
    init = torch.stack([torch.from_numpy(kmeans_plusplus(x.numpy(), 10, random_state=i)[0])
                        for i, x in enumerate(X)])
    results["k-means++ init, n=512"] = curves(layer, X, init, args.steps)
    relocating["k-means++ init, n=512"] = sklearn_lloyd(X, init, args.steps)
    for n in args.sizes:
        Xn = tasks(args.tasks, n)
        results[f"random init, n={n}"] = curves(layer, Xn, Xn[:, :10], args.steps)
        relocating[f"random init, n={n}"] = sklearn_lloyd(Xn, Xn[:, :10], args.steps)
    if args.ablation:
        results["ablation D=d, n=512"] = curves(LearnedKMeansLayer.load(args.ablation), X,
                                                X[:, :10], args.steps)
    margins = []
    for path in [args.weights, *args.seeds]:
        learned, lloyd = curves(LearnedKMeansLayer.load(path), X, X[:, :10], args.steps)
        margins.append(lloyd[-1] - learned[-1])

    print(f"mean log k-means objective over {args.tasks} unseen tasks (d=32, k=10)")
    print(f"| setting | init | learned 1 | Lloyd 1 | learned 10 | Lloyd 10 | "
          f"learned {args.steps} | Lloyd {args.steps} | sklearn Lloyd {args.steps} |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (learned, lloyd) in results.items():
        cells = [learned[0], learned[1], lloyd[1], learned[min(10, args.steps)],
                 lloyd[min(10, args.steps)], learned[-1], lloyd[-1]]
        extra = f"{relocating[name]:.4f}" if name in relocating else ""
        print(f"| {name} | " + " | ".join(f"{c:.4f}" for c in cells) + f" | {extra} |")
    print("Lloyd: the paper's loop (an empty cluster keeps its center); sklearn Lloyd: "
          "scikit-learn's KMeans, which moves an empty cluster onto the farthest point.")
    print(f"20-step margin (Lloyd - learned) over {len(margins)} training seeds: "
          f"{np.mean(margins):.4f} +- {np.std(margins):.4f} "
          f"(each: {', '.join(f'{m:.4f}' for m in margins)})")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"curves": {k: [list(map(float, v[0])), list(map(float, v[1]))]
                                  for k, v in results.items()},
                       "sklearn_lloyd_final": relocating,
                       "margins": list(map(float, margins))}, f, indent=1)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        names = list(results)
        cols = 4
        rows = -(-len(names) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
        for ax, name in zip(axes.flat, names):
            learned, lloyd = results[name]
            steps = np.arange(len(learned))
            ax.plot(steps[1:], learned[1:], "o-", ms=3, label="learned layer")
            ax.plot(steps[1:], lloyd[1:], "s-", ms=3, label="Lloyd")
            ax.set_title(name, fontsize=9)
            ax.set_xlabel("layers (steps)")
        axes.flat[0].set_ylabel("mean log k-means objective")
        axes.flat[0].legend()
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"plot -> {args.plot}")


if __name__ == "__main__":
    main()
