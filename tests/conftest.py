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
