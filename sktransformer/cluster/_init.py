"""Initial centers: greedy k-means++ and random rows, drawn from a local torch.Generator."""

import math

import torch

from ..attention import group_quantile
from ..utils import make_generator
from . import _compiled
from ._lloyd import sq_distances


def initial_generator(generator, random_state):
    """The generator of the initial centers' draws: ``generator`` on the CPU, else a CPU
    generator seeded from ``random_state``, so that a seed picks the same initial centers
    on the CPU and on a GPU (whose generator draws another stream). The draws are a few
    numbers per center (k-means++) or one permutation of the rows (random), made on the
    CPU and moved."""
    return generator if generator.device.type == "cpu" else make_generator(random_state)


def _potential(dist, w, trim, weighted):
    """``sum w D^2`` over the points kept by trimming ``trim`` of the weight, and the mask."""
    if trim == 0:
        return float((w * dist).sum()), None
    one = torch.zeros(dist.shape, dtype=torch.long, device=dist.device)
    kept = dist <= -group_quantile(-dist, one, 1, w if weighted else None, q=1 - trim)[0]
    return float((w * dist * kept).sum()), kept


def kmeans_plusplus(points, n_clusters, *, generator, sample_weight=None, n_local_trials=None,
                    trim=0.0):
    """Greedy k-means++ (Arthur & Vassilvitskii; the variant scikit-learn uses).

    Each new center is the best, by potential, of ``2 + int(log k)`` candidates sampled with
    probability proportional to ``w_i D(x_i)^2``. Guts only: ``points`` (a
    :class:`~sktransformer.cluster._lloyd.PointTokens`) holds valid data.

    With ``trim > 0`` (trimmed k-means) the seeding ignores the points that the centers
    chosen so far would trim: candidates are drawn from the kept points only and judged by
    the trimmed potential, so that far outliers, which plain k-means++ favours, are not
    picked as centers.

    Returns
    -------
    centers : Tensor of shape (n_clusters, n_features)
        In the shifted coordinates of ``points``.
    indices : Tensor of shape (n_clusters,)
    """
    n, d = points.n, points.d
    if n_local_trials is None:
        n_local_trials = 2 + int(math.log(n_clusters))
    if trim == 0:  # (the compiled seeding, where it runs: the same draws)
        compiled = _compiled.kmeans_plusplus(points, n_clusters, generator=generator,
                                             sample_weight=sample_weight,
                                             n_local_trials=n_local_trials)
        if compiled is not None:
            return compiled
    w = torch.ones(n, dtype=torch.float64, device=points.device) if sample_weight is None \
        else sample_weight.to(torch.float64)
    gen_device = generator.device
    indices = torch.empty(n_clusters, dtype=torch.long, device=points.device)
    # one uniform draw against the cumulative weights, as numpy's choice(p=w / w.sum())
    u = torch.rand(1, dtype=torch.float64, generator=generator, device=gen_device).to(points.device)
    first = torch.searchsorted(torch.cumsum(w, 0), u * w.sum()).clamp_(max=n - 1)
    indices[0] = first[0]
    centers = torch.empty(n_clusters, d, dtype=points.dtype, device=points.device)
    centers[0] = points.rows_of(first[0])
    # distances in the points' dtype (those of float32 points are float32 numbers either
    # way); the sampling's cumulative weights in float64
    closest = sq_distances(points, centers[:1], by_center=True)[0]
    kept = None if trim == 0 else _potential(closest, w, trim, sample_weight is not None)[1]
    w_points = w.to(points.dtype)
    for c in range(1, n_clusters):
        mass = w * closest if kept is None else w * closest * kept
        cumulative = torch.cumsum(mass, 0)
        draws = torch.rand(n_local_trials, dtype=torch.float64, generator=generator,
                           device=gen_device).to(points.device) * cumulative[-1]
        candidates = torch.searchsorted(cumulative, draws).clamp_(max=n - 1)
        cand = points.rows_of(candidates)
        dist = sq_distances(points, cand, by_center=True)  # (trials, n)
        torch.minimum(dist, closest, out=dist)
        if trim == 0:  # each candidate's potential: one product, as scikit-learn's
            best = int(torch.argmin(dist @ w_points))  # (the first of equal ones)
        else:
            trials = [_potential(row, w, trim, sample_weight is not None) for row in dist]
            best = min(range(len(trials)), key=lambda t: trials[t][0])
            kept = trials[best][1]
        closest = dist[best]
        indices[c] = candidates[best]
        centers[c] = cand[best]
    return centers, indices


def random_rows(points, n_clusters, *, generator, sample_weight=None):
    """``n_clusters`` distinct rows: uniformly, or with probability proportional to
    ``sample_weight`` (without replacement), as scikit-learn's ``init="random"``."""
    if sample_weight is None:
        perm = torch.randperm(points.n, generator=generator, device=generator.device)
        indices = perm[:n_clusters].to(points.device)
    else:
        w = sample_weight.to(torch.float64).to(generator.device)
        if int((w > 0).sum()) < n_clusters:
            raise ValueError(f"init='random' draws n_clusters={n_clusters} distinct rows "
                             f"in proportion to sample_weight, but only "
                             f"{int((w > 0).sum())} rows have a positive weight.")
        indices = torch.multinomial(w, n_clusters, replacement=False,
                                    generator=generator).to(points.device)
    return points.rows_of(indices), indices
