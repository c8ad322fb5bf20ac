"""TransformerKMedoids against scikit-learn-extra's KMedoids(method="alternate").

    python benchmarks/bench_kmedoids.py --n 5000 20000

scikit-learn-extra 0.3.0 (its last release) ships wheels built against numpy 1.x and does
not import beside numpy 2, so run this in an environment where it imports, for example:

    python -m venv /tmp/skx && /tmp/skx/bin/pip install -c constraints.txt "numpy<2" \\
        "scikit-learn==1.6.1" scipy torch tqdm && /tmp/skx/bin/pip install --no-deps \\
        scikit-learn-extra==0.3.0 && /tmp/skx/bin/pip install --no-deps -e .
    /tmp/skx/bin/python benchmarks/bench_kmedoids.py

Both from the same initial medoids, Euclidean metric, at most 20 layers; float64 uniform
data in [0, 1)^32, k = 16. Each fit runs in a fresh process so that its peak RSS is its own.
scikit-learn-extra builds the full n x n distance matrix; the circuit scores chunks.
"""

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def child(n, library):
    rng = np.random.default_rng(0)
    X = rng.random((n, 32))
    init = X[rng.choice(n, 16, replace=False)]
    if library == "scikit-learn-extra":
        from sklearn_extra.cluster import KMedoids
        model = KMedoids(16, method="alternate", init=init, max_iter=20)
    else:
        from sktransformer import TransformerKMedoids
        model = TransformerKMedoids(16, init=init, max_iter=20, device="cpu")
    start = time.perf_counter()
    model.fit(X)
    print(json.dumps({"time_s": time.perf_counter() - start,
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "medoids": sorted(int(i) for i in model.medoid_indices_),
                      "inertia": float(model.inertia_)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1])
        return
    print("| n | library | time (s) | peak RSS (MB) | same medoids | inertia ratio |")
    print("|---|---|---|---|---|---|")
    for n in args.n:
        runs = {}
        for library in ("scikit-learn-extra", "sktransformer"):
            out = subprocess.run([sys.executable, __file__, "--child", str(n), library],
                                 capture_output=True, text=True, check=True)
            runs[library] = json.loads(out.stdout.strip().splitlines()[-1])
        ref = runs["scikit-learn-extra"]
        for library, r in runs.items():
            print(f"| {n} | {library} | {r['time_s']:.3f} | {r['peak_mb']:.0f} | "
                  f"{r['medoids'] == ref['medoids']} | {r['inertia'] / ref['inertia']:.9f} |")


if __name__ == "__main__":
    main()
