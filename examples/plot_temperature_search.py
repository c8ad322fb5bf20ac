"""
What the attention's temperature buys: a grid search on the held-out inertia
============================================================================

Lloyd's algorithm is the hard-attention limit of the k-means circuit. A finite temperature
makes the assignment block soft (soft k-means), and the softness steers a run away from
the poor local optima that a bad start leads Lloyd into. The temperature is a parameter
like any other, so ``GridSearchCV`` picks it with ``scoring=neg_inertia_scorer`` (minus the
held-out inertia, scikit-learn's ``KMeans.score``; at a fixed k), and a hard run from the
soft centers ("hardening") ends at a local optimum of the k-means objective itself.

The tasks are the learned layer's Gaussian mixtures (d = 32, k = 10, points in
``[0, 1]^32``); every run starts from the same random data points (``init="random"``,
one start), the start on which Lloyd does poorly.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from sktransformer import TransformerKMeans
from sktransformer.cluster import neg_inertia_scorer
from sktransformer.datasets import make_gmm_tasks

warnings.filterwarnings("ignore", category=ConvergenceWarning)
X, _ = make_gmm_tasks(8, n_samples=512, n_features=32, n_clusters=10, random_state=11)
X = X.astype(np.float64)
temperatures = [0.1, 0.2, 0.3, 0.4, 0.6, 0.8]
cv_curves, chosen, lloyd, hardened = [], [], [], []
for i, task in enumerate(X):
    start = TransformerKMeans(10, init="random", n_init=1, random_state=i, device="cpu")
    search = GridSearchCV(start, {"temperature": [None, *temperatures]}, cv=3,
                          scoring=neg_inertia_scorer).fit(task)
    scores = search.cv_results_["mean_test_score"]
    cv_curves.append(np.log(-scores))
    chosen.append(search.best_params_["temperature"])
    soft = search.best_estimator_
    hard = TransformerKMeans(10, init=soft.cluster_centers_, device="cpu").fit(task)
    hardened.append(np.log(hard.inertia_))
    lloyd.append(np.log(start.fit(task).inertia_))
lloyd, hardened = np.array(lloyd), np.array(hardened)
print("temperatures chosen:", chosen)
print(f"mean log inertia: Lloyd {lloyd.mean():.3f}, chosen temperature then hard "
      f"{hardened.mean():.3f} (paired difference {np.mean(hardened - lloyd):+.3f} "
      f"+- {np.std(hardened - lloyd, ddof=1) / np.sqrt(len(X)):.3f})")

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
grid = ["hard", *map(str, temperatures)]
for curve in cv_curves:
    left.plot(range(len(grid)), curve, "o-", color="tab:blue", alpha=0.5, ms=3)
left.set_xticks(range(len(grid)), grid)
left.set_xlabel("temperature")
left.set_ylabel("log held-out inertia (3-fold CV)")
left.set_title("GridSearchCV's score, one line per task")
right.scatter(lloyd, hardened, color="tab:green")
low, high = min(lloyd.min(), hardened.min()) - 0.05, max(lloyd.max(), hardened.max()) + 0.05
right.plot([low, high], [low, high], "k--", lw=1)
right.set_xlabel("Lloyd (hard from the start): log inertia")
right.set_ylabel("chosen temperature, then hard: log inertia")
right.set_title("same random start: below the diagonal is a gain")
fig.tight_layout()
plt.show()
