"""
A clustering algorithm learned from data: the trained layer against Lloyd
=========================================================================

The k-means transformer layer with every ``Q, K, V`` learned (the paper's learned layer),
trained on Gaussian-mixture tasks (d = 32, k = 10) by ``LayerTrainer`` (a search over the
circuit's temperatures, then Adam on an unrolled loss) and shipped with the package, is
applied 20 times to unseen tasks from the same distribution, starting from the same
initial centers as Lloyd's algorithm. The plot is the mean log k-means objective after each
layer: the soft layer is slower than Lloyd for two steps, then passes it and ends in better
optima. ``benchmarks/reproduce_learned_kmeans.py`` runs the full study (320 tasks, k-means++
init, other n and noise families, the ablation without the one-hot scratch space).
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

from sktransformer import TransformerKMeans
from sktransformer.cluster import LearnedKMeansLayer
from sktransformer.cluster._learned import SHIPPED
from sktransformer.cluster._train import evaluate
from sktransformer.datasets import make_gmm_tasks

X, _ = make_gmm_tasks(64, n_samples=512, n_features=32, n_clusters=10, random_state=2024)
X = torch.from_numpy(X)
layer = LearnedKMeansLayer.load(SHIPPED)
learned, lloyd = evaluate(layer, X, X[:, :10], n_steps=20)
for step in (1, 2, 10, 20):
    print(f"after {step:2d} layers: learned {learned[step]:.4f}   Lloyd {lloyd[step]:.4f}")

fig, ax = plt.subplots(figsize=(6, 4))
steps = np.arange(1, 21)
ax.plot(steps, learned[1:], "o-", label="learned layer (shipped weights)")
ax.plot(steps, lloyd[1:], "s-", label="Lloyd (the exact circuit)")
ax.set_xlabel("layers")
ax.set_ylabel("mean log k-means objective (64 unseen tasks)")
ax.set_xticks([1, 5, 10, 15, 20])
ax.legend()
fig.tight_layout()

# %%
# The same layer behind the estimator: ``weights="learned"`` (data with d = 32 and
# ``n_clusters=10``; the estimator min-max scales X as in training).
task = X[0].numpy()
km = TransformerKMeans(10, weights="learned", init=task[:10], max_iter=20, device="cpu")
print("inertia, learned:", round(km.fit(task).inertia_, 2),
      " Lloyd:", round(TransformerKMeans(10, init=task[:10], device="cpu").fit(task).inertia_, 2))
plt.show()
