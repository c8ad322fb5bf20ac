"""
K-means as a transformer: the circuit's weights and its layers
===============================================================

One layer of the k-means transformer is one Lloyd iteration. This example shows the
paper's fixed ``Q, K, V`` matrices of the four attention blocks, then runs the layers on
2-d blobs, hard (arg-max attention) and soft (a finite softmax temperature), from the same
initial centers.
"""

# %%
# The circuit's weights: twelve (d + k) x (d + k) block selections
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import make_blobs

from sktransformer import KMeansCircuit, TransformerKMeans

circuit = KMeansCircuit(n_features=2, n_clusters=4)
fig, axes = plt.subplots(4, 3, figsize=(6, 8))
for row, (block, mats) in zip(axes, circuit.blocks.items()):
    for ax, (name, mat) in zip(row, mats.items()):
        ax.imshow(mat.numpy(), cmap="coolwarm", vmin=-1, vmax=1)
        ax.set_title(f"{block}: {name}", fontsize=8)
        ax.set_xticks([]), ax.set_yticks([])
fig.suptitle("Q, K, V of the four blocks (x slots first, then the one-hot y slots)")
fig.tight_layout()

# %%
# Layer by layer: the centers move as Lloyd's would (hard) or as soft k-means' (soft)
X, _ = make_blobs(600, centers=4, cluster_std=1.2, random_state=2)
init = X[[0, 1, 2, 3]]
fig, axes = plt.subplots(1, 2, figsize=(10, 4.5), sharex=True, sharey=True)
for ax, temperature in zip(axes, [None, 2.0]):
    path = [init]
    for n_layers in range(1, 8):
        km = TransformerKMeans(4, temperature=temperature, init=init, max_iter=n_layers, tol=0,
                               device="cpu").fit(X)
        path.append(km.cluster_centers_)
    path = np.stack(path)
    ax.scatter(*X.T, c=km.labels_, s=6, cmap="tab10", alpha=0.5)
    for j in range(4):
        ax.plot(*path[:, j].T, "k.-", lw=1)
    ax.plot(*path[-1].T, "r*", ms=14)
    ax.set_title("hard (arg-max attention)" if temperature is None
                 else f"soft, temperature={temperature}")
fig.suptitle("Centers after each layer, from the same four initial points")

# %%
# The token-level circuit and the estimator agree layer for layer
centers, labels = circuit(torch.from_numpy(X), torch.from_numpy(init), n_layers=7)
hard = TransformerKMeans(4, init=init, max_iter=7, tol=0, device="cpu").fit(X)
print("max |circuit - estimator| after 7 layers:",
      float(np.abs(centers.numpy() - hard.cluster_centers_).max()))
plt.show()
