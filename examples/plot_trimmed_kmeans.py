"""
Trimmed k-means: planted outliers ruin k-means, trimming recovers the centers
==============================================================================

Three Gaussian clusters and a few far outliers. K-means must give every point to a center,
so the outliers pull the centers off and can capture one of them. Trimmed k-means runs the
same circuit with norm-max attention in the center update: each center averages only the
points within the trimming threshold, and the trimmed points (label ``-1``) weigh nothing.

Robust (sparsemax) k-means is shown for contrast: its update gives far *members* of a
cluster zero weight, which protects a center from the outliers assigned to it, but its
assignment is still Lloyd's, so a group of outliers can claim a center of its own (and the
restart with the lowest inertia, which counts the outliers, prefers that). Only trimming
takes them out of the objective.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from sktransformer import RobustTransformerKMeans, TransformerKMeans, TrimmedTransformerKMeans

rng = np.random.default_rng(0)
true_centers = np.array([[0.0, 0.0], [6.0, 0.0], [3.0, 5.0]])
inliers = np.vstack([c + rng.normal(size=(150, 2)) for c in true_centers])
outliers = rng.uniform(-60, 60, size=(25, 2))
outliers = outliers[np.linalg.norm(outliers - 3, axis=1) > 20]
X = np.vstack([inliers, outliers])
print(f"{len(inliers)} inliers, {len(outliers)} planted outliers")

models = {
    "TransformerKMeans": TransformerKMeans(3, n_init=5, random_state=0),
    "TrimmedTransformerKMeans (trim=0.1)": TrimmedTransformerKMeans(3, trim=0.1, n_init=5,
                                                                    random_state=0),
    "RobustTransformerKMeans (beta=0.05)": RobustTransformerKMeans(3, beta=0.05, n_init=5,
                                                                  random_state=0),
}


def center_error(found):
    """Largest distance from a true center to the closest fitted one."""
    d = np.linalg.norm(true_centers[:, None] - found[None], axis=2)
    return d.min(1).max()


# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 5), sharex=True, sharey=True)
for ax, (name, model) in zip(axes, models.items()):
    labels = model.fit_predict(X)
    err = center_error(model.cluster_centers_)
    print(f"{name:38s} worst center error {err:6.2f}   trimmed {np.sum(labels < 0)}")
    ax.scatter(*X[labels >= 0].T, c=labels[labels >= 0], s=8, cmap="viridis")
    ax.scatter(*X[labels < 0].T, c="lightgray", s=14, marker="x", label="trimmed (-1)")
    ax.scatter(*true_centers.T, c="red", marker="+", s=200, label="true centers")
    ax.scatter(*model.cluster_centers_.T, c="black", marker="*", s=150, label="fitted")
    ax.set_title(f"{name}\nworst center error {err:.2f}", fontsize=10)
axes[0].legend(loc="lower left", fontsize=8)
for ax in axes:
    ax.set_xlim(-65, 65), ax.set_ylim(-65, 65)
fig.tight_layout()

# %%
# New data: ``predict`` flags a point as an outlier (-1) when it lies farther from its
# closest center than the fitted threshold of that cluster (``thresholds_``).
trimmed = models["TrimmedTransformerKMeans (trim=0.1)"]
print("radius per cluster:", np.sqrt(trimmed.thresholds_).round(2))
print("predict([[0.5, 0.3], [40, -40]]) ->", trimmed.predict([[0.5, 0.3], [40.0, -40.0]]))
plt.show()
