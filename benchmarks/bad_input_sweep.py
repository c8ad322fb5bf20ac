"""Count what bad input does to every public estimator (the outcome classes).

    python -m benchmarks.bad_input_sweep --examples 200      # from the repository root

Three parts, tallied per estimator and written to ``benchmarks/results/bad_input.json``:

- generated data: the strategy of ``tests/test_bad_input.py`` (non-finite, overflowing,
  subnormal and ordinary values, degenerate shapes, dtypes, bad weights and targets);
- kinds: each listed kind of input (meta, sparse, float8 and complex tensors; zero rows
  or zero features through NumPy, CSR, tensors and Dask; subnormal and huge magnitudes;
  unsorted CSR with duplicate entries);
- size parameters: each parameter that sizes a tensor set to 10^9 and 10^12, fitted in a
  child process whose address space is limited to 2 GiB above its start.

The outcomes that must be zero: silent non-finite outputs, raw exceptions (anything but a
ValueError or TypeError whose message names the problem), unclear errors, mutated inputs
and allocations above 2 GiB.
"""

import argparse
import collections
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings

from tests.test_bad_input import (
    CLEAR,
    ESTIMATORS,
    _container,
    _instance,
    _snapshot,
    _target,
    _unchanged,
    bad_data,
)

RESULTS = Path(__file__).parent / "results" / "bad_input.json"
MUST_BE_ZERO = ("SILENT NON-FINITE", "RAW EXCEPTION", "UNCLEAR ERROR", "MUTATED INPUT",
                "ALLOCATION ABOVE 2 GIB")
# the parameters that size a tensor (iteration counts cost time, not memory)
SIZES = ("n_components", "n_candidates", "n_samples", "n_neighbors", "batch_size",
         "n_clusters", "d_model", "n_heads", "n_layers", "max_features", "max_length")


def _small(cls):
    est = _instance(cls)
    for name, value in (("random_state", 0), ("n_clusters", 2), ("n_components", 8)):
        if name in est.get_params():
            est.set_params(**{name: value})
    if "max_epochs" in est.get_params():
        est.set_params(max_epochs=2, n_iter=5)
    return est


def outcome(est, X, y=None, weight=None):
    """The outcome class of fitting ``est`` on X and calling its predict-like methods."""
    before = _snapshot(X)
    kwargs = {} if weight is None else {"sample_weight": weight}
    result = "finite outputs"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fitted = est.fit(X, y, **kwargs) if y is not None else est.fit(X, **kwargs)
            for method in ("predict", "transform", "predict_proba"):
                if hasattr(fitted, method):
                    try:
                        out = np.asarray(getattr(fitted, method)(X))
                    except (ValueError, TypeError) as exc:
                        result = _error(exc, "clear error at predict")
                        continue
                    if out.dtype.kind in "fc" and not np.isfinite(out).all():
                        result = "SILENT NON-FINITE"
        except (ValueError, TypeError) as exc:
            result = _error(exc, "clear error at fit")
        except MemoryError:
            result = "ALLOCATION ABOVE 2 GIB"
        except Exception as exc:  # noqa: BLE001 (what the sweep counts)
            result = ("ALLOCATION ABOVE 2 GIB" if "allocate" in str(exc) else
                      "RAW EXCEPTION")
            print(f"    {type(est).__name__}: {type(exc).__name__}: {str(exc)[:120]}")
    if not _unchanged(before, X):
        result = "MUTATED INPUT"
    return result


def _error(exc, clear):
    if any(word in str(exc) for word in CLEAR):
        return clear
    print(f"    unclear: {str(exc)[:120]}")
    return "UNCLEAR ERROR"


def generated(cls, examples):
    """Outcomes of hypothesis-generated data (the bad-input test's strategy)."""
    est = _small(cls)
    if "max_epochs" in est.get_params():
        examples = max(1, examples // 4)
    counts = collections.Counter()

    @settings(max_examples=examples, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=bad_data(est))
    def run(data):
        counts[outcome(est, *data)] += 1

    run()
    return counts


def kinds(n=40, d=3):
    """``(name, X)`` for each listed kind of input."""
    import dask.array as da
    import torch

    X = np.random.default_rng(0).normal(size=(n, d))
    yield "meta tensor", torch.empty(n, d, device="meta")
    yield "sparse COO tensor", torch.from_numpy(X).to_sparse()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch calls its CSR support beta)
        yield "sparse CSR tensor", torch.from_numpy(X).to_sparse_csr()
    yield "float8 tensor", torch.from_numpy(X).to(torch.float8_e4m3fn)
    yield "bfloat16 tensor", torch.from_numpy(X).to(torch.bfloat16)
    yield "complex array", X.astype(np.complex128)
    for shape in ((0, d), (n, 0)):
        zero = np.zeros(shape)
        yield f"NumPy {shape}", zero
        yield f"CSR {shape}", sp.csr_matrix(zero)
        yield f"tensor {shape}", torch.zeros(shape)
        yield f"dask {shape}", da.zeros(shape, chunks=(max(shape[0] // 2, 1), max(d, 1)))
    yield "float32 subnormal", (X * 1e-40).astype(np.float32)
    yield "float64 subnormal", X * 1e-310
    yield "float32 huge", (X * 1e30).astype(np.float32)
    yield "float64 huge", X * 1e200
    yield "unsorted CSR with duplicates", _container(X, "CSR")


def by_kind(cls):
    counts, seen = collections.Counter(), {}
    for name, X in kinds():
        est = _small(cls)
        result = outcome(est, X, _target(est, X.shape[0]))
        counts[result] += 1
        seen[name] = result
    return counts, seen


_CHILD = """
import resource, sys, warnings
import numpy as np
from benchmarks.bad_input_sweep import _sized_fit
vm = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1])
resource.setrlimit(resource.RLIMIT_AS, (vm * 1024 + (2 << 30), resource.RLIM_INFINITY))
print(_sized_fit(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def _sized_fit(name, param, value):
    """In the child: the outcome of a small fit with ``param=value``."""
    import sktransformer

    cls = getattr(sktransformer, name)
    est = _small(cls).set_params(**{param: value})
    rng = np.random.default_rng(0)
    if cls().__sklearn_tags__().input_tags.string:
        return outcome(est, ["a b c d", "b c d e"] * 20)
    if name.startswith("Sequence"):
        return outcome(est, rng.integers(1, 20, size=(40, 12)), np.arange(40) % 2)
    X = rng.normal(size=(40, 3))
    return outcome(est, X, _target(est, 40))


def by_size(cls, root):
    counts, seen = collections.Counter(), {}
    for param in SIZES:
        if param not in cls().get_params():
            continue
        for value in (10**9, 10**12):
            run = subprocess.run([sys.executable, "-c", _CHILD, cls.__name__, param,
                                  str(value)], cwd=root, capture_output=True, text=True,
                                 timeout=300)
            lines = run.stdout.strip().splitlines()
            result = (lines[-1] if lines and run.returncode == 0 else
                      "ALLOCATION ABOVE 2 GIB" if "MemoryError" in run.stderr else
                      "RAW EXCEPTION")
            counts[result] += 1
            seen[f"{param}={value}"] = result
    return counts, seen


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    args = parser.parse_args()
    import sktransformer
    from benchmarks._common import machine

    root = Path(__file__).resolve().parents[1]
    every = [getattr(sktransformer, name) for name in sktransformer.__all__
             if isinstance(getattr(sktransformer, name), type)
             and hasattr(getattr(sktransformer, name), "fit")]
    rows, details, total = [], [], collections.Counter()
    for cls in every:
        counts, cases = collections.Counter(), {}
        if cls in ESTIMATORS:
            counts.update(generated(cls, args.examples))
            kind_counts, cases["kinds"] = by_kind(cls)
            counts.update(kind_counts)
        size_counts, cases["sizes"] = by_size(cls, root)
        counts.update(size_counts)
        total.update(counts)
        rows.append({"estimator": cls.__name__, "tried": sum(counts.values()), **counts})
        details.append({"estimator": cls.__name__, **cases})
        print(f"{cls.__name__:28s} {sum(counts.values()):4d} tried: " +
              ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
    print(f"{'all':28s} {sum(total.values()):4d} tried: " +
          ", ".join(f"{k} {v}" for k, v in sorted(total.items())))
    bad = {k: total[k] for k in MUST_BE_ZERO}
    print("must be zero:", bad)
    failures = [{"estimator": d["estimator"], "case": case, "outcome": result}
                for d in details for part in ("kinds", "sizes")
                for case, result in d.get(part, {}).items() if result in MUST_BE_ZERO]
    RESULTS.write_text(json.dumps(
        {"machine": machine(), "examples": args.examples, "totals": dict(total),
         "must_be_zero": bad, "rows": rows, "failures": failures, "details": details},
        indent=1) + "\n")


if __name__ == "__main__":
    main()
