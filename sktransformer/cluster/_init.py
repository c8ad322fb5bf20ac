"""Initial centers: greedy k-means++ and random rows, drawn from a local torch.Generator."""

import math

import torch

from ._lloyd import sq_distances


def kmeans_plusplus(points, n_clusters, *, generator, sample_weight=None, n_local_trials=None):
    """Greedy k-means++ (Arthur & Vassilvitskii; the variant scikit-learn uses).

    Each new center is the best, by potential, of ``2 + int(log k)`` candidates sampled with
    probability proportional to ``w_i D(x_i)^2``. Guts only: ``points`` (a
    :class:`~sktransformer.cluster._lloyd.PointTokens`) holds valid data.

    Returns
    -------
    centers : Tensor of shape (n_clusters, n_features)
        In the shifted coordinates of ``points``.
    indices : Tensor of shape (n_clusters,)
    """
    X, n, d = points.X, points.n, points.d
    if n_local_trials is None:
        n_local_trials = 2 + int(math.log(n_clusters))
    w = torch.ones(n, dtype=torch.float64, device=X.device) if sample_weight is None \
        else sample_weight.to(torch.float64)
    gen_device = generator.device
    indices = torch.empty(n_clusters, dtype=torch.long, device=X.device)
    # one uniform draw against the cumulative weights, as numpy's choice(p=w / w.sum())
    u = torch.rand(1, dtype=torch.float64, generator=generator, device=gen_device).to(X.device)
    first = torch.searchsorted(torch.cumsum(w, 0), u * w.sum()).clamp_(max=n - 1)
    indices[0] = first[0]
    centers = torch.empty(n_clusters, d, dtype=X.dtype, device=X.device)
    centers[0] = points.rows_of(first[0])
    closest = sq_distances(points, centers[:1])[:, 0].to(torch.float64)
    potential = float((w * closest).sum())
    for c in range(1, n_clusters):
        draws = torch.rand(n_local_trials, dtype=torch.float64, generator=generator,
                           device=gen_device).to(X.device) * potential
        cumulative = torch.cumsum(w * closest, 0)
        candidates = torch.searchsorted(cumulative, draws).clamp_(max=n - 1)
        cand = points.rows_of(candidates)
        dist = torch.minimum(closest, sq_distances(points, cand).T.to(torch.float64))
        potentials = (dist * w).sum(1)
        best = int(torch.argmin(potentials))
        potential = float(potentials[best])
        closest = dist[best]
        indices[c] = candidates[best]
        centers[c] = cand[best]
    return centers, indices


def random_rows(points, n_clusters, *, generator):
    """``n_clusters`` distinct rows chosen uniformly (the ``init="random"`` of sklearn)."""
    perm = torch.randperm(points.n, generator=generator, device=generator.device)
    indices = perm[:n_clusters].to(points.X.device)
    return points.rows_of(indices), indices
