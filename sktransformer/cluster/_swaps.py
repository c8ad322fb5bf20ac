"""Center swaps after Lloyd: split a costly cluster, remove the least useful center.

Lloyd's iteration stops at a local optimum that one initialization often leaves with two
centers in one true cluster and one center across two others. A swap (after Ismkhan's
I-k-means-+, 2018) splits a costly cluster in two by a few 2-means layers over its members,
started along their principal direction, and removes the center that costs the least to
lose: its members sent to their second-closest centers, or the center merged into its
nearest neighbour (Ward's cost); the swaps are ranked by the split's saving less the
removal's cost, only those with a positive balance are tried, and a trial runs the layers
again from the swapped centers, kept when the inertia falls. A round costs one pass for the
top-2 distances, the splits (one pass over each cluster's members a layer) and the layers
of its few trials.
"""
import torch

from . import _compiled, _lloyd

N_LAYERS = 3  # of the 2-means that splits a candidate cluster
N_POWER = 4  # power iterations for a split's principal direction
SCREEN_LAYERS = 3  # a trial's layers before its inertia decides whether it runs on


def _costs(points, sample_weight, centers):
    """Per point: its label, its squared distance to its center and to the second-closest
    one, and its weight; per cluster: the summed cost (by chunks)."""
    k = centers.shape[0]
    cluster_cost = points.new_zeros(k)
    labels = torch.empty(points.n, dtype=torch.long, device=points.device)
    best, second = points.new_empty(points.n), points.new_empty(points.n)
    for sl, sq_dist in _lloyd.iter_sq_distances(points, centers):
        two, which = torch.topk(sq_dist, 2, dim=1, largest=False)
        labels[sl], best[sl], second[sl] = which[:, 0], two[:, 0], two[:, 1]
    w = points.new_ones(points.n) if sample_weight is None else sample_weight
    cluster_cost.index_add_(0, labels, best * w)
    return labels, best, second, w, cluster_cost


def _split(points, sample_weight, center, members, n_layers=N_LAYERS, n_power=N_POWER):
    """Two centers for a cluster's ``members`` (indices), by a few Lloyd layers from its
    center moved one standard deviation either way along the members' principal direction
    (power iterations from the farthest member), and the cost they save against ``center``
    alone."""
    x = points.rows_of(members)
    w = x.new_ones(x.shape[0]) if sample_weight is None else sample_weight[members]
    offset = x - center
    v = offset[torch.argmax(offset.square().sum(1))]
    variance = x.new_zeros(())
    for _ in range(n_power):
        if not bool(v.any()):
            break
        t = offset @ (v / torch.linalg.vector_norm(v))
        variance = (w * t.square()).sum() / w.sum()
        v = (w * t) @ offset
    norm = torch.linalg.vector_norm(v)
    step = v * (variance.sqrt() / norm) if bool(norm > 0) else torch.zeros_like(v)
    pair = torch.stack([center + step, center - step])
    for _ in range(n_layers + 1):
        d = torch.cdist(x, pair).square_()
        near = d.argmin(1)
        best = d.gather(1, near[:, None])[:, 0]
        if _ == n_layers:
            break
        size = x.new_zeros(2).index_add_(0, near, w)
        if bool((size == 0).any()):
            break
        pair = x.new_zeros(2, x.shape[1]).index_add_(0, near, x * w[:, None])
        pair /= size[:, None]
    before = (offset.square().sum(1) * w).sum()
    return pair, float(before - (best * w).sum())


def _merge_partners(centers, size):
    """Per center, the other center it merges into most cheaply and that merge's cost,
    Ward's ``n_a n_b / (n_a + n_b) ||c_a - c_b||^2`` (exact for fixed members)."""
    pair_size = size[:, None] * size[None, :] / (size[:, None] + size[None, :]).clamp_min(
        torch.finfo(size.dtype).tiny)
    cost = pair_size * torch.cdist(centers, centers).square()
    cost.fill_diagonal_(torch.inf)
    merge, partner = cost.min(1)
    return partner, merge


def _trials(points, sample_weight, centers, n_candidates):
    """Swaps to try, the most promising first: one of the ``n_candidates`` costliest
    clusters is split in two (:func:`_split`) and the center that costs the least to lose
    is removed (its members sent to their second-closest centers, or the center merged into
    its partner of :func:`_merge_partners`); ranked by the split's saving less the
    removal's cost, only those where it is positive."""
    compiled = _compiled.swap_trials(points, sample_weight, centers,
                                     n_candidates=n_candidates, n_layers=N_LAYERS,
                                     n_power=N_POWER)
    if compiled is not None:
        return compiled
    labels, best, second, w, cluster_cost = _costs(points, sample_weight, centers)
    k = centers.shape[0]
    removal = points.new_zeros(k).index_add_(0, labels, w * (second - best))
    size = points.new_zeros(k).index_add_(0, labels, w)
    partner, merge = _merge_partners(centers, size)
    # a split saves at most its cluster's cost: none below the cheapest removal can pay
    floor = float(torch.minimum(removal, merge).min())
    found = []
    for split in torch.argsort(cluster_cost, descending=True)[:min(n_candidates, k)].tolist():
        if float(cluster_cost[split]) <= floor:
            break
        members = torch.nonzero(labels == split).flatten()
        if members.numel() < 2:
            continue
        pair, saving = _split(points, sample_weight, centers[split], members)
        # removing a center: its members go to their second-closest centers, or it merges
        # into its partner (whichever costs less; never into the cluster being split)
        by_merge = torch.where(partner == split, torch.inf, merge)
        cost = torch.minimum(removal, by_merge)
        cost[split] = torch.inf
        gone = int(torch.argmin(cost))
        if saving - float(cost[gone]) > 0:
            trial = centers.clone()
            if bool(by_merge[gone] < removal[gone]):
                into = int(partner[gone])
                trial[into] = (size[gone] * centers[gone] + size[into] * centers[into]) / (
                    size[gone] + size[into])
            trial[split], trial[gone] = pair[0], pair[1]
            found.append((saving - float(cost[gone]), trial))
    found.sort(key=lambda item: -item[0])
    return [trial for _, trial in found]


def swap_centers(points, sample_weight, result, run, *, max_swaps, max_layers,
                 n_candidates=None, max_trials=3, screen_layers=SCREEN_LAYERS):
    """Up to ``max_swaps`` swaps. Each round tries the ``max_trials`` most promising swaps of
    :func:`_trials` (over the ``n_candidates`` costliest clusters; None: every cluster) in
    turn: ``screen_layers`` layers from the swapped centers, and where their inertia is
    already below the current one, the layers to convergence from there, kept when the
    inertia falls; the search stops at a round where none does. ``result``: ``(centers,
    labels, inertia, n_iter)`` of Lloyd; ``run(centers, max_iter)`` runs the layers from
    ``centers`` (at most ``max_iter`` layers) and returns the same. The layers that lead
    to the result are at most ``max_layers`` (the fit's ``max_iter``: ``n_iter_`` never
    exceeds it), so a trial runs only while ``screen_layers`` more fit. Returns the best
    result. (Every cluster a candidate
    and three trials a round found k on 23 of the model-selection benchmark's 24
    development tasks; with splits started at the farthest member and no merges, on 19.)"""
    k = result[0].shape[0]
    if k < 2:
        return result
    n_candidates = k if n_candidates is None else n_candidates
    for _ in range(max_swaps):
        if result[3] + screen_layers >= max_layers:
            break
        for trial in _trials(points, sample_weight, result[0], n_candidates)[:max_trials]:
            screened = run(trial, screen_layers)
            if not screened[2] < result[2] * (1 - 1e-9):
                continue
            candidate = run(screened[0], max_layers - result[3] - screened[3])
            if candidate[2] < result[2] * (1 - 1e-9):
                n_iter = result[3] + screened[3] + candidate[3]
                result = candidate[0], candidate[1], candidate[2], n_iter
                break
        else:
            break
    return result
