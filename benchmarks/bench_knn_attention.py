"""kNN attention: error against exact attention as k grows, and time / memory against n.

    python benchmarks/bench_knn_attention.py --study error
    python benchmarks/bench_knn_attention.py --study scale \
        --sizes 1024 4096 16384 32768 65536 262144 1000000 --exact-queries 65536 \
        --json benchmarks/results/knn_attention_scale.json

Error study (the paper's setting): n = 1000, d = 64, 10 heads, batch 1, Q, K, V ~ U[-B, B],
float64; mean absolute error of each estimator against exact softmax attention, for
k = 1, 2, 4, 8, 16, 32, 64 (the seed's claim: near zero once k >= n^(1/8), about 2.4).
The Gumbel estimator takes 64 draws, Rao-Blackwellized over the top-k; a query whose draws
would score more tail keys than it has keys (flat scores, tiny k) draws from its full row.

Scale study: one head, d = 64, k = 32, float32, Q, K, V ~ N(0, 1); each method in a fresh
process (peak RSS of the process, and its rise during the call, Q, K, V being allocated
before): kNN attention (truncated, exact top-k), kNN attention with the approximate index
(``IVFIndex``, faiss IVF with ``n_probe`` of ``sqrt(n)`` cells, ``--n-probe``; its
recall@32 against the exact top-k on 1024 queries), attention with the n x n matrix
materialized, and torch's scaled_dot_product_attention. Materialized attention is skipped
at sizes where its n x n matrix alone would exceed ``--max-matrix-gb``; it and SDPA are
skipped once they failed or took longer than ``--max-seconds`` at a smaller size (the next
takes about 4x longer).
``--exact-queries N`` runs the exact kNN at sizes above N on N evenly spaced queries
against all the keys, and scales the time by n / N (query blocks are independent, so the
time is linear in the queries): at n = 10^6 the full exact run is ~50 min on 2 cores.
"""

import argparse
import json
import subprocess
import sys
import time

import torch

from sktransformer.attention import IVFIndex, knn_attention, topk_keys
from sktransformer.utils import topk_available


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


def _run(method, q, k, v):
    with torch.no_grad():
        if method == "knn":
            return knn_attention(q, k, v, 32), None
        if method.startswith("ivf"):
            _, found = topk_keys(q, k, 32, index=IVFIndex(n_probe=int(method[3:])))
            return knn_attention(q, k, v, 32, index=_Found(found)), found
        if method == "materialized":
            return torch.softmax(q @ k.transpose(-1, -2) / 8.0, -1) @ v, None
        return torch.nn.functional.scaled_dot_product_attention(q, k, v), None


def child(method, n, exact_queries=None):
    g = torch.Generator().manual_seed(0)
    _run(method, *(torch.randn(1, 2048, 64, generator=g) for _ in range(3)))  # warm-up
    topk_available()  # (numba's merge for large exact searches: a once-per-process load)
    q, k, v = (torch.randn(1, n, 64, generator=g) for _ in range(3))
    scale = 1.0
    if method == "knn" and exact_queries and n > exact_queries:
        q, scale = q[:, :: n // exact_queries][:, :exact_queries], n / exact_queries
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _peak_mb()
    start = time.perf_counter()
    _, found = _run(method, q, k, v)
    row = {"seconds": (time.perf_counter() - start) * scale, "peak_mb": _peak_mb(),
           "extra_peak_mb": _peak_mb() - base}
    if scale != 1.0:
        row["note"] = f"{q.shape[-2]} of the queries, time x {scale:.1f}"
    if found is not None:
        sub = torch.linspace(0, n - 1, min(n, 1024)).long()
        exact = topk_keys(q[:, sub], k, 32)[1]
        hits = (found[:, sub].unsqueeze(-1) == exact.unsqueeze(-2)).any(-1)
        row["recall"] = float(hits.float().mean())
    print(json.dumps(row))


class _Found:
    """An index that returns a search already done (so that recall is measured on the
    timed search)."""

    def __init__(self, found):
        self.found = found

    def search(self, q, k, n_neighbors):
        return self.found


def scale_study(sizes, max_matrix_gb, max_seconds, exact_queries, n_probes):
    rows, slow = [], set()
    for n in sizes:
        for method in ("knn", *(f"ivf{p}" for p in n_probes), "materialized", "sdpa"):
            note = None
            if method == "materialized" and 4 * n * n / 2**30 > max_matrix_gb:
                note = "n x n matrix over the limit"
            elif method in slow:
                note = f"failed or took over {max_seconds} s at a smaller size"
            if note:
                rows.append({"n": n, "method": method, "seconds": None,
                             "extra_peak_mb": None, "note": note})
                continue
            cmd = [sys.executable, __file__, "--child", method, str(n)]
            if exact_queries:
                cmd += ["--exact-queries", str(exact_queries)]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode:
                rows.append({"n": n, "method": method, "seconds": None, "extra_peak_mb": None,
                             "note": (out.stderr.strip().splitlines() or ["killed"])[-1][:80]})
            else:
                rows.append({"n": n, "method": method,
                             **json.loads(out.stdout.strip().splitlines()[-1])})
            r = rows[-1]
            quadratic = method in ("materialized", "sdpa")
            if quadratic and (r["seconds"] is None or r["seconds"] > max_seconds):
                slow.add(method)
            print(f"n={n} {method}: {r['seconds']} s, peak {r.get('peak_mb')} MB "
                  f"(+{r['extra_peak_mb']} MB), "
                  f"recall {r.get('recall', '-')} {r.get('note') or ''}", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=["error", "scale"], default="error")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--max-matrix-gb", type=float, default=8.0)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--exact-queries", type=int)
    parser.add_argument("--n-probe", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--json")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.exact_queries)
        return
    if args.study == "error":
        rows = error_study()
    else:
        rows = scale_study(args.sizes, args.max_matrix_gb, args.max_seconds,
                           args.exact_queries, args.n_probe)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
