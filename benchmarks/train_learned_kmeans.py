"""Train the learned k-means layer; the command that produced the shipped weights.

    python benchmarks/train_learned_kmeans.py \\
        --out sktransformer/cluster/weights/learned_d32_k10.pt        # the shipped file

    python benchmarks/train_learned_kmeans.py --seed 1 --out /tmp/seed1.pt
    python benchmarks/train_learned_kmeans.py --no-scratch --init random --lr 0.01 \\
        --loss-gamma 10 --unroll 1 --steps 2000 --out /tmp/ablation.pt   # the D = d ablation
    python benchmarks/train_learned_kmeans.py --n-features 8 --n-clusters 4 --out /tmp/8x4.pt

Defaults are :class:`~sktransformer.cluster.LayerTrainer`'s: d = 32, k = 10, n = 512 points
per task; the circuit's two temperatures chosen by a search on 128 validation tasks'
20-layer objective, then 200 Adam steps (lr 1e-4) on an unrolled loss, keeping the best
validation checkpoint (the searched circuit included). ``--checkpoint`` makes an
interrupted run resume. The history (loss per step, validation objective, the search) is
written next to ``--out`` as JSON.
"""

import argparse
import json
import time

import torch

from sktransformer.cluster import LayerTrainer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--n-features", type=int, default=32)
    parser.add_argument("--n-clusters", type=int, default=10)
    parser.add_argument("--noise", default="gaussian")
    parser.add_argument("--no-scratch", action="store_true")
    parser.add_argument("--no-normalize", action="store_true")
    parser.add_argument("--init", choices=["circuit", "random"], default="circuit")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--loss-gamma", type=float, default=None)
    parser.add_argument("--unroll", type=int, default=10)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    trainer = LayerTrainer(args.n_features, args.n_clusters, scratch=not args.no_scratch,
                           normalize=not args.no_normalize, init=args.init, noise=args.noise,
                           n_steps=args.steps, lr=args.lr, loss_gamma=args.loss_gamma,
                           unroll=args.unroll, checkpoint=args.checkpoint,
                           random_state=args.seed).fit()
    trainer.layer_.save(args.out)
    seconds = time.perf_counter() - start
    with open(args.out.rsplit(".", 1)[0] + ".history.json", "w") as f:
        json.dump({"args": vars(args), "seconds": seconds, "best_score": trainer.best_score_,
                   "best_step": trainer.best_step_, "lloyd_score": trainer.lloyd_score_,
                   "gamma": trainer.gamma_, "update_gamma": trainer.update_gamma_,
                   "search": trainer.search_, **trainer.history_}, f, indent=1)
    print(f"validation objective {trainer.best_score_:.4f} at step {trainer.best_step_} "
          f"(Lloyd {trainer.lloyd_score_:.4f}) in {seconds:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
