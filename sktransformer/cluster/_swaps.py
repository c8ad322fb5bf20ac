"""Center swaps after Lloyd: move the least useful center into the costliest cluster.

Lloyd's iteration stops at a local optimum that one initialization often leaves with two
centers in one true cluster and one center across two others. A swap (Ismkhan's
I-k-means-+, 2018) removes the center whose members would cost the least to send to their
second-closest center, puts it on the farthest member of the cluster of largest cost, and
runs the layers again from there; the swap is kept only when the inertia falls. Each trial
is one pass for the top-2 distances (by chunks) and a warm-started run of layers.
"""

import torch

from . import _lloyd


def _costs(points, sample_weight, centers):
    """Per cluster: the cost of removing it (its members' extra cost at their second-closest
    center), its summed cost; and per point: label and squared distance (by chunks)."""
    k = centers.shape[0]
    removal = points.new_zeros(k)
    cluster_cost = points.new_zeros(k)
    labels = torch.empty(points.n, dtype=torch.long, device=points.device)
    min_dist = points.new_empty(points.n)
    for sl, sq_dist in _lloyd.iter_sq_distances(points, centers):
        two, which = torch.topk(sq_dist, 2, dim=1, largest=False)
        w = None if sample_weight is None else sample_weight[sl]
        extra = two[:, 1] - two[:, 0]
        own = two[:, 0]
        if w is not None:
            extra, own = extra * w, own * w
        removal.index_add_(0, which[:, 0], extra)
        cluster_cost.index_add_(0, which[:, 0], own)
        labels[sl], min_dist[sl] = which[:, 0], two[:, 0]
    return removal, cluster_cost, labels, min_dist


def _trials(points, sample_weight, centers, n_candidates):
    """Swapped centers to try, best guesses first: each of the ``n_candidates`` costliest
    clusters gets its farthest member as a center, in place of each of the
    ``n_candidates`` cheapest centers to remove (never its own)."""
    removal, cluster_cost, labels, min_dist = _costs(points, sample_weight, centers)
    k = centers.shape[0]
    m = min(n_candidates, k)
    for split in torch.argsort(cluster_cost, descending=True)[:m].tolist():
        members = labels == split
        if int(members.sum()) < 2:
            continue
        far = int(torch.argmax(torch.where(members, min_dist, -1.0)))
        x = points.rows_of(torch.tensor([far], device=points.device))[0]
        order = torch.argsort(removal).tolist()
        for gone in [j for j in order if j != split][:m]:
            trial = centers.clone()
            trial[gone] = x
            yield trial


def swap_centers(points, sample_weight, result, run, *, max_swaps, n_candidates=3):
    """Up to ``max_swaps`` accepted swaps; each round tries the :func:`_trials` in turn
    and keeps the first that lowers the inertia, and the search stops at a round where
    none does. ``result``: ``(centers, labels, inertia, n_iter)`` of Lloyd; ``run(centers)``
    runs the layers from ``centers`` and returns the same. Returns the best result."""
    if result[0].shape[0] < 2:
        return result
    for _ in range(max_swaps):
        for trial in _trials(points, sample_weight, result[0], n_candidates):
            candidate = run(trial)
            if candidate[2] < result[2] * (1 - 1e-9):
                result = candidate[0], candidate[1], candidate[2], result[3] + candidate[3]
                break
        else:
            break
    return result
