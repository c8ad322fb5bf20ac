"""Initial centers: greedy k-means++ and random rows, drawn from a local torch.Generator."""

import math

import torch

from ..utils import iter_chunks


def _sq_dist_to(X, points, x_sq, rows, shift=None):
    """``||x_i - p_m||^2`` for all rows of X, shape (n_points, n_samples), chunked over X."""
    p_sq = points.square().sum(1)
    out = torch.empty(points.shape[0], X.shape[0], dtype=X.dtype, device=X.device)
    for sl in iter_chunks(X.shape[0], rows):
        x = X[sl] if shift is None else X[sl] - shift
        torch.addmm(p_sq.unsqueeze(1), points, x.T, alpha=-2.0, out=out[:, sl])
        out[:, sl] += x_sq[sl]
    return out.clamp_(min=0.0)


def kmeans_plusplus(X, n_clusters, *, x_sq, generator, sample_weight=None, rows=4096,
                    n_local_trials=None, shift=None):
    """Greedy k-means++ (Arthur & Vassilvitskii; the variant scikit-learn uses).

    Each new center is the best, by potential, of ``2 + int(log k)`` candidates sampled with
    probability proportional to ``w_i D(x_i)^2``. Guts only: X is a valid tensor.

    Returns
    -------
    centers : Tensor of shape (n_clusters, n_features)
        In the shifted coordinates ``x - shift``.
    indices : Tensor of shape (n_clusters,)
    """
    n, d = X.shape
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
    centers[0] = X[first[0]] if shift is None else X[first[0]] - shift
    closest = _sq_dist_to(X, centers[:1], x_sq, rows, shift)[0].to(torch.float64)
    potential = float((w * closest).sum())
    for c in range(1, n_clusters):
        draws = torch.rand(n_local_trials, dtype=torch.float64, generator=generator,
                           device=gen_device).to(X.device) * potential
        cumulative = torch.cumsum(w * closest, 0)
        candidates = torch.searchsorted(cumulative, draws).clamp_(max=n - 1)
        cand = X[candidates] if shift is None else X[candidates] - shift
        dist = torch.minimum(closest, _sq_dist_to(X, cand, x_sq, rows, shift).to(torch.float64))
        potentials = (dist * w).sum(1)
        best = int(torch.argmin(potentials))
        potential = float(potentials[best])
        closest = dist[best]
        indices[c] = candidates[best]
        centers[c] = cand[best]
    return centers, indices


def random_rows(X, n_clusters, *, generator, shift=None):
    """``n_clusters`` distinct rows of X chosen uniformly (the ``init="random"`` of sklearn)."""
    perm = torch.randperm(X.shape[0], generator=generator, device=generator.device)
    indices = perm[:n_clusters].to(X.device)
    centers = X[indices]
    return (centers if shift is None else centers - shift), indices
