"""Independent plain-numpy k-means references (not the package's code path)."""

import numpy as np


def sq_dist(X, centers):
    return ((X[:, None, :] - centers[None, :, :]) ** 2).sum(-1)


def lloyd(X, centers, n_iter, sample_weight=None):
    """Hard Lloyd: list of (labels, centers) after each iteration. Empty clusters keep
    their center (the tests that use this reference have none)."""
    w = np.ones(len(X)) if sample_weight is None else sample_weight
    history = []
    for _ in range(n_iter):
        labels = sq_dist(X, centers).argmin(1)
        new = centers.copy()
        for j in range(len(centers)):
            members = labels == j
            if w[members].sum() > 0:
                new[j] = (w[members, None] * X[members]).sum(0) / w[members].sum()
        centers = new
        history.append((labels, centers))
    return history


def soft_kmeans(X, centers, n_iter, temperature):
    """Soft k-means: r = softmax(-||x - c||^2 / t), c = r^T X / r^T 1."""
    history = []
    for _ in range(n_iter):
        logits = -sq_dist(X, centers) / temperature
        logits -= logits.max(1, keepdims=True)
        r = np.exp(logits)
        r /= r.sum(1, keepdims=True)
        centers = (r.T @ X) / r.sum(0)[:, None]
        history.append((r, centers))
    return history


def objective(X, centers):
    return sq_dist(X, centers).min(1).sum()


def blobs(n_per=20, centers=((0, 0, 0), (6, 0, 0), (0, 6, 0), (0, 0, 6)), scale=1.0, seed=0):
    """Gaussian blobs and one initial center drawn from each blob (no empty clusters)."""
    rng = np.random.default_rng(seed)
    centers = np.asarray(centers, dtype=float)
    X = np.concatenate([c + scale * rng.normal(size=(n_per, centers.shape[1])) for c in centers])
    init = X[np.arange(len(centers)) * n_per + rng.integers(0, n_per, len(centers))]
    return X, init
