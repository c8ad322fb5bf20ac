"""benchmarks/gpu_check.py, the one command for a machine with a GPU, runs end to end on the
CPU at tiny sizes (so it has not rotted when a GPU is lent)."""

import json
import math
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


def test_gpu_check_runs_on_the_cpu_at_tiny_sizes(tmp_path):
    out = tmp_path / "check.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--small", "--device", "cpu", "--out",
                          str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert set(result) == {"device", "lloyd", "attention"}  # tests are skipped at --small
    assert result["device"]["matmul_tflops"] > 0
    lloyd = result["lloyd"]
    assert "error" not in lloyd and lloyd["n_iter"] == 1 + lloyd["iters"]
    # at tiny sizes the difference of two fits' times is noise: finite is all that holds
    assert math.isfinite(lloyd["seconds_per_iter"]) and lloyd["floor_seconds"] > 0
    methods = {(r["length"], r["method"]) for r in result["attention"] if "seconds" in r}
    assert methods == {(n, m) for n in (256, 512) for m in ("knn", "kernel", "sdpa")}


def test_gpu_check_without_cuda_says_how_to_check_the_script():
    run = subprocess.run([sys.executable, str(SCRIPT), "--out", "unused.json"],
                         capture_output=True, text=True, timeout=120)
    import torch

    if torch.cuda.is_available():  # a GPU machine runs the real check instead
        return
    assert run.returncode != 0 and "--device cpu --small" in run.stderr
