"""Parallel searches do not oversubscribe the CPU: inside joblib's worker processes, torch
(and so our chunk-parallel threads, one per torch thread) gets its share of the cores."""

import os

import numpy as np
import torch
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV

from sktransformer import TransformerKMeans


def _torch_threads(estimator, X, y=None):
    """A 'score' that reports the worker's torch thread count after the fit."""
    return float(torch.get_num_threads())


def test_each_joblib_worker_gets_its_share_of_the_cores():
    X, _ = load_iris(return_X_y=True)
    before = torch.get_num_threads()
    search = GridSearchCV(TransformerKMeans(random_state=0, device="cpu"),
                          {"n_clusters": [2, 3, 4, 5]}, scoring=_torch_threads, n_jobs=2,
                          cv=2).fit(X)
    share = max(1, (os.cpu_count() or 1) // 2)
    assert np.all(search.cv_results_["mean_test_score"] <= share)
    assert torch.get_num_threads() == before  # nothing changed in the parent


def test_a_fit_restores_the_thread_count():
    X, _ = load_iris(return_X_y=True)
    before = torch.get_num_threads()
    TransformerKMeans(3, random_state=0, device="cpu", batch_size=16).fit(X)
    assert torch.get_num_threads() == before


def test_threads_fit_at_once_under_numbas_workqueue_layer():
    # that layer aborts the process when two threads launch parallel loops at once: the
    # loops of threads other than the main one run serially there
    import os
    import subprocess
    import sys

    script = """
import numpy as np
from concurrent.futures import ThreadPoolExecutor
from sktransformer import TransformerKMeans
X = np.random.default_rng(0).normal(size=(40000, 16))
fit = lambda s: TransformerKMeans(8, random_state=s).fit(X).inertia_
with ThreadPoolExecutor(2) as pool:
    together = list(pool.map(fit, range(4)))
alone = [fit(s) for s in range(4)]
import numba
assert numba.threading_layer() == "workqueue"
print(np.allclose(together, alone, rtol=1e-9))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NUMBA_THREADING_LAYER": "workqueue"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "True"
