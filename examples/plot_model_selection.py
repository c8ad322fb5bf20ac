"""
Selecting the number of clusters with GridSearchCV
===================================================

``TransformerKMeans.score`` is the held-out log-likelihood of the mixture the circuit is
the limit of (isotropic Gaussians; at a finite temperature ``t``, equal weights and variance
``t / 2``), so ``GridSearchCV`` with no ``scoring`` argument selects ``n_clusters`` and
``temperature`` together. Minus the inertia, scikit-learn's ``KMeans.score``, only
improves as clusters are added. The data: six Gaussian clusters of unequal sizes and
spreads in 5 dimensions.

The table at the end is the benchmark's (``benchmarks/bench_model_selection.py``, read
from its result file): how often each criterion finds the true k on Gaussian-mixture
tasks that were never used for a choice.
"""

import json
import pathlib

import matplotlib.pyplot as plt
from sklearn.datasets import make_blobs
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import GridSearchCV

from sktransformer import TransformerKMeans
from sktransformer.cluster import neg_inertia_scorer

X, y = make_blobs(n_samples=[300, 150, 250, 100, 200, 120], n_features=5,
                  cluster_std=[1.0, 0.6, 1.3, 0.8, 1.0, 0.7], random_state=2)
ks = list(range(2, 11))

# %%
# One search over k and the temperature (``None`` is hard k-means)
search = GridSearchCV(TransformerKMeans(random_state=0),
                      {"n_clusters": ks, "temperature": [None, 0.5, 2.0]}, cv=3)
search.fit(X)
print("selected:", search.best_params_, "(true k = 6)")

# %%
# The held-out score for each k, next to minus the held-out inertia and GaussianMixture's BIC
results = search.cv_results_
fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
for t in [None, 0.5, 2.0]:
    rows = [i for i, p in enumerate(results["params"]) if p["temperature"] == t]
    axes[0].plot(ks, results["mean_test_score"][rows], marker="o",
                 label="hard" if t is None else f"t = {t}")
axes[0].set(title="default score (higher is better)", xlabel="n_clusters",
            ylabel="mean held-out log-likelihood")
axes[0].legend()
inertia = GridSearchCV(TransformerKMeans(random_state=0), {"n_clusters": ks}, cv=3,
                       scoring=neg_inertia_scorer).fit(X).cv_results_["mean_test_score"]
axes[1].plot(ks, inertia, marker="o")
axes[1].set(title="minus the inertia (picks the largest k)", xlabel="n_clusters")
bic = [GaussianMixture(k, covariance_type="spherical", random_state=0).fit(X).bic(X)
       for k in ks]
axes[2].plot(ks, bic, marker="o")
axes[2].set(title="GaussianMixture BIC (lower is better)", xlabel="n_clusters")
for ax in axes:
    ax.axvline(6, color="gray", linestyle=":")
fig.tight_layout()

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
        print(f"{method:32s} {row['correct']:3d} of {row['tasks']} tasks "
              f"(rate {row['rate']:.2f} +- {row['se']:.2f})")
