"""One command for a machine with a GPU: the CUDA tests and the GPU benchmarks, as JSON.

    python benchmarks/gpu_check.py --out gpu_check.json
    python benchmarks/gpu_check.py --small --device cpu --out /tmp/check.json  # the script itself

Sections (each one runs even when an earlier one failed; a failure is recorded with the end
of its traceback):

1. ``device``: the GPU, its memory, torch and CUDA versions, and the measured float32 matmul
   rate (TF32 off; 8192 x 8192 matrices, best of 5).
2. ``tests``: ``pytest -k cuda`` (every test parametrized over devices runs its CUDA case;
   the suite's DEVICES list holds ``"cuda"`` when CUDA is present): the return code, the
   summary line and the last lines of the output.
3. ``lloyd``: ``TransformerKMeans`` from fixed initial centers on Gaussian data (default
   n = 10^7, d = 128, k = 1024, float32): seconds per iteration from the difference of
   two fits after a warm-up (1 and 11 iterations, tol = 0, best of 3 each) against the
   floor ``2 n k d`` flops at the measured matmul rate; faiss-gpu's ``Kmeans`` on the
   same data and iterations when ``faiss`` has GPUs.
4. ``attention``: one ``KernelAttention`` block's training step (forward and backward;
   d_model 64, 2 heads, batch 1) at growing lengths: kNN attention (k = 32, exact top-k
   gradient), kernel attention and softmax attention (SDPA); seconds (best of 3 after a
   warm-up) and peak device memory. A method is dropped at longer lengths once it fails.

The data go to the estimator as numpy arrays: estimators do not take CUDA tensors yet
(issue 16).
"""

import argparse
import json
import subprocess
import sys
import time
import traceback

import numpy as np
import torch


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best(fn, device, repeats):
    fn()  # warm-up
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def device_info(device, n):
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(n, n, generator=g, device=device) for _ in range(2))
    seconds = _best(lambda: a @ b, device, 5)
    info = {"device": str(device), "torch": torch.__version__,
            "cuda": torch.version.cuda, "matmul_tflops": 2 * n ** 3 / seconds / 1e12}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, memory_gb=props.total_memory / 2 ** 30)
    return info


def cuda_tests():
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-k", "cuda", "-p",
                          "no:cacheprovider"], capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    return {"returncode": out.returncode, "summary": lines[-1] if lines else "",
            "tail": lines[-15:]}


def lloyd(device, n, d, k, iters, tflops):
    from sktransformer import TransformerKMeans

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d), dtype=np.float32)
    init = X[rng.choice(n, k, replace=False)]
    row = {"n": n, "d": d, "k": k, "iters": iters}

    def fit(max_iter):
        km = TransformerKMeans(k, init=init, n_init=1, max_iter=max_iter, tol=0.0,
                               device=str(device), random_state=0)
        start = time.perf_counter()
        km.fit(X)
        _sync(device)
        return time.perf_counter() - start, km

    fit(1)  # warm-up: the first fit pays for kernels' first launches
    t1 = min(fit(1)[0] for _ in range(3))
    t2, km = min((fit(1 + iters) for _ in range(3)), key=lambda r: r[0])
    per_iter = (t2 - t1) / iters
    floor = 2 * n * k * d / (tflops * 1e12)
    row.update(seconds_per_iter=per_iter, floor_seconds=floor, over_floor=per_iter / floor,
               inertia=float(km.inertia_), n_iter=int(km.n_iter_))
    try:
        import faiss

        if faiss.get_num_gpus() > 0:
            fk = faiss.Kmeans(d, k, niter=1, gpu=True, seed=0, max_points_per_centroid=n)
            start = time.perf_counter()
            fk.train(X, init_centroids=init)
            f1 = time.perf_counter() - start
            fk = faiss.Kmeans(d, k, niter=1 + iters, gpu=True, seed=0,
                              max_points_per_centroid=n)
            start = time.perf_counter()
            fk.train(X, init_centroids=init)
            row["faiss_seconds_per_iter"] = (time.perf_counter() - start - f1) / iters
        else:
            row["faiss"] = "faiss has no GPU here"
    except ImportError:
        row["faiss"] = "faiss not installed"
    return row


def attention(device, lengths):
    from sktransformer.sequence import KernelAttention

    rows, dropped = [], set()
    for length in lengths:
        for method in ("knn", "kernel", "sdpa"):
            row = {"length": length, "method": method}
            if method in dropped:
                rows.append({**row, "note": "dropped after a failure"})
                continue
            try:
                block = KernelAttention(64, 2, 64, attention={"sdpa": "softmax"}.get(
                    method, method), n_neighbors=32,
                    generator=torch.Generator().manual_seed(0)).to(device)
                g = torch.Generator(device=device).manual_seed(1)
                x = torch.randn(1, length, 64, generator=g, device=device)

                def step():
                    block(x.detach().requires_grad_()).square().mean().backward()

                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                row["seconds"] = _best(step, device, 3)
                if device.type == "cuda":
                    row["peak_mb"] = torch.cuda.max_memory_allocated(device) / 2 ** 20
            except Exception as exc:  # out of memory, or a bug: recorded, not fatal
                dropped.add(method)
                row["error"] = repr(exc)[:300]
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true",
                        help="tiny sizes and no tests: to check the script itself")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("No CUDA device: run with --device cpu --small to check the script.")
    small = args.small
    result = {}
    sections = [
        ("device", lambda: device_info(device, 256 if small else 8192)),
        ("tests", None if small else cuda_tests),
        ("lloyd", lambda: lloyd(device, *((2000, 8, 16, 2) if small
                                          else (10 ** 7, 128, 1024, 10)),
                                result["device"]["matmul_tflops"])),
        ("attention", lambda: attention(device, [256, 512] if small
                                        else [4096, 16384, 65536, 262144])),
    ]
    for name, run in sections:
        if run is None:
            continue
        try:
            result[name] = run()
        except Exception:
            result[name] = {"error": traceback.format_exc()[-2000:]}
        print(name, json.dumps(result[name])[:500], flush=True)
        with open(args.out, "w") as f:  # written after every section
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
