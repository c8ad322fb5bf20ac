"""Weightings for attention of each query over its own group of keys.

In the center-update block of the k-means circuit, center ``j`` attends to the points whose
assignment is ``e_j`` and to no other: a block-diagonal mask. Storing the mask as a group
index per key (``groups[i] = j``) makes that attention a segment operation, ``O(n)`` memory
instead of ``O(n k)``. Each function here takes one score per key, the key's group and
optionally a weight per key (its multiplicity: a key of weight 2 counts as two copies of
itself) and returns, per key, its weight in its group's average (the weights of a group sum to
1), or per group a threshold or a chosen key: the quantile that trimmed k-means cuts at,
sparsemax (robust k-means), the arg-max and its Gumbel perturbation (k-medoids). The plain
mean of the members needs none of them: it is the ``index_add`` of the fast path.
"""

import math

import numpy as np
import torch

from ..utils import LANES, flatnonzero, greater, spread, through_numpy


def group_max(values, groups, n_groups):
    """Per group, the largest of ``values`` (``-inf`` for an empty group), shape (n_groups,).

    On a GPU by partial maxima, as :func:`group_sums` (10^6 values into 64 groups: one
    ``scatter_reduce`` took 1.3 ms on an H200, with none of its calls in the top 10 after)."""
    lanes = spread(groups, n_groups)
    if lanes is not None:
        partial = values.new_full((n_groups * LANES,), -torch.inf)
        partial.scatter_reduce_(0, lanes, values, "amax")
        return partial.view(n_groups, LANES).amax(1)
    return values.new_full((n_groups,), -torch.inf).scatter_reduce_(0, groups, values, "amax")


def group_sums(values, groups, n_groups):
    """Per group, the sum of ``values`` over its keys, shape (n_groups,), in ``values``'
    dtype: a ``scatter_add`` into zeros (``bincount`` with weights also scans ``groups``
    for its minimum and maximum: twice the time on the CPU).

    On a GPU into partial sums per group (:func:`~sktransformer.utils.spread`: the atomic
    adds into few groups queue on the same addresses; ``bincount`` with weights, 73-91 us
    for 10^6 values into 64 groups on an H200, waits for its maximum).
    """
    lanes = spread(groups, n_groups)
    if lanes is not None:
        partial = values.new_zeros(n_groups * LANES).scatter_add_(0, lanes, values)
        return partial.view(n_groups, LANES).sum(1)
    return values.new_zeros(n_groups).scatter_add_(0, groups, values)


def _by_group_then_score(scores, groups, n_groups):
    """Key order: by group, and by decreasing score within a group (stable on ties).

    Both sorts are ascending sorts of integers (the scores' float64 bits, ordered as the
    scores, then reversed by ``~``): torch's CPU sort takes about 1 ms for them at
    n = 100000, and 7 ms for floats or a descending order."""
    order = torch.sort(~_ordered_bits(scores, torch.float64, torch.int64), stable=True).indices
    if n_groups == 1:
        return order
    return order[torch.sort(groups[order], stable=True).indices]


def _cumsum_in_groups(values, groups_sorted, n_groups):
    """Inclusive cumulative sums restarted at each group (``values`` in group order)."""
    total = torch.cumsum(values, 0)
    per_group = group_sums(values, groups_sorted, n_groups)
    start = torch.cumsum(per_group, 0) - per_group
    return total - start[groups_sorted]


def group_quantile(scores, groups, n_groups, weight=None, *, q, below=None, tail=None):
    """Per group, the score above which the top ``q`` of the group's weight lies.

    The threshold ``s_j`` is the largest score such that the keys scoring at least ``s_j``
    carry at least a fraction ``q`` of the group's weight (the weighted inverted-CDF
    quantile). Keys tied with the threshold are all at or above it, so which keys pass does
    not depend on their order. ``q = 1`` gives the group's minimum; an empty group gets
    ``+inf``. Unweighted, this is the ``ceil(q n_j)``-th largest score of each group, found by
    selection instead of a sort.

    ``below`` (unweighted only), a guess of a score above each group's threshold, shape
    (n_groups,) or (1,) for all: for ``q`` near 1 the threshold is then selected among the
    few keys scoring below the guess (trimmed k-means passes its last threshold, widened).
    The answer is the same; when a group has too few such keys, all keys are used.
    ``tail``: the indices of those keys, when the caller has them (one pass fewer).
    """
    if weight is None:
        return _kth_largest(scores, groups, n_groups, q, below, tail)
    w = weight.to(torch.float64)
    order = _by_group_then_score(scores, groups, n_groups)
    g = groups[order]
    cumulative = _cumsum_in_groups(w[order], g, n_groups)
    total = group_sums(w, groups, n_groups)
    # relative slack: (q * total) may round above an exactly reachable cumulative weight
    reached = cumulative >= (q * total)[g] * (1 - 1e-9)
    candidates = torch.where(reached, scores[order], torch.full_like(scores[order], -torch.inf))
    threshold = torch.full((n_groups,), -torch.inf, dtype=scores.dtype, device=scores.device)
    threshold.scatter_reduce_(0, g, candidates, "amax")
    return torch.where(total > 0, threshold, torch.inf).to(scores.dtype)


def _kth_largest(scores, groups, n_groups, q, below=None, tail=None):
    """:func:`group_quantile` with unit weights: the ``ceil(q n_j)``-th largest score.

    With ``below``: the rank-th largest is the ``(n_j - rank + 1)``-th smallest, found
    among the keys below the guess (``tail``, their indices) when a group has that many of
    them."""
    if below is not None and tail is None:
        bound = below if len(below) == 1 else below.index_select(0, groups)
        tail = flatnonzero(greater(bound, scores))
    if n_groups == 1:
        n = len(scores)
        rank = max(1, math.ceil(q * n * (1 - 1e-9)))
        if below is not None and len(tail) >= n - rank + 1:
            scores, rank = scores[tail], len(tail) - (n - rank)
        threshold = torch.full((1,), torch.inf, dtype=scores.dtype, device=scores.device)
        if n:
            threshold[0] = -kth_smallest(-scores, rank)
        return threshold
    counts = torch.bincount(groups, minlength=n_groups)
    rank = torch.ceil(q * counts.to(torch.float64) * (1 - 1e-9)).clamp(min=1).long()
    if below is not None:
        tail_groups = groups.index_select(0, tail)  # (5x faster than groups[tail])
        tail_counts = torch.bincount(tail_groups, minlength=n_groups)
        from_top = tail_counts - (counts - rank)  # the rank among the tail's keys
        if bool(((from_top >= 1) | (counts == 0)).all()):
            return _ranked(scores.index_select(0, tail), tail_groups, n_groups, tail_counts,
                           from_top.clamp(min=1))
    return _ranked(scores, groups, n_groups, counts, rank)


def _ranked(scores, groups, n_groups, counts, rank):
    """Per group (of several), the ``rank``-th largest score (``+inf`` where ``counts`` is
    0), by one sort."""
    if len(scores) == 0:
        return torch.full((n_groups,), torch.inf, dtype=scores.dtype, device=scores.device)
    # one sort by (group, float32 key of -score): the rank-th largest of group j sits at
    # position start_j + rank_j - 1, unless rounding to float32 tied it with a neighbour
    start = torch.cumsum(counts, 0) - counts
    at = (start + rank - 1).clamp(max=len(scores) - 1)
    if scores.dtype == torch.float32 and scores.device.type == "cpu":
        # the key is the score: numpy sorts the keys alone, 2.4x faster than torch's sort
        # with its permutation (n = 100000), and builds them 5x faster than torch
        bits = (-scores).numpy().view(np.int32).astype(np.int64)
        keys = np.where(bits < 0, bits ^ 0x7FFFFFFF, bits) + (1 << 31)
        keys |= groups.numpy() << 32
        ordered = torch.from_numpy(np.sort(keys))
        return torch.where(counts > 0, -_float_of(ordered[at]), torch.inf)
    composite = groups << 32 | _float_key(-scores)
    ordered, order = torch.sort(composite)
    threshold = torch.where(counts > 0, scores[order[at]], torch.inf)
    if scores.dtype != torch.float32:  # a float32 tie may hide the order of the values
        before = (rank > 1) & (ordered[at] == ordered[(at - 1).clamp(min=0)])
        after = (rank < counts) & (ordered[at] == ordered[(at + 1).clamp(max=len(scores) - 1)])
        for j in torch.nonzero(before | after).flatten().tolist():
            segment = scores[order[start[j]:start[j] + counts[j]]]
            threshold[j] = -kth_smallest(-segment, int(rank[j]))
    return threshold


def _ordered_bits(values, float_dtype, int_dtype):
    """int64 integers ordered as ``values`` rounded to ``float_dtype``: the IEEE bits read as
    ``int_dtype``, with the magnitude bits of negative numbers flipped."""
    bits = values.to(float_dtype).view(int_dtype).long()
    return torch.where(bits < 0, bits ^ torch.iinfo(int_dtype).max, bits)


def _float_key(values):
    """Integers in ``[0, 2^32)`` ordered as ``values`` rounded to float32."""
    return _ordered_bits(values, torch.float32, torch.int32) + (1 << 31)


def _float_of(composite):
    """The float32 values whose :func:`_float_key` are the low 32 bits of ``composite``."""
    bits = (composite & 0xFFFFFFFF) - (1 << 31)
    return torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(torch.int32).view(torch.float32)


_NUMPY_SELECTS = (torch.float32, torch.float64, torch.int32, torch.int64)


def kth_smallest(values, rank):
    """The ``rank``-th smallest of the 1-d ``values`` (1-based), exactly, as a 0-d tensor.

    On the CPU by numpy's introselect (``np.partition``): ``torch.kthvalue`` copies and
    partitions at about 12 ns a value there (1.25 against 0.13 ms at n = 100000, 6.0
    against 1.3 ms at 10^6 in float32). On a GPU by a sort: ``torch.kthvalue`` selects
    within one slice there, which took 1.29 ms a call at 10^6 on an H200 (global trimming's
    radius: 2.5x the hard layer's time)."""
    if values.device.type == "cpu":
        if values.dtype in _NUMPY_SELECTS:
            # (the value as the array's own scalar: no float round trip for large integers)
            return torch.from_numpy(
                np.partition(values.detach().numpy(), rank - 1)[rank - 1:rank])[0]
        return torch.kthvalue(values, rank).values
    return torch.sort(values).values[rank - 1]


def group_sparsemax(scores, groups, n_groups, weight=None, *, start=None,
                    return_threshold=False):
    """Sparsemax (Martins & Astudillo, 2016) of the scores within each group.

    ``p_i = w_i max(s_i - tau_j, 0)`` with ``tau_j`` such that the group's ``p`` sums to 1,
    the projection onto the simplex of the multiset in which key ``i`` appears ``w_i`` times.
    ``tau_j`` comes from Michelot's (1986) algorithm instead of a sort: from a support that
    contains the answer's, set ``tau_j = (sum_support w s - 1) / sum_support w``, keep the
    keys above it, repeat until the support stops shrinking (``tau`` only grows, so a dropped
    key never comes back). Each pass compares every key with its ``tau`` once; the sums
    follow the keys that changed side. Keys far below the top get exactly 0.

    ``start``, a guess of each group's threshold (the last layer's, in robust k-means),
    saves passes and changes the result only by the rounding of the sums: the ``tau`` of
    *any* set of keys is at most the answer's (``sum w (s - tau)_+ >= 1`` there), so the
    keys above the ``tau`` of ``{s > start}`` contain the answer's support, and when they are
    that same set, that ``tau`` is the answer.

    The scores are taken relative to their group's top, and the first support is the keys
    above ``max_i (s_i - 1 / w_i)``, a lower bound of ``tau`` (key ``i`` alone has
    ``w_i (s_i - tau) <= 1``): no key more than that below the top enters the sums, whose
    cancellation would otherwise reach the budget of 1 (scores of 1e57 gave weights of
    1e41).

    Returns
    -------
    p : Tensor of shape (n_keys,), float64
    tau : Tensor of shape (n_groups,), only with ``return_threshold=True``
    """
    s = scores.to(torch.float64)
    w = None if weight is None else weight.to(torch.float64)
    eligible = None if w is None else w > 0
    top = group_max(s if w is None else s.masked_fill(~eligible, -torch.inf), groups,
                    n_groups)
    top = torch.where(top > -torch.inf, top, 0.0)  # (an empty group)
    s = s - top[groups]  # (the same weights: sparsemax does not move with a shift)
    ws = s if w is None else w * s
    floor = group_max(s - 1.0 if w is None else torch.where(eligible, s - 1.0 / w, -torch.inf),
                      groups, n_groups)
    if start is not None:
        floor = torch.maximum(floor, start.to(torch.float64) - top)

    def above(tau_of):  # the keys of positive weight above their group's threshold
        # (numpy compares on the CPU, and finds the changed keys: 5x torch's time there)
        return greater(s, tau_of) if w is None else greater(s, tau_of) & eligible

    # one n-sized buffer for every pass's per-key values: fresh n-sized tensors cost page
    # faults on the CPU (0.96 against 0.58 ms a call at n = 100000, k = 64, with them)
    buf = torch.empty_like(s)
    support = above(torch.index_select(floor, 0, groups, out=buf))
    total = group_sums(buf.copy_(support) if w is None else torch.mul(w, support, out=buf),
                       groups, n_groups)
    total_ws = group_sums(torch.mul(ws, support, out=buf), groups, n_groups)
    first = start is not None  # the guess's support may miss keys of the answer's
    while True:
        # an empty support gives -1e300: every key is above it
        tau = (total_ws - 1) / total.clamp(min=1e-300)
        tau_of = torch.index_select(tau, 0, groups, out=buf)  # (3x faster than tau[groups])
        kept = above(tau_of)
        if not first:
            kept &= support  # from a superset of the answer's, the support only shrinks
        first = False
        changed = flatnonzero(kept ^ support)
        if changed.numel() == 0:  # the support is the keys above tau: p > 0 exactly there
            p = torch.sub(s, tau_of, out=buf).clamp_(min=0.0)
            if w is not None:
                p *= w
            return (p, tau + top) if return_threshold else p
        # the sums follow the few keys that changed side, not a new pass over all of them
        sign = torch.where(kept[changed], 1.0, -1.0).to(torch.float64)
        g = groups[changed]
        total += group_sums(sign if w is None else w[changed] * sign, g, n_groups)
        total_ws += group_sums(ws[changed] * sign, g, n_groups)
        support = kept


def group_argmax(scores, groups, n_groups, *, incumbent=None, rtol=0.0):
    """Per group, the index of the key with the highest score (-1 for an empty group).

    The hard-attention limit in which one key takes all the weight: the one-hot weights are
    returned in their sparse form, the chosen index. Ties go to the lowest index, except that
    a group's ``incumbent`` (an index, or -1 for none) is kept when it is a member and ties
    with the best: a new choice must be strictly better, as in the alternate k-medoids step.
    ``rtol`` widens the tie to scores within ``rtol * |best|``, so that rounding does not
    decide between keys whose exact scores are equal.
    """
    best = group_max(scores, groups, n_groups)
    index = torch.arange(scores.numel(), device=scores.device)
    top = scores >= best[groups]
    none = scores.numel()
    chosen = torch.full((n_groups,), none, dtype=torch.long, device=scores.device)
    chosen.scatter_reduce_(0, groups[top], index[top], "amin")
    chosen = torch.where(chosen == none, -1, chosen)
    if incumbent is None:
        return chosen
    return keep_incumbent(scores, groups, best, chosen, incumbent, rtol=rtol)


def keep_incumbent(scores, groups, best, chosen, incumbent, *, rtol=0.0):
    """:func:`group_argmax`'s rule for its ``incumbent``, given each group's ``best`` score
    and ``chosen`` key (-1 for an empty group): a group keeps its incumbent (an index, or
    -1 for none) when it is a member whose score is within ``rtol * |best|`` of the best.

    On the CPU by numpy's ops on the groups' few values (a k-medoids layer at 20,000 x 32,
    k = 16 spent 87 us in torch's, of its update's 430)."""
    if through_numpy(scores, groups, best, chosen, incumbent):
        scores, groups, best, chosen, incumbent = (
            t.numpy() for t in (scores, groups, best, chosen, incumbent))
        safe = np.maximum(incumbent, 0)
        with np.errstate(invalid="ignore"):  # (an empty group's best is -inf: not close)
            close = scores[safe] >= best - rtol * np.abs(best)
        keep = (incumbent >= 0) & (groups[safe] == np.arange(len(best))) & close
        return torch.from_numpy(np.where(keep, incumbent, chosen))
    safe = incumbent.clamp(min=0)
    own = torch.arange(len(best), device=scores.device)
    close = scores[safe] >= best - rtol * best.abs()
    keep = (incumbent >= 0) & (groups[safe] == own) & close
    return torch.where(keep, incumbent, chosen)


def gumbel(like, *, generator):
    """Standard Gumbel noise shaped like ``like``: ``-log E`` with ``E ~ Exp(1)``.

    ``argmax(s / t + g)`` is an exact draw from ``softmax(s / t)`` (the Gumbel-max trick).
    """
    e = torch.empty(like.shape, dtype=torch.float64, device=generator.device)
    e.exponential_(generator=generator)
    return (-e.clamp_(min=1e-300).log_()).to(device=like.device, dtype=like.dtype)
