"""Under ``python -W error`` every public estimator fits and predicts on ordinary data: no
warning from the package or its dependencies (numba's compiler included, with a cold
cache in the slow test). Each run is a subprocess, so that the process's filters are the
command line's."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import inspect

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.datasets import load_iris

import sktransformer

X, y = load_iris(return_X_y=True)
tokens = np.random.default_rng(0).integers(1, 50, size=(60, 16))
texts = [" ".join(f"w{t}" for t in row) for row in tokens]
names = []
for name in sktransformer.__all__:
    cls = getattr(sktransformer, name)
    if not (inspect.isclass(cls) and issubclass(cls, BaseEstimator)):
        continue
    est = cls()
    params = est.get_params()
    est.set_params(**{k: v for k, v in dict(device="cpu", n_iter=20, max_epochs=3,
                                            random_state=0).items() if k in params})
    if name == "SequenceVectorizer":
        data, target = texts, np.arange(60) % 2
    elif name.startswith("Sequence"):
        data, target = tokens, np.arange(60) % 2
    else:
        data, target = X, (X[:, 0] if issubclass(cls, RegressorMixin) else y)
    if issubclass(cls, (ClassifierMixin, RegressorMixin)):
        est.fit(data, target).predict(data)
    elif hasattr(est, "predict"):
        est.fit(data).predict(data)
        est.score(data)
    else:
        est.fit(data, target).transform(data)
    names.append(name)
# the compiled paths beyond the defaults: CSR, Hamerly's bounds on many rows
km = sktransformer.TransformerKMeans(3, random_state=0)
km.fit(sp.csr_matrix(X)).predict(sp.csr_matrix(X))
big = np.random.default_rng(0).normal(size=(20000, 8))
sktransformer.TransformerKMeans(8, algorithm="hamerly", random_state=0).fit(big)
print(len(names))
"""


def _run(env=None):
    done = subprocess.run([sys.executable, "-W", "error", "-c", SCRIPT], cwd=ROOT,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) >= 10  # (every public estimator ran)


def test_every_estimator_fits_and_predicts_under_warnings_as_errors():
    _run()


@pytest.mark.slow
def test_the_first_fit_with_a_cold_cache_is_quiet(tmp_path):
    _run({"NUMBA_CACHE_DIR": str(tmp_path)})  # (numba compiles every loop again)
