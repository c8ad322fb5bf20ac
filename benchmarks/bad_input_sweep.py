"""Count what generated bad input does to every public estimator (the outcome classes).

    python -m benchmarks.bad_input_sweep --examples 200      # from the repository root

Uses the strategy of ``tests/test_bad_input.py`` (run from the repository root) and tallies,
per estimator: a clear error at fit; a fit whose outputs are all finite; a fit whose
predict/transform is a clear error; and silent non-finite outputs, which must be zero.
"""

import argparse
import collections
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings

from tests.test_bad_input import CLEAR, ESTIMATORS, _instance, bad_data


def sweep(cls, examples):
    est = _instance(cls)
    for name, value in (("random_state", 0), ("n_clusters", 2), ("n_components", 8)):
        if name in est.get_params():
            est.set_params(**{name: value})
    if "max_epochs" in est.get_params():
        est.set_params(max_epochs=2, n_iter=5)
        examples = max(1, examples // 4)
    counts = collections.Counter()

    @settings(max_examples=examples, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=bad_data(est))
    def run(data):
        X, y, weight = data
        kwargs = {} if weight is None else {"sample_weight": weight}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fitted = est.fit(X, y, **kwargs) if y is not None else est.fit(X, **kwargs)
            except (ValueError, TypeError) as exc:
                counts["clear error at fit" if any(w in str(exc) for w in CLEAR)
                       else "unclear error at fit"] += 1
                return
            outcome = "finite outputs"
            for method in ("predict", "transform", "predict_proba"):
                if hasattr(fitted, method):
                    try:
                        out = np.asarray(getattr(fitted, method)(X))
                    except (ValueError, TypeError):
                        outcome = "clear error at predict"
                        continue
                    if out.dtype.kind == "f" and not np.isfinite(out).all():
                        outcome = "SILENT NON-FINITE"
            counts[outcome] += 1

    run()
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    args = parser.parse_args()
    total = collections.Counter()
    for cls in ESTIMATORS:
        counts = sweep(cls, args.examples)
        total.update(counts)
        print(f"{cls.__name__:28s} {sum(counts.values()):4d} tried: " +
              ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
    print(f"{'all':28s} {sum(total.values()):4d} tried: " +
          ", ".join(f"{k} {v}" for k, v in sorted(total.items())))


if __name__ == "__main__":
    main()
