"""The k-means circuit evaluated in the coordinates its projections make sparse.

In :class:`~sktransformer.cluster.KMeansCircuit` every ``Q, K, V`` is a block selection
``P_x`` or ``P_y``, so a layer never needs the ``D x D`` products:

* the assignment block is dot-product attention on augmented tokens (Theorem 2.2): one
  matmul of center tokens ``[c, -||c||^2 / 2]`` with point tokens ``[x, 1]`` scores
  ``x.c - ||c||^2 / 2``, the Euclidean score up to a per-point constant. Its arg-max output
  ``e_a(i)`` is stored as the integer ``a(i)`` (hard) or as the column of soft weights (soft);
* the reset blocks overwrite ``y`` and ``c`` (a token attending to itself subtracts itself);
* the center update averages the members: ``index_add`` of the points by label (hard), or
  ``R^T [X, 1]`` (soft: the linear update, sums and weights in one matmul).

Both blocks run in one pass over chunks of points, so the ``n x k`` score matrix exists only
one ``(rows, k)`` tile at a time and the ``n x n`` reset attention never exists. The
equivalence with the token-level circuit is what ``tests/cluster/test_lloyd.py`` pins.
All functions take valid tensors (no input validation) and return tensors.
"""

import torch

from ..utils import ChunkRunner, iter_chunks


class Tokens:
    """Augmented center tokens for one score form, and the point tokens of each chunk.

    ``"euclidean"``: points ``[x, 1]``, centers ``[c, -||c||^2/2]``: score
    ``s = x.c - ||c||^2/2``, so ``||x - c||^2 = ||x||^2 - 2 s`` and the softmax logit is
    ``2 s / t``. ``"dot"``: the paper's tokens ``[x, ||x||^2, 1]`` and
    ``[2c, -1, -||c||^2]``: ``s = -||x - c||^2`` exactly, the logit is ``s / t``.
    Points are centered by ``shift`` on the way in (precision in float32).

    Scores come as a ``(k, rows)`` tile: centers attend along rows, points along columns,
    which is the layout in which the arg-max over centers vectorizes across points.
    """

    def __init__(self, X, centers, *, x_sq, rows, attention="euclidean", shift=None):
        self.X, self.x_sq, self.shift, self.attention, self.rows = X, x_sq, shift, attention, rows
        half = 0.5 * centers.square().sum(1, keepdim=True)
        if attention == "dot":
            self.keys = torch.cat([2.0 * centers, -torch.ones_like(half), -2.0 * half], 1)
            self.scale = 1.0
        else:
            self.keys = torch.cat([centers, -half], 1)
            self.scale = 2.0

    def chunks(self, start, stop):
        """Yield ``(sl, tokens (m, D), scores (k, m))`` for the rows ``start:stop``.

        The tokens and the tile are views into buffers owned by this generator, overwritten
        by the next chunk: one generator per worker.
        """
        d, rows = self.X.shape[1], min(self.rows, stop - start)
        buffer = self.X.new_empty(rows, self.keys.shape[1])
        buffer[:, d:] = 1.0
        tile = self.X.new_empty(self.keys.shape[0], rows)
        for sl in iter_chunks(stop, rows, start):
            m = sl.stop - sl.start
            tokens = buffer[:m]
            if self.shift is None:
                tokens[:, :d].copy_(self.X[sl])
            else:
                torch.sub(self.X[sl], self.shift, out=tokens[:, :d])
            if self.attention == "dot":
                tokens[:, d] = self.x_sq[sl]
            out = tile if m == rows else tile[:, :m].contiguous()
            yield sl, tokens, torch.mm(self.keys, tokens.T, out=out)

    def sq_dist(self, sl, best):
        """Squared distance to the center of score ``best`` (broadcasts over centers)."""
        if self.attention == "dot":
            return -best
        return torch.addcmul(self.x_sq[sl], best, best.new_tensor(-2.0))

    def values(self, tokens):
        """``[x, 1]``: the values the center update averages (its last entry sums weights)."""
        if self.attention == "dot":
            tokens[:, self.X.shape[1]] = 1.0
        return tokens


def hard_assign(scores):
    """Arg-max over centers of a ``(k, m)`` score tile, and the maxima: labels (m,), best (m,).

    The tile is read as an image with ``m`` channels and one row of ``k`` pixels in
    channels-last memory, so ``max_pool2d`` over the row returns the maximum and its index
    vectorized across points: several times faster than ``argmax`` over short rows on the
    CPU. Ties go to the lowest index (the pool keeps the first maximum), as in scikit-learn.
    """
    k, m = scores.shape
    image = scores.as_strided((1, m, 1, k), (m * k, 1, m * k, m))
    best, labels = torch.nn.functional.max_pool2d(image, (1, k), return_indices=True)
    return labels.view(m), best.view(m)


_SERIAL = ChunkRunner(1)


def assign(X, centers, *, x_sq, rows, attention="euclidean", shift=None, runner=_SERIAL):
    """The assignment block alone: labels and squared distances to the closest center."""
    n = X.shape[0]
    labels = torch.empty(n, dtype=torch.long, device=X.device)
    min_dist = torch.empty(n, dtype=X.dtype, device=X.device)
    tokens = Tokens(X, centers, x_sq=x_sq, rows=rows, attention=attention, shift=shift)

    def span(start, stop):
        for sl, _, scores in tokens.chunks(start, stop):
            labels[sl], best = hard_assign(scores)
            min_dist[sl] = tokens.sq_dist(sl, best)

    runner.map(span, n)
    return labels, min_dist.clamp_(min=0.0)


def sq_distances(X, centers, *, x_sq, rows, attention="euclidean", shift=None, runner=_SERIAL):
    """Squared distances to every center, shape (n_samples, n_clusters)."""
    out = X.new_empty(X.shape[0], centers.shape[0])
    tokens = Tokens(X, centers, x_sq=x_sq, rows=rows, attention=attention, shift=shift)

    def span(start, stop):
        for sl, _, scores in tokens.chunks(start, stop):
            out[sl] = (-scores if attention == "dot" else x_sq[sl] - 2.0 * scores).T

    runner.map(span, X.shape[0])
    return out.clamp_(min=0.0)


def layer(X, sample_weight, centers, *, x_sq, rows, labels, min_dist,
          temperature=None, attention="euclidean", shift=None, runner=_SERIAL):
    """One layer (one Lloyd step) from ``centers``.

    Parameters
    ----------
    X : Tensor of shape (n_samples, n_features)
    sample_weight : Tensor of shape (n_samples,) or None
    centers : Tensor of shape (n_clusters, n_features)
        Centers in the shifted coordinates ``x - shift``.
    x_sq : Tensor of shape (n_samples,)
        ``||x_i - shift||^2``.
    rows : int
        Chunk size.
    labels, min_dist : Tensor of shape (n_samples,)
        Written in place: the arg-max assignment and the squared distance to that center
        (both with respect to the input ``centers``).
    temperature : float or None
        ``None`` is hard attention; otherwise soft weights ``softmax(-||x - c||^2 / t)``.
    attention : {"euclidean", "dot"}
    shift : Tensor of shape (n_features,) or None
        Subtracted from each chunk.
    runner : ChunkRunner
        Splits the rows among worker threads.

    Returns
    -------
    sums : Tensor of shape (n_clusters, n_features)
        Weighted sums of the members (hard) or ``R^T X`` (soft).
    weight_in_clusters : Tensor of shape (n_clusters,)
    """
    d = X.shape[1]
    tokens = Tokens(X, centers, x_sq=x_sq, rows=rows, attention=attention, shift=shift)

    def span(start, stop):
        acc = X.new_zeros(centers.shape[0], tokens.keys.shape[1])  # [sums, weight, ...]
        for sl, tok, scores in tokens.chunks(start, stop):
            lab, best = hard_assign(scores)
            labels[sl] = lab
            min_dist[sl] = tokens.sq_dist(sl, best)
            values = tokens.values(tok)
            if sample_weight is not None:
                values = values * sample_weight[sl].unsqueeze(1)
            if temperature is None:
                acc.index_add_(0, lab, values)
            else:
                acc.addmm_(torch.softmax(scores.mul_(tokens.scale / temperature), dim=0),
                           values)
        return acc

    acc = sum(runner.map(span, X.shape[0]))
    min_dist.clamp_(min=0.0)
    return acc[:, :d], acc[:, d].clone()


def relocate_empty(X, sample_weight, sums, weight_in_clusters, labels, min_dist, *,
                   shift=None, hard=True):
    """Move each empty cluster onto one of the points farthest from their centers.

    scikit-learn's rule: the ``n_empty`` points with the largest distance to their current
    center become the new centers, and (hard mode) leave the cluster they were counted in.
    Changes ``sums`` and ``weight_in_clusters`` in place; returns the number relocated.
    """
    empty = torch.nonzero(weight_in_clusters == 0).flatten()
    n_empty = empty.numel()
    if n_empty == 0:
        return 0
    far = torch.topk(min_dist, n_empty).indices
    x = X[far] if shift is None else X[far] - shift
    w = x.new_ones(n_empty) if sample_weight is None else sample_weight[far]
    if hard:
        old = labels[far]
        sums.index_add_(0, old, -x * w.unsqueeze(1))
        weight_in_clusters.index_add_(0, old, -w)
    sums[empty] = x * w.unsqueeze(1)
    weight_in_clusters[empty] = w
    return n_empty


def average(sums, weight_in_clusters, old_centers):
    """``sums / weight``, keeping the old center where a cluster weighs nothing."""
    occupied = weight_in_clusters > 0
    safe = torch.where(occupied, weight_in_clusters, torch.ones_like(weight_in_clusters))
    return torch.where(occupied.unsqueeze(1), sums / safe.unsqueeze(1), old_centers)


def run_layers(X, sample_weight, centers, *, x_sq, rows, max_iter, tol,
               temperature=None, attention="euclidean", shift=None, verbose=0,
               runner=_SERIAL):
    """Apply the layer until convergence or ``max_iter`` layers (scikit-learn's Lloyd loop).

    Stops on strict convergence (labels unchanged, hard mode only) or when the total squared
    center shift is ``<= tol``. Then, unless strictly converged, runs the assignment block once
    more so that labels match the returned centers.

    Returns
    -------
    centers, labels, inertia (float), n_iter (int)
    """
    n = X.shape[0]
    hard = temperature is None
    labels = torch.empty(n, dtype=torch.long, device=X.device)
    labels_old = torch.full_like(labels, -1)
    min_dist = torch.empty(n, dtype=X.dtype, device=X.device)
    strict = False
    for i in range(max_iter):
        sums, weight = layer(X, sample_weight, centers, x_sq=x_sq, rows=rows, labels=labels,
                             min_dist=min_dist, temperature=temperature,
                             attention=attention, shift=shift, runner=runner)
        relocate_empty(X, sample_weight, sums, weight, labels, min_dist, shift=shift, hard=hard)
        new_centers = average(sums, weight, centers)
        if verbose:
            dist = min_dist if sample_weight is None else min_dist * sample_weight
            print(f"Iteration {i}, inertia {float(dist.sum())}.")
        shift_tot = float((new_centers - centers).square().sum())
        centers = new_centers
        if hard and torch.equal(labels, labels_old):
            strict = True
            if verbose:
                print(f"Converged at iteration {i}: strict convergence.")
            break
        if shift_tot <= tol:
            if verbose:
                print(f"Converged at iteration {i}: center shift {shift_tot} within tolerance {tol}.")
            break
        labels, labels_old = labels_old, labels
    if not strict:
        labels, min_dist = assign(X, centers, x_sq=x_sq, rows=rows, attention=attention,
                                  shift=shift, runner=runner)
    dist = min_dist if sample_weight is None else min_dist * sample_weight
    return centers, labels, float(dist.sum()), i + 1
