"""Each clustering variant's layer against hard TransformerKMeans', timed inside the fits.

    python benchmarks/bench_variant_layers.py                  # 100000 x 32, k = 64
    python benchmarks/bench_variant_layers.py --configs 0 3 --repeats 30

``bench_kmeans.py --variants`` takes a layer's time as the difference of a 20-layer and a
1-layer fit over 19: honest about everything a fit does, but two noisy fit times make one
estimate (standard errors of 0.07-0.16 on the ratio at 9 repeats). This script times the
calls of the fit loop instead, in fits from the same centers (``tol=0``, 20 layers): every
assignment block (``cluster._lloyd.layer``), every center update (the variant's update
block's ``__call__``) and the whole loop (``cluster._lloyd.run_layers``: the 20 layers, the
final assignment, the bookkeeping between layers). It reports, per variant, the median
over repeats of a layer's time (its assignment and update blocks) after the first layer,
which pays a start-up of several milliseconds; the ratio of those layers' time to hard's
layers at the same places in its fit of the same repeat (paired mean +- SE over repeats,
and median); and the loop's time per layer and its paired ratio to hard's. The variants
run interleaved, in a new random order each repeat, with a pause before each fit. With
numba installed its loops are loaded first, as ``bench_kmeans.py`` does (small fits in a
fresh process run torch's paths instead). The k-medoids fits stop after 2 layers: their
second layer is compared with hard's second, and their loop's time per layer is not
comparable (the first layer and the final assignment weigh on 2 layers).
"""

import argparse
import functools
import random
import time

import numpy as np
from _common import Steal, blas_kernels
from bench_kmeans import (
    ITERS,
    PAUSE_S,
    QUADRATIC,
    VARIANT_CONFIGS,
    VARIANTS,
    make_data,
    paired,
    warm_up,
)

from sktransformer.cluster import _lloyd, _updates

NAMES = [name for name in VARIANTS if not name.startswith("faiss")
         and name not in QUADRATIC]  # (Euclidean k-medoids: about 60x a layer)


class Clock:
    """Wraps functions of objects so that each call's time is recorded under its ``key``;
    calls made inside an update (k-medoids' assigns) count as the update's only."""

    def __init__(self):
        self.times, self.in_update = {}, False

    def wrap(self, owner, name, key):
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            outer = not self.in_update
            self.in_update = self.in_update or key == "update"
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if outer:
                    self.times.setdefault(key, []).append(time.perf_counter() - start)
                    self.in_update = False

        setattr(owner, name, timed)


def run(config, repeats, seed=0):
    n, d, k = VARIANT_CONFIGS[config]
    X, init = make_data(n, d, k)
    clock = Clock()
    clock.wrap(_lloyd, "layer", "layer")
    clock.wrap(_lloyd, "run_layers", "loop")
    for update in (_updates.Mean, _updates.Trim, _updates.Sparsemax, _updates.Medoid):
        clock.wrap(update, "__call__", "update")
    names = [name for name in NAMES if "Medoids" not in name or n <= 100_000]
    warm_up("sktransformer", X, init)  # (numba's loops, as bench_kmeans.py loads them)
    for name in names:
        VARIANTS[name](X, init)  # warm up
    blocks = {name: [] for name in names}  # per fit: each layer's time with its update's
    loop = {name: [] for name in names}
    order = random.Random(seed)
    with Steal() as steal:
        for _ in range(repeats):
            for name in order.sample(names, len(names)):
                time.sleep(PAUSE_S)
                clock.times.clear()
                VARIANTS[name](X, init, max_iter=ITERS)
                updates = clock.times["update"]
                layers = clock.times["layer"][:len(updates)]  # (not the final assignment)
                blocks[name].append(np.add(layers, updates))
                loop[name].append(sum(clock.times["loop"]) / len(clock.times["layer"]))
    share = "unknown" if steal.share is None else f"{100 * steal.share:.1f}%"
    print(f"n={n} d={d} k={k}: {share} of the CPU time taken by the hypervisor (steal)")
    hard = names[0]
    print("| variant | layers | layer + update, ms | vs hard's same layers, paired mean +- SE "
          "(median) | loop per layer, ms | loop vs hard's, paired mean +- SE |")
    print("|---|---|---|---|---|---|")
    for name in names:
        # the layers after the first (which pays a start-up of several ms), against hard's
        # layers at the same places in the fit of the same repeat
        same = paired([b[1:].sum() / h[1:len(b)].sum()
                       for b, h in zip(blocks[name], blocks[hard])])
        loops = paired(np.array(loop[name]) / np.array(loop[hard]))
        print(f"| {name} | {len(blocks[name][0])} | "
              f"{1e3 * np.median([b[1:].mean() for b in blocks[name]]):.3f} | "
              f"{same['paired_ratio_mean']:.3f} +- {same['paired_ratio_se']:.3f} "
              f"({same['paired_ratio_median']:.3f}) | "
              f"{1e3 * np.median(loop[name]):.3f} | "
              f"{loops['paired_ratio_mean']:.3f} +- {loops['paired_ratio_se']:.3f} |",
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, nargs="*", default=[0],
                        help="0-2: bench_kmeans.py's configurations; 3: 20000 x 32, k = 16")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    print(f"BLAS kernels {blas_kernels()}")
    for config in args.configs:
        run(config, args.repeats)


if __name__ == "__main__":
    main()
