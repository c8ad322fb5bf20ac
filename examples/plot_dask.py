"""
Clustering a dask array, one block at a time
============================================

``TransformerKMeans.partial_fit`` is the online k-means update (each center attends to
its new members and to itself, weighted by the points it has already averaged), so
dask-ml's ``Incremental`` streams a dask array through it block by block, never holding
more than one block in memory. The searches of scikit-learn run on a Dask cluster through
joblib's Dask backend. Here a local cluster of threads (a real cluster is the same code
with its scheduler's address): the inertia of the streamed centers after each block,
against a fit on the whole array in memory.
"""

# %%
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from dask.distributed import Client, LocalCluster
from dask_ml.wrappers import Incremental
from sklearn.datasets import make_blobs

from sktransformer import TransformerKMeans

X, _ = make_blobs(20000, n_features=8, centers=6, cluster_std=1.5, random_state=0)
X_dask = da.from_array(X, chunks=2000)  # 10 blocks

with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                  dashboard_address=None) as cluster, Client(cluster):
    streamed = TransformerKMeans(6, random_state=0, device="cpu")
    inertias = []
    for block in X_dask.blocks:  # what Incremental does, one block at a time
        streamed.partial_fit(block.compute())
        inertias.append(streamed.inertia(X))
    incremental = Incremental(TransformerKMeans(6, random_state=0, device="cpu"),
                              shuffle_blocks=False)
    incremental.fit(X_dask)
    full = TransformerKMeans(6, random_state=0, device="cpu").fit(X)

incremental_inertia = incremental.estimator_.inertia(X)
print(f"inertia: streamed {inertias[-1]:.0f}, dask-ml Incremental "
      f"{incremental_inertia:.0f}, in memory {full.inertia_:.0f}")
# what the text says: one pass of streamed blocks ends near the fit in memory
assert inertias[-1] <= 1.1 * full.inertia_ and incremental_inertia <= 1.1 * full.inertia_
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(np.arange(1, len(inertias) + 1), inertias, "o-", label="partial_fit, block by block")
ax.axhline(full.inertia_, color="k", ls="--", label="fit on the whole array")
ax.set_xlabel("blocks seen (2,000 points each)")
ax.set_ylabel("inertia on all 20,000 points")
ax.legend()
fig.tight_layout()
plt.show()
