"""The center-update blocks: what makes each clustering variant what it is.

Every variant runs the same layer (``_lloyd.run_layers``): the assignment block scores the
points against the centers, then one of these updates lets each center attend to its
members with its own weighting (the grouped weightings of ``sktransformer.attention``):

=================  ===========================================  ======================
update             attention of center j over its members       variant
=================  ===========================================  ======================
``Mean``           uniform (hard) or soft assignments            k-means, soft k-means
``Mean(sphere)``   uniform, then the token is normalized         spherical k-means
``Trim``           norm-max: uniform over the members within     trimmed k-means
                   the (1 - trim)-quantile of the distances
                   (the layer's sums within the last radius,
                   corrected by the points that crossed it)
``Sparsemax``      sparsemax of ``-beta ||x - c||^2 / sqrt(d)``  robust k-means
``Medoid``         arg-max (with Gumbel noise: a sample) of      k-medoids
                   minus the in-cluster cost; a data point
=================  ===========================================  ======================

An update is called as ``update(points, sample_weight, centers, labels, min_dist, sums,
weight, runner=...)`` after the assignment block wrote ``labels`` and ``min_dist`` (and, when
``update.accumulate``, the members' ``sums`` and ``weight``), and returns the new centers,
the output labels (``-1`` marks a trimmed point) and the objective of the input centers
as a function of no arguments (it is only logged: the caller calls it, if at all, before
the next layer overwrites ``min_dist``).
The assignment block's temperature is not the update's: ``run_layers`` takes it.
``finalize`` turns the last assignment into the fitted labels and inertia. ``strict`` says
whether unchanged output labels mean a fixed point (scikit-learn's strict convergence).
"""

import math

import torch

from ..attention import (
    group_argmax,
    group_quantile,
    group_sparsemax,
    group_sums,
    gumbel,
    keep_incumbent,
)
from ..utils import flatnonzero, greater
from . import _lloyd
from ._compiled import (
    sparsemax_sums,
    sparsemax_sums_available,
    trim_pass,
    trim_pass_available,
)


def _objective(min_dist, sample_weight, mask=None):
    dist = min_dist if sample_weight is None else min_dist * sample_weight
    if mask is not None:
        dist = dist * mask
    return float(dist.sum())


def normalize_rows(centers, old_centers=None):
    """Rows scaled to unit norm; a zero row keeps ``old_centers``' row (or stays 0)."""
    norm = centers.norm(dim=1, keepdim=True)
    unit = centers / norm.clamp(min=torch.finfo(centers.dtype).tiny)
    fallback = torch.zeros_like(centers) if old_centers is None else old_centers
    return torch.where(norm > 0, unit, fallback)


class Mean:
    """Lloyd's update: the (weighted) mean of the members, or the soft-assignment average.

    With ``sphere=True`` the new center is projected back onto the unit sphere
    (Dhillon & Modha's spherical k-means; the token normalization of the circuit).
    ``algorithm``: how the compiled loop runs the hard layers (``"lloyd"``, ``"hamerly"``
    or ``"auto"``; :func:`~sktransformer.cluster._compiled.use_bounds`).
    """

    accumulate = True

    def __init__(self, soft=False, sphere=False, algorithm="lloyd"):
        self.soft, self.sphere, self.algorithm = soft, sphere, algorithm
        self.strict = not soft
        self.compiled = not soft  # (the compiled loop runs this update)

    def __call__(self, points, sample_weight, centers, labels, min_dist, sums, weight, *,
                 runner):
        _lloyd.relocate_empty(points, sample_weight, sums, weight, labels, min_dist,
                              hard=not self.soft)
        new = _lloyd.average(sums, weight, centers)
        if self.sphere:
            new = normalize_rows(new, centers)
        return new, labels, lambda: _objective(min_dist, sample_weight)

    def finalize(self, points, sample_weight, centers, labels, min_dist, *, runner):
        return centers, labels, _objective(min_dist, sample_weight)


_WIDEN = 0.9  # the guess of the next radius (squared) to select beyond, from the last one


class Trim:
    """Trimmed k-means: each center averages its members within a distance threshold.

    ``mode="global"`` keeps the points nearest their centers that carry ``1 - trim`` of
    the total weight, one threshold for all (Cuesta-Albertos, Gordaliza & Matran 1997; R's
    tclust with ``restr.fact = 1``); ``mode="per_cluster"`` keeps, in each cluster, the
    members within the ``(1 - trim)``-quantile of that cluster's distances (the paper's
    trimmed step). Trimmed points get label -1 and weigh nothing in the update. Empty
    clusters move onto the farthest kept points.
    """

    accumulate = True  # the layer sums the members within ``cutoff``; corrected after
    strict = True

    def __init__(self, n_clusters, trim, mode):
        self.n_clusters, self.trim, self.mode = n_clusters, trim, mode
        self.thresholds = None  # squared distances, shape (n_clusters,)
        self.cutoff = None  # the layer sums only the members within it: the last radius
        self._marks = []  # (see _spare)
        self._scratch = None  # (the compiled pass's work space)

    def _groups(self, labels):
        if self.mode == "global":  # (a view: no n-sized tensor)
            return labels.new_zeros(1).expand(len(labels)), 1
        return labels, self.n_clusters

    def _bound(self, radius, labels):
        """Each point's radius: one for all when of shape (1,), else its cluster's."""
        return radius if len(radius) == 1 else radius.index_select(0, labels)

    def _mark(self, labels, min_dist, sample_weight, out=None):
        """The radius, the trimmed points (their indices), the labels with -1 there (in
        ``out`` when given), and the points beyond ``_WIDEN`` of the last radius (their
        indices; None for all) when the new radius is among them: then every point trimmed
        or on the other side of the last radius is one of these few."""
        groups, n_groups = self._groups(labels)
        near = None
        if self.cutoff is not None and sample_weight is None:
            wide = self.cutoff * _WIDEN
            near = _beyond(min_dist, self._bound(wide, labels))
        # the radius is selected among the ``near`` points, when enough
        radius = -group_quantile(-min_dist, groups, n_groups, sample_weight, q=1 - self.trim,
                                 below=None if near is None else -wide, tail=near)
        # (an empty cluster's radius is -inf: it has no point to miss)
        if near is not None and not bool((greater(radius, wide) | (radius == -torch.inf)).all()):
            near = None  # (some cluster's radius shrank below 0.9 of the last)
        trimmed = _beyond_among(min_dist, labels, self._bound, radius, among=near)
        marked = labels.clone() if out is None else out.copy_(labels)
        return marked.index_fill_(0, trimmed, -1), trimmed, radius, near

    def _spare(self, labels):
        """One of two label buffers kept across layers, not the one returned last (which
        ``run_layers`` compares with): fewer fresh n-sized tensors per layer, whose memory
        traffic measured 5-10% of the next layer's time."""
        if len(self._marks) < 2:
            self._marks.append(torch.empty_like(labels))
        else:
            self._marks.append(self._marks.pop(0))
        return self._marks[-1]

    def _thresholds(self, labels, radius, trimmed):
        """Per cluster, the squared distance of the farthest kept point, ``inf`` where
        nothing was trimmed (trimming nothing flags nothing): the radius, which is the
        distance of a kept point (0 where every point weighs nothing: none is kept)."""
        groups, n_groups = self._groups(labels)
        cut = torch.zeros(n_groups, dtype=torch.bool, device=labels.device)
        cut[groups[trimmed]] = True
        far_kept = torch.where(radius > -torch.inf, radius, 0.0)
        radius = torch.where(cut, far_kept, torch.inf)
        return radius.expand(self.n_clusters) if self.mode == "global" else radius

    def _crossed(self, labels, min_dist, radius, trimmed, near):
        """The points the layer's sums (over the members within ``cutoff``) got wrong, as
        (those to add, those to take out): the ones between the last radius and this one
        (among ``near``, unless None)."""
        if self.cutoff is None:  # the first layer summed every point
            return trimmed.new_empty(0), trimmed
        low, high = torch.minimum(radius, self.cutoff), torch.maximum(radius, self.cutoff)
        crossed = _beyond_among(min_dist, labels, self._bound, low, high, among=near)
        kept = min_dist[crossed] <= self._bound(radius, labels[crossed])
        return crossed[kept], crossed[~kept]

    def _pass(self, points, labels, min_dist, sample_weight, marked, sums=None, weight=None):
        """The radius, the trimmed points, those that crossed the last radius (entered,
        left), and whether ``sums`` and ``weight`` (a layer's, when given) were corrected
        for them; ``marked`` gets the labels with -1 for the trimmed points. By the
        compiled pass where it runs (the same, in one call), else by torch's ops."""
        if (sample_weight is None and points.compiled
                and trim_pass_available(min_dist, labels)):
            if self._scratch is None:
                self._scratch = torch.empty_like(labels)
            corrected = (sums is not None and points.X.is_contiguous()
                         and points.X.dtype == sums.dtype)
            radius, trimmed, entered, left = trim_pass(
                min_dist, labels, self._groups(labels)[1], 1 - self.trim, self.cutoff,
                None if self.cutoff is None else self.cutoff * _WIDEN, marked, self._scratch,
                (points.X, points.shift, sums, weight) if corrected else None)
            return radius, trimmed, entered, left, corrected
        _, trimmed, radius, near = self._mark(labels, min_dist, sample_weight, out=marked)
        entered, left = self._crossed(labels, min_dist, radius, trimmed, near)
        return radius, trimmed, entered, left, False

    def __call__(self, points, sample_weight, centers, labels, min_dist, sums, weight, *,
                 runner):
        # the layer summed the members within the last layer's radius (``cutoff``): correct
        # by the few whose side changed, which lie near the radius (far outliers never
        # entered the sums, so their magnitude costs no precision)
        marked = self._spare(labels)
        radius, trimmed, entered, left, corrected = self._pass(
            points, labels, min_dist, sample_weight, marked, sums, weight)
        self.cutoff = radius
        most = len(entered) + len(left) > points.n // 2  # most changed sides: sum again
        w = None
        if sample_weight is not None or most:
            w = (min_dist.new_ones(points.n) if sample_weight is None
                 else sample_weight.clone()).index_fill_(0, trimmed, 0.0)
            weight = group_sums(w, labels, self.n_clusters)  # exact zeros
        if most:
            sums = _lloyd.weighted_sums(points, labels, w, self.n_clusters, runner=runner)
        elif not corrected:
            for rows, sign in ((left, -1), (entered, 1)):
                _lloyd.add_rows(points, sums, labels, rows, sample_weight, alpha=sign)
                if sample_weight is None:  # (the layer's counts: integers, exactly)
                    weight.index_add_(0, labels[rows], weight.new_ones(len(rows)), alpha=sign)
        _lloyd.relocate_empty(points, sample_weight, sums, weight, labels, min_dist,
                              excluded=trimmed)
        new = _lloyd.average(sums, weight, centers)
        return new, marked, lambda: self._objective(min_dist, sample_weight, trimmed)

    @staticmethod
    def _objective(min_dist, sample_weight, trimmed):
        """The objective over the kept points (not the total less the trimmed: far outliers
        would cancel the precision)."""
        return _objective(min_dist.index_fill(0, trimmed, 0.0), sample_weight)

    def finalize(self, points, sample_weight, centers, labels, min_dist, *, runner):
        marked = torch.empty_like(labels)
        radius, trimmed, *_ = self._pass(points, labels, min_dist, sample_weight, marked)
        self.thresholds = self._thresholds(labels, radius, trimmed)
        return centers, marked, self._objective(min_dist, sample_weight, trimmed)


def _beyond(values, low, high=None):
    """Indices of the ``values`` above ``low`` (and at most ``high``), bounds of shape (1,)
    or ``values``' (numpy compares them on the CPU: :mod:`sktransformer.utils._compare`)."""
    inside = greater(values, low)
    if high is not None:
        inside &= ~greater(values, high)
    return flatnonzero(inside)


def _beyond_among(values, labels, bound, low, high=None, *, among=None):
    """:func:`_beyond` with per-cluster bounds (``bound(radius, labels)`` gives each
    point's), looking only at the points ``among`` (indices, in order) unless None."""
    if among is None:
        return _beyond(values, bound(low, labels),
                       None if high is None else bound(high, labels))
    labels = labels.index_select(0, among)
    inside = _beyond(values.index_select(0, among), bound(low, labels),
                     None if high is None else bound(high, labels))
    return among.index_select(0, inside)


class Sparsemax:
    """Robust k-means: ``c_j = sum_i p_i x_i``, ``p = sparsemax(-beta ||x_i - c_j||^2 /
    sqrt(d))`` over the members of cluster ``j`` (the paper's reference loop).

    Members far from the current center get weight exactly 0, so outliers cannot pull the
    center. As ``beta -> 0`` the weights tend to uniform (Lloyd); as ``beta`` grows, to the
    member nearest the current center. The result depends on the distances, not only on the
    labels, so there is no strict convergence: the loop stops on ``tol``.
    """

    accumulate = False
    strict = False

    def __init__(self, n_clusters, beta):
        self.n_clusters, self.beta = n_clusters, beta
        self.tau = None  # the last layer's thresholds: where the next search starts
        self._scores = self._support = None  # (work space kept across layers)

    def __call__(self, points, sample_weight, centers, labels, min_dist, sums, weight, *,
                 runner):
        scale = -self.beta / math.sqrt(points.d)
        if (sample_weight is None and points.compiled
                and sparsemax_sums_available(min_dist, labels, points.X)):
            # the same in one call (the weights computed as they are added)
            if self._support is None:
                self._support = torch.empty_like(min_dist, dtype=torch.bool)
            sums, weight, self.tau = sparsemax_sums(
                min_dist, labels, self.n_clusters, scale, self.tau, points.X, points.shift,
                self._support, runner=runner)
        else:
            if self._scores is None:  # (kept across layers: fresh memory costs page faults)
                self._scores = min_dist.new_empty(len(min_dist), dtype=torch.float64)
            scores = self._scores.copy_(min_dist).mul_(scale)
            p, self.tau = group_sparsemax(scores, labels, self.n_clusters, sample_weight,
                                          start=self.tau, return_threshold=True)
            sums = _lloyd.weighted_sums(points, labels, p, self.n_clusters, runner=runner)
            weight = group_sums(p, labels, self.n_clusters).to(sums.dtype)
        _lloyd.relocate_empty(points, sample_weight, sums, weight, labels, min_dist,
                              hard=False)
        new = _lloyd.average(sums, weight, centers)
        return new, labels, lambda: _objective(min_dist, sample_weight)

    def finalize(self, points, sample_weight, centers, labels, min_dist, *, runner):
        return centers, labels, _objective(min_dist, sample_weight)


class Medoid:
    """K-medoids: each center moves to the member of least in-cluster cost.

    The cost of member ``i`` of cluster ``j`` is ``sum_l w_l d(x_i, x_l)`` over the members
    (``metric="euclidean"``), or, for ``"sqeuclidean"``, ``||x_i - m_j||^2`` with ``m_j`` the
    members' mean (the same ordering, since ``sum_l ||x_i - x_l||^2 = W_j ||x_i - m_j||^2 +
    const``). ``temperature=None``: the arg-max of ``-cost``, a new medoid only when
    strictly better (the alternate step of scikit-learn-extra's KMedoids), where costs
    within a relative ``sqrt(eps)`` count as equal: the two members of a pair have exactly
    equal costs, which rounding must not split. A temperature:
    a draw from ``softmax(-cost / (t * scale))`` by the Gumbel-max trick (randomized
    k-medoids), ``scale`` being the mean cost at the first layer, so ``t`` is unitless.
    Random layers may raise the objective, so the best medoids seen are kept.
    """

    def __init__(self, n_clusters, indices, *, metric="euclidean", temperature=None,
                 generator=None):
        self.n_clusters, self.metric = n_clusters, metric
        self.indices = indices.clone()
        self.gumbel_temperature, self.generator = temperature, generator
        self.accumulate = metric == "sqeuclidean"
        self.strict = temperature is None
        self.scale = None
        self.best = None  # (objective, indices)

    def objective(self, min_dist, sample_weight):
        dist = min_dist.sqrt() if self.metric == "euclidean" else min_dist
        return _objective(dist, sample_weight)

    def _costs(self, points, sample_weight, labels, sums, weight, runner):
        if self.metric == "sqeuclidean":
            means = _lloyd.average(sums, weight, sums)
            return _lloyd.sq_dist_to_own(points, means, labels, runner=runner)
        w = points.new_ones(points.n) if sample_weight is None else sample_weight
        total = group_sums(w, labels, self.n_clusters)
        dist_sums = _lloyd.distance_sums(points, labels, self.n_clusters, sample_weight,
                                         runner=runner)
        return dist_sums / total[labels].clamp(min=torch.finfo(w.dtype).tiny)

    def __call__(self, points, sample_weight, centers, labels, min_dist, sums, weight, *,
                 runner):
        objective = self.objective(min_dist, sample_weight)
        if self.best is None or objective < self.best[0]:
            self.best = (objective, self.indices.clone())
        rtol = torch.finfo(points.dtype).eps ** 0.5
        nearest = None
        if self.gumbel_temperature is None and self.metric == "sqeuclidean":
            # the member nearest each mean, in one compiled pass where it runs
            nearest = _lloyd.nearest_to_own(points, _lloyd.average(sums, weight, sums),
                                            labels, runner=runner)
        if nearest is not None:
            dist, least, chosen = nearest
            chosen = keep_incumbent(-dist, labels, -least, chosen, self.indices, rtol=rtol)
        else:
            scores = -self._costs(points, sample_weight, labels, sums, weight, runner)
            incumbent = self.indices
            if self.gumbel_temperature is not None:
                if self.scale is None:
                    self.scale = float(scores.abs().mean()) or 1.0
                scores = scores / (self.gumbel_temperature * self.scale) + gumbel(
                    scores, generator=self.generator)
                incumbent = None
            chosen = group_argmax(scores, labels, self.n_clusters, incumbent=incumbent,
                                  rtol=rtol)
        empty = chosen < 0
        if empty.any():  # scikit-learn's relocation: onto the farthest points
            far = torch.topk(min_dist, int(empty.sum())).indices
            chosen[empty] = far
        self.indices = chosen
        return points.rows_of(chosen), labels, lambda: objective

    def finalize(self, points, sample_weight, centers, labels, min_dist, *, runner):
        if self.best is not None and self.best[0] < self.objective(min_dist, sample_weight):
            self.indices = self.best[1]
            centers = points.rows_of(self.indices)
            labels, _ = _lloyd.assign(points, centers, runner=runner)
        # by differences, not the matmul form: a medoid's own distance is exactly 0, which
        # matters under the square root of the Euclidean metric
        exact = _lloyd.sq_dist_to_own(points, centers, labels, runner=runner)
        return centers, labels, self.objective(exact, sample_weight)

