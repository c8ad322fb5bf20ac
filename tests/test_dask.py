"""Scale-out on Dask: full Lloyd on the workers, a grid search on real worker processes, and
streaming with partial_fit.

The cluster is a dask.distributed LocalCluster of 2 worker processes on the loopback
interface, started and closed by the module fixture.
"""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris, make_blobs
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktransformer import TransformerKMeans, TrimmedTransformerKMeans

distributed = pytest.importorskip("distributed", reason="dask.distributed is in the test extra")
da = pytest.importorskip("dask.array", reason="dask is in the test extra")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            client.wait_for_workers(2, timeout=60)
            yield client


def test_grid_search_on_the_dask_backend_finds_the_same_best_params(client):
    from joblib import parallel_backend

    X, y = load_iris(return_X_y=True)
    grid = {"transformerkmeans__n_clusters": [2, 3, 4, 5],
            "transformerkmeans__temperature": [None, 0.5, 2.0]}

    def search():
        pipe = make_pipeline(StandardScaler(),
                             TransformerKMeans(random_state=0, device="cpu"))
        return GridSearchCV(pipe, grid, scoring="adjusted_rand_score", cv=3, n_jobs=-1)

    local = search().fit(X, y)
    with distributed.get_task_stream(client) as tasks, parallel_backend("dask"):
        remote = search().fit(X, y)
    assert remote.best_params_ == local.best_params_
    np.testing.assert_allclose(remote.cv_results_["mean_test_score"],
                               local.cv_results_["mean_test_score"])
    # the fits ran as tasks on both worker processes, each with one torch thread (the
    # nanny's OMP_NUM_THREADS=1 for one thread per worker): no oversubscription
    assert len(tasks.data) >= 12
    assert len({t["worker"] for t in tasks.data}) == 2
    assert set(client.run(torch.get_num_threads).values()) == {1}


def test_incremental_fit_of_a_chunked_array_matches_the_in_memory_fit(client):
    from dask_ml.wrappers import Incremental

    X, _ = make_blobs(20000, 8, centers=10, cluster_std=1.0, random_state=0)
    full = TransformerKMeans(10, n_init=5, random_state=0, device="cpu").fit(X)
    dX = da.from_array(X, chunks=(2000, 8))
    assert dX.numblocks[0] == 10  # larger than one block
    inc = Incremental(TransformerKMeans(10, random_state=0, device="cpu"), shuffle_blocks=False)
    inc.fit(dX)
    model = inc.estimator_
    assert model.n_steps_ == 10
    inertia = model.inertia(X)
    assert abs(inertia / full.inertia_ - 1) < 0.05


@pytest.mark.parametrize("make", [
    lambda init: TransformerKMeans(8, init=init, device="cpu"),
    lambda init: TrimmedTransformerKMeans(8, init=init, trim=0.05, device="cpu"),
], ids=["kmeans", "trimmed"])
def test_full_lloyd_on_the_workers_equals_the_in_memory_fit(client, make):
    X, _ = make_blobs(30000, 6, centers=8, cluster_std=2.0, random_state=0)
    w = np.random.default_rng(0).uniform(0.5, 1.5, len(X))
    init = X[:8].copy()
    local = make(init).fit(X, sample_weight=w)
    dX = da.from_array(X, chunks=(4000, 6)).persist()
    dw = da.from_array(w, chunks=4000).persist()
    with distributed.get_task_stream(client) as tasks:
        remote = make(init).fit(dX, sample_weight=dw)
    np.testing.assert_allclose(remote.cluster_centers_, local.cluster_centers_, rtol=0,
                               atol=1e-10)
    assert remote.n_iter_ == local.n_iter_
    assert remote.inertia_ == pytest.approx(local.inertia_, rel=1e-12)
    # labels stay on the workers, a lazy dask array, until asked for
    assert isinstance(remote.labels_, da.Array)
    np.testing.assert_array_equal(remote.labels_.compute(), local.labels_)
    assert len({t["worker"] for t in tasks.data}) == 2
    np.testing.assert_array_equal(remote.predict(dX).compute(), local.predict(X))
