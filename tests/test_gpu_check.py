"""benchmarks/gpu_check.py, the one command for a machine with a GPU, runs end to end on the
CPU at tiny sizes (so it has not rotted when a GPU is lent)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


def test_gpu_check_runs_on_the_cpu_at_tiny_sizes(tmp_path):
    out = tmp_path / "check.json"
    summary = tmp_path / "gpu_peers.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--small", "--device", "cpu", "--out",
                          str(out), "--summary", str(summary)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    figures = json.loads(summary.read_text())  # (the result file's, from the sections)
    assert figures["device"] == "cpu" and figures["fast_s_per_iter"] is None
    assert figures["exact_s_per_iter"] == result["lloyd"]["seconds_per_iter"]
    assert figures["fp32_floor_s_per_iter"] == result["lloyd"]["floor_seconds"]
    assert [v["variant"] for v in figures["variants"]] == [
        r["variant"] for r in result["variants"]]
    assert all(v["busy_fraction"] > 0 for v in figures["variants"])
    # tests are skipped at --small
    assert set(result) == {"device", "lloyd", "variants", "attention", "fused", "peers",
                           "profile", "variant_profiles"}
    # (the fused kernel runs on a CPU only under Triton's interpreter, not asked for here)
    assert result["fused"] == {"available": False}
    assert result["device"]["matmul_tflops"] > 0
    lloyd = result["lloyd"]
    assert "error" not in lloyd and lloyd["n_iter"] == 1 + lloyd["iters"]
    # at tiny sizes the difference of two fits' times is noise: finite is all that holds
    assert math.isfinite(lloyd["seconds_per_iter"]) and lloyd["floor_seconds"] > 0
    assert set(lloyd["tiles"]) >= {"default", "cpu_tile"} and "sklearn_cpu" in lloyd
    variants = result["variants"]
    assert [r["variant"] for r in variants][0] == "hard" and len(variants) == 7
    assert all("error" not in r and math.isfinite(r["ms_per_layer"]) for r in variants)
    peers = result["peers"]  # (each timed, or its error named: not installed in CI)
    assert math.isfinite(peers["ours_s_per_iter"])
    assert set(peers["peers_s_per_iter"]) | set(peers["errors"]) == {
        "fastkmeans", "fast-pytorch-kmeans"}
    assert all(math.isfinite(s) for s in peers["peers_s_per_iter"].values())
    top = result["profile"]["top"]
    assert top and all(e["ms"] >= 0 and e["calls"] > 0 for e in top)
    assert result["profile"]["fit_seconds"] > 0 and result["profile"]["busy_seconds"] > 0
    profiles = result["variant_profiles"]
    assert [r["variant"] for r in profiles] == [r["variant"] for r in variants]
    assert all("error" not in r and r["top"] and r["busy_seconds"] > 0 for r in profiles)
    methods = {(r["length"], r["method"]) for r in result["attention"] if "seconds" in r}
    assert methods == {(n, m) for n in (256, 512) for m in ("knn", "kernel", "sdpa")}


@pytest.mark.skipif(torch.cuda.is_available(),
                    reason="with CUDA the script runs the whole check (minutes), not this")
def test_gpu_check_without_cuda_says_how_to_check_the_script():
    run = subprocess.run([sys.executable, str(SCRIPT), "--out", "unused.json"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "--device cpu --small" in run.stderr


def test_sections_run_in_the_order_given_and_unknown_ones_are_refused(tmp_path):
    out = tmp_path / "check.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--small", "--device", "cpu", "--out",
                          str(out), "--sections", "profile,device"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert list(json.loads(out.read_text())) == ["profile", "device"]
    run = subprocess.run([sys.executable, str(SCRIPT), "--small", "--device", "cpu", "--out",
                          str(out), "--sections", "device,bogus"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and "bogus" in run.stderr


def test_the_whole_suite_section_names_failed_tests_with_and_without_xdist():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from gpu_check import _tests_with
    finally:
        sys.path.pop(0)
    lines = ["[gw3] [ 12%] PASSED tests/a.py::test_one[cuda] ",
             "[gw0] [ 13%] FAILED tests/a.py::test_two[cuda-float32] ",
             "tests/b.py::test_three PASSED                       [ 50%]",
             "tests/b.py::test_four ERROR                         [ 60%]",
             "FAILED tests/a.py::test_two[cuda-float32] - AssertionError: ...",
             "2 failed, 2 passed in 1.0s"]
    assert _tests_with(lines, "PASSED") == ["tests/a.py::test_one[cuda]",
                                            "tests/b.py::test_three"]
    assert _tests_with(lines, "FAILED", "ERROR") == ["tests/a.py::test_two[cuda-float32]",
                                                     "tests/b.py::test_four"]
