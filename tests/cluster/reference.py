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


def _weights(X, sample_weight):
    return np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, float)


def _means(X, labels, centers, w, keep=None):
    keep = np.ones(len(X), bool) if keep is None else keep
    new = centers.copy()
    for j in range(len(centers)):
        members = (labels == j) & keep
        if w[members].sum() > 0:
            new[j] = (w[members, None] * X[members]).sum(0) / w[members].sum()
    return new


def spherical_kmeans(X, centers, n_iter):
    """Dhillon-Modha: unit rows, arg-max cosine, mean of the members put back on the sphere."""
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    centers = centers / np.linalg.norm(centers, axis=1, keepdims=True)
    history = []
    for _ in range(n_iter):
        labels = (Xn @ centers.T).argmax(1)
        new = _means(Xn, labels, centers, np.ones(len(X)))
        centers = new / np.linalg.norm(new, axis=1, keepdims=True)
        history.append((labels, centers))
    return history


def weighted_top_threshold(d, w, q):
    """Smallest distance t such that the points at distance <= t carry >= q of the weight."""
    order = np.argsort(d, kind="stable")
    cumulative = np.cumsum(w[order])
    first = np.searchsorted(cumulative, q * w.sum() * (1 - 1e-9))
    return d[order][min(first, len(d) - 1)]


def trimmed_kmeans(X, centers, n_iter, trim, mode="global", sample_weight=None):
    """Trimmed Lloyd: (labels with -1 for trimmed, centers) after each iteration."""
    w = _weights(X, sample_weight)
    history = []
    for _ in range(n_iter):
        d2 = sq_dist(X, centers)
        labels, dist = d2.argmin(1), d2.min(1)
        keep = np.zeros(len(X), bool)
        if mode == "global":
            keep = dist <= weighted_top_threshold(dist, w, 1 - trim)
        else:
            for j in range(len(centers)):
                members = labels == j
                if members.any():
                    tau = weighted_top_threshold(dist[members], w[members], 1 - trim)
                    keep[members] = dist[members] <= tau
        centers = _means(X, labels, centers, w, keep)
        history.append((np.where(keep, labels, -1), centers))
    return history


def sparsemax(z):
    """Sparsemax of a vector by the sorting algorithm of Martins & Astudillo (2016)."""
    s = np.sort(z)[::-1]
    k = np.arange(1, len(z) + 1)
    support = 1 + k * s > np.cumsum(s)
    size = k[support][-1]
    tau = (s[:size].sum() - 1) / size
    return np.maximum(z - tau, 0)


def robust_kmeans(X, centers, n_iter, beta):
    """The paper's loop: c_j = sparsemax(-beta ||x_i - c_j||^2 / sqrt(d)) . X_{S_j}."""
    history = []
    for _ in range(n_iter):
        d2 = sq_dist(X, centers)
        labels = d2.argmin(1)
        new = centers.copy()
        for j in range(len(centers)):
            members = labels == j
            if members.any():
                p = sparsemax(-beta * d2[members, j] / np.sqrt(X.shape[1]))
                new[j] = p @ X[members]
        centers = new
        history.append((labels, centers))
    return history


def kmedoids_alternate(X, medoids, n_iter, metric="euclidean"):
    """scikit-learn-extra's alternate step on the full distance matrix: list of
    (labels, medoid indices) after each iteration."""
    D = np.sqrt(sq_dist(X, X)) if metric == "euclidean" else sq_dist(X, X)
    medoids = np.array(medoids)
    history = []
    for _ in range(n_iter):
        labels = D[medoids].argmin(0)
        for j in range(len(medoids)):
            members = np.flatnonzero(labels == j)
            costs = D[np.ix_(members, members)].sum(1)
            best = members[costs.argmin()]
            if costs.min() < costs[members == medoids[j]].min():
                medoids[j] = best
        history.append((labels, medoids.copy()))
    return history


def medoid_objective(X, medoids, metric="euclidean"):
    d2 = sq_dist(X, X[medoids]).min(1)
    return (np.sqrt(d2) if metric == "euclidean" else d2).sum()
