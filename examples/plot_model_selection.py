"""
Selecting the number of clusters: ``n_clusters="auto"`` and GridSearchCV
=========================================================================

``TransformerKMeans.score`` is the held-out log-likelihood of a mixture fitted to the
clusters that hard k-means finds: each cluster's own covariance, tails fitted to the data
(Gaussian, Student-t or flat-topped), and with one cluster a uniform density beside it.
Unlike minus the inertia (scikit-learn's ``KMeans.score``), which only improves as
clusters are added, it peaks at the number of clusters the data have, including one, and
an elongated cluster does not score better cut in pieces.

``TransformerKMeans(n_clusters="auto")`` runs that search itself: a shuffled 5-fold
cross-validation over k = 1..20, then the fit at the best k. Its ``cv_results_`` has the
curve. The data here: five elongated Gaussian clusters of unequal sizes in 2-D.

The table at the end is the benchmark's (``benchmarks/bench_model_selection.py``, read
from its result file): how often each criterion finds the true k on tasks of eight
families that were never used for a choice.
"""

import json
import pathlib

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import silhouette_score
from sklearn.model_selection import GridSearchCV, KFold

from sktransformer import TransformerKMeans
from sktransformer.cluster import neg_inertia_scorer

rng = np.random.default_rng(3)
centers = np.array([[0, 0], [12, 2], [3, 12], [15, 14], [-8, 9]], dtype=float)
sizes = [400, 150, 250, 100, 300]
angles = rng.uniform(0, np.pi, size=5)  # each cluster 2.5 by 0.6, turned at random
X = np.vstack([c + rng.standard_normal((m, 2)) * [2.5, 0.6]
               @ np.array([[np.cos(a), np.sin(a)], [-np.sin(a), np.cos(a)]])
               for c, m, a in zip(centers, sizes, angles)])
X = X[rng.permutation(len(X))]

# %%
# ``n_clusters="auto"``: the search and the fit in one call
km = TransformerKMeans(n_clusters="auto", random_state=0).fit(X)
print("selected k:", km.n_clusters_, "(true k = 5)")
assert km.n_clusters_ == 5

# %%
# The curve, next to minus the held-out inertia and scikit-learn's silhouette
results = km.cv_results_
ks = np.asarray(results["param_n_clusters"], dtype=int)
fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
axes[0].errorbar(ks, results["mean_test_score"], yerr=results["std_test_score"], marker="o")
axes[0].set(title="default score (higher is better)", xlabel="n_clusters",
            ylabel="mean held-out log-likelihood")
cv = KFold(5, shuffle=True, random_state=0)
inertia = GridSearchCV(TransformerKMeans(random_state=0), {"n_clusters": ks}, cv=cv,
                       scoring=neg_inertia_scorer).fit(X).cv_results_["mean_test_score"]
axes[1].plot(ks, inertia, marker="o")
axes[1].set(title="minus the inertia (picks the largest k)", xlabel="n_clusters")
assert int(np.argmax(inertia)) == len(ks) - 1
silhouette = [silhouette_score(X, TransformerKMeans(k, random_state=0).fit_predict(X))
              for k in ks[1:]]
axes[2].plot(ks[1:], silhouette, marker="o")
axes[2].set(title="silhouette (undefined at k = 1)", xlabel="n_clusters")
for ax in axes:
    ax.axvline(5, color="gray", linestyle=":")
fig.tight_layout()

# %%
# The same search with ``GridSearchCV`` (shuffle the folds: rows sorted by class would
# leave a cluster out of a training fold)
search = GridSearchCV(TransformerKMeans(random_state=0), {"n_clusters": range(1, 21)}, cv=cv)
print("GridSearchCV selects:", search.fit(X).best_params_)
assert search.best_params_["n_clusters"] == km.n_clusters_

# %%
# How often each criterion finds the true k (the benchmark's result file)
try:
    here = pathlib.Path(__file__).resolve().parent
except NameError:  # (run where __file__ is not set: from the examples folder)
    here = pathlib.Path.cwd()
path = here.parent / "benchmarks" / "results" / "model_selection.json"
if path.exists():
    summary = json.loads(path.read_text())["summary"]
    for method, row in summary.items():
        print(f"{method:20s} {row['hits']:3d} of {row['tasks']} tasks, "
              f"mean |k - true k| {row['mean_abs_error']:.2f}")
