"""kNN attention: error against exact attention as k grows, and time / memory against n.

    python benchmarks/bench_knn_attention.py --study error
    python benchmarks/bench_knn_attention.py --study scale --sizes 1024 4096 16384 65536

Error study (the paper's setting): n = 1000, d = 64, 10 heads, batch 1, Q, K, V ~ U[-B, B],
float64; mean absolute error of each estimator against exact softmax attention, for
k = 1, 2, 4, 8, 16, 32, 64 (the seed's claim: near zero once k >= n^(1/8), about 2.4).
The Gumbel estimator (64 draws; its error is Monte Carlo, ~std(v)/8) is run from k = 8:
with flat scores and tiny k nearly every tail key is a candidate and a draw costs O(n).

Scale study: one head, d = 64, k = 32, float32, Q, K, V ~ N(0, 1); each method in a fresh
process (peak RSS rise during the call): kNN attention (truncated), attention with the
n x n matrix materialized, and torch's scaled_dot_product_attention. A method is skipped
at sizes where its n x n matrix alone would exceed ``--max-matrix-gb``.
"""

import argparse
import json
import subprocess
import sys
import time

import torch

from sktransformer.attention import knn_attention


def error_study(bounds=(1.0, 4.0), ks=(1, 2, 4, 8, 16, 32, 64), n=1000, d=64, heads=10):
    rows = []
    for B in bounds:
        g = torch.Generator().manual_seed(0)
        q, k, v = [(torch.rand(1, heads, n, d, generator=g, dtype=torch.float64) * 2 - 1) * B
                   for _ in range(3)]
        exact = torch.softmax(q @ k.transpose(-1, -2) / d**0.5, -1) @ v
        for kk in ks:
            row = {"B": B, "k": kk}
            for est in ("truncated", "tail", "gumbel"):
                if est == "gumbel" and kk < 8:
                    # flat scores and tiny k: nearly every tail key is a candidate, O(n^2 S)
                    row[est] = float("nan")
                    continue
                out = knn_attention(q, k, v, kk, estimator=est, n_samples=64,
                                    generator=torch.Generator().manual_seed(1))
                row[est] = float((out - exact).abs().mean())
            rows.append(row)
            print(f"B={B} k={kk}: " + ", ".join(f"{e} {row[e]:.4f}" for e in
                                               ("truncated", "tail", "gumbel")), flush=True)
    return rows


def _peak_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM"))


def child(method, n):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, n, 64) for _ in range(3))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _peak_mb()
    start = time.perf_counter()
    with torch.no_grad():
        if method == "knn":
            knn_attention(q, k, v, 32)
        elif method == "materialized":
            torch.softmax(q @ k.transpose(-1, -2) / 8.0, -1) @ v
        else:
            torch.nn.functional.scaled_dot_product_attention(q, k, v)
    print(json.dumps({"seconds": time.perf_counter() - start, "extra_peak_mb": _peak_mb() - base}))


def scale_study(sizes, max_matrix_gb):
    rows = []
    for n in sizes:
        for method in ("knn", "materialized", "sdpa"):
            if method == "materialized" and 4 * n * n / 2**30 > max_matrix_gb:
                rows.append({"n": n, "method": method, "seconds": None,
                             "extra_peak_mb": None, "note": "n x n matrix over the limit"})
                continue
            out = subprocess.run([sys.executable, __file__, "--child", method, str(n)],
                                 capture_output=True, text=True)
            if out.returncode:
                rows.append({"n": n, "method": method, "seconds": None, "extra_peak_mb": None,
                             "note": out.stderr.strip().splitlines()[-1][:80]})
            else:
                rows.append({"n": n, "method": method,
                             **json.loads(out.stdout.strip().splitlines()[-1])})
            r = rows[-1]
            print(f"n={n} {method}: {r.get('seconds')} s, {r.get('extra_peak_mb')} MB "
                  f"{r.get('note', '')}", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=["error", "scale"], default="error")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--max-matrix-gb", type=float, default=8.0)
    parser.add_argument("--json")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    rows = error_study() if args.study == "error" else scale_study(args.sizes,
                                                                    args.max_matrix_gb)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
