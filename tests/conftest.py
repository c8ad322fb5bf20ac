import os

# scikit-learn's array-API checks (run by parametrize_with_checks for the estimators that
# declare array_api_support) need scipy's array-API mode, read when scipy is imported
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np
import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def jittered(X, scale=1e-6, seed=0):
    """X plus tiny noise: integer-valued data sets have exact distance ties, which each
    implementation breaks by its own rounding, so label-for-label comparisons need none."""
    return X + np.random.default_rng(seed).normal(scale=scale * (np.abs(X).max() + 1), size=X.shape)


def fits_with_and_without(loops, make, dtype, monkeypatch):
    """Two fits of ``make()`` on blobs with planted outliers: with a module's compiled loops
    (``loops``, its ``CompiledLoops``: one function or a tuple), then without them, every
    fit counted large enough for the compiled paths; asserts that the loops ran in the
    first fit only."""
    import sktransformer.cluster._compiled._scatter as scatter

    monkeypatch.setattr(scatter, "COMPILED_MIN_ELEMENTS", 0)  # every fit is large
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(size=(3000, 4)), rng.normal(scale=30, size=(60, 4))])
    calls, loop = [], loops.get()

    def counted(fn):
        return lambda *a: calls.append(1) or fn(*a)

    monkeypatch.setattr(loops, "_loops", tuple(map(counted, loop)) if isinstance(loop, tuple)
                        else counted(loop))
    fits = []
    for enabled in (True, False):
        monkeypatch.setattr(loops, "enabled", enabled)
        fits.append(make().fit(X.astype(dtype)))
        assert bool(calls) == enabled  # the loop ran, then not at all
        calls.clear()
    return fits
