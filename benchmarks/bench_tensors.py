"""Torch tensors in: the memory of a float32 fit against a float64 one, and the time against
the same fit from numpy.

    python benchmarks/bench_tensors.py [--n 2000000] [--d 32] [--k 16] [--json F]

Each fit runs in a fresh child process that makes its data as a torch tensor (or a numpy
array) and reports its peak resident memory before the fit (the data made) and after it,
so each figure is that fit's alone. ``TransformerKMeans(k, init=<k rows>, max_iter=20)``
on a CPU tensor (``device="auto"`` follows it), float32 and float64, and the same on a
numpy array; the time is the fit's wall clock, interleaved over ``--repeats``.
"""

import argparse
import json

import numpy as np  # noqa: F401  (loads the BLAS that threadpoolctl reports)
from _common import blas_kernels, run_child
from _common import machine as machine_info

CHILD = r"""
import json, resource, sys, time
import numpy as np, torch
from sktransformer import TransformerKMeans

kind, dtype, n, d, k = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # python, torch, the package
generator = torch.Generator().manual_seed(0)
X = torch.empty(n, d, dtype=getattr(torch, dtype))
means = 4 * torch.randn(k, d, generator=generator, dtype=X.dtype)
for a in range(0, n, 65536):  # by blocks: no temporary of X's size
    b = min(a + 65536, n)
    X[a:b] = torch.randn(b - a, d, generator=generator, dtype=X.dtype) + means[
        torch.randint(0, k, (b - a,), generator=generator)]
if kind == "numpy":
    X = X.numpy()
init = X[:k].clone() if kind == "tensor" else X[:k].copy()
with_data = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
model = TransformerKMeans(k, init=init, max_iter=20, tol=0).fit(X)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "with_data_mb": with_data / 1024,
                  "base_mb": base / 1024,
                  "peak_mb": peak / 1024, "centers_dtype": str(model.cluster_centers_.dtype),
                  "inertia": float(model.inertia_)}))
"""


def run(kind, dtype, n, d, k):
    return run_child(CHILD, kind, dtype, n, d, k)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(f"BLAS: {blas_kernels()}; X is {args.n} x {args.d}, k = {args.k}")
    cases = [(kind, dtype) for dtype in ("float32", "float64") for kind in ("tensor", "numpy")]
    runs = {case: [] for case in cases}
    for _ in range(args.repeats):
        for case in cases:
            runs[case].append(run(*case, args.n, args.d, args.k))
    result = {"machine": machine_info()}
    for (kind, dtype), rs in runs.items():
        row = {"seconds": min(r["seconds"] for r in rs), "peak_mb": max(r["peak_mb"] for r in rs),
               "with_data_mb": max(r["with_data_mb"] for r in rs),
               "base_mb": max(r["base_mb"] for r in rs),
               "centers_dtype": rs[0]["centers_dtype"], "inertia": rs[0]["inertia"]}
        row["fit_mb"] = row["peak_mb"] - row["with_data_mb"]
        row["data_and_fit_mb"] = row["peak_mb"] - row["base_mb"]
        result[f"{kind}_{dtype}"] = row
        print(f"{kind:6s} {dtype}: {row['seconds']:.2f} s, peak RSS {row['peak_mb']:.0f} MB: "
              f"{row['base_mb']:.0f} before the data, {row['data_and_fit_mb']:.0f} for the "
              f"data and the fit ({row['fit_mb']:.0f} for the fit); centers "
              f"{row['centers_dtype']}")
    ratio = (result["tensor_float32"]["data_and_fit_mb"]
             / result["tensor_float64"]["data_and_fit_mb"])
    data = args.n * args.d * 4 / 2 ** 20
    print(f"data and fit, float32 / float64 (tensors): {ratio:.2f}; the float32 data is "
          f"{data:.0f} MB, the float64 {2 * data:.0f} MB")
    result["peak_ratio_float32_to_float64"] = ratio
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
