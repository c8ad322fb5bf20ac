"""The project's pages: the benchmarks page is what its script writes, and the pages speak
of the project only."""

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _report():
    spec = importlib.util.spec_from_file_location("report", ROOT / "benchmarks" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_page_is_the_reports_output():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert page == _report().render(), (
        "docs/benchmarks.md differs from what benchmarks/report.py writes: run "
        "python benchmarks/report.py --out docs/benchmarks.md")


def test_every_result_file_has_a_section():
    report = _report()
    named = {name for section in report.SECTIONS for name in section["files"]}
    on_disk = {p.name for p in (ROOT / "benchmarks" / "results").glob("*.json")}
    # the training history of the shipped layer is the weights' record, not a table
    assert on_disk - named == {"learned_d32_k10.history.json"}
    assert named <= on_disk


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_the_pages_speak_of_the_project_only():
    try:
        files = subprocess.run(
            ["git", "ls-files", "README.md", "docs", "sktransformer", "examples",
             "benchmarks"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    words = re.compile(r"\bsessions?\b|\bissue [0-9]+|\bloans?\b", re.IGNORECASE)
    found = [f"{name}: {m.group(0)}" for name in files
             if name.endswith((".md", ".rst", ".py", ".txt"))
             for m in words.finditer((ROOT / name).read_text(errors="ignore"))]
    assert not found
