"""Train the learned k-means layer; the command that produced the shipped weights.

    python benchmarks/train_learned_kmeans.py \\
        --out sktransformer/cluster/weights/learned_d32_k10.pt        # the shipped file

    python benchmarks/train_learned_kmeans.py --seed 1 --out /tmp/seed1.pt
    python benchmarks/train_learned_kmeans.py --no-scratch --init random --lr 0.01 \\
        --out /tmp/ablation.pt                                          # the D = d ablation

Defaults: d = 32, k = 10, n = 512 points per task, 32 tasks per step, 2000 steps (the paper
runs 10,000; about 10 minutes on the 2-core CPU), smoothed objective at gamma = 10, Adam,
ReduceLROnPlateau on the validation score every 50 steps. The d + k layer starts from the
paper's construction at gamma = 10 (soft Lloyd) with lr = 0.001; ``--init random --lr 0.01``
is the paper's start from random weights. ``--checkpoint`` makes an interrupted run resume.
The history (loss per step, validation score) is written next to ``--out`` as JSON.
"""

import argparse
import json
import time

import torch

from sktransformer.cluster._train import LayerTrainer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--n-features", type=int, default=32)
    parser.add_argument("--n-clusters", type=int, default=10)
    parser.add_argument("--no-scratch", action="store_true")
    parser.add_argument("--init", choices=["circuit", "random"], default="circuit")
    parser.add_argument("--init-gamma", type=float, default=10.0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    trainer = LayerTrainer(args.n_features, args.n_clusters, scratch=not args.no_scratch,
                           n_steps=args.steps, lr=args.lr, init=args.init,
                           init_gamma=args.init_gamma, checkpoint=args.checkpoint,
                           random_state=args.seed).fit()
    trainer.layer_.save(args.out)
    seconds = time.perf_counter() - start
    with open(args.out.rsplit(".", 1)[0] + ".history.json", "w") as f:
        json.dump({"args": vars(args), "seconds": seconds, "best_score": trainer.best_score_,
                   **trainer.history_}, f)
    print(f"best validation score {trainer.best_score_:.4f} (1-step objective / Lloyd's) "
          f"in {seconds:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
