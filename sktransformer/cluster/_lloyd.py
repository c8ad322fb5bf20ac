"""The k-means circuit evaluated in the coordinates its projections make sparse.

In :class:`~sktransformer.cluster.KMeansCircuit` every ``Q, K, V`` is a block selection
``P_x`` or ``P_y``, so a layer never needs the ``D x D`` products:

* the assignment block is dot-product attention on augmented tokens (Theorem 2.2): one
  matmul of point tokens ``[x, 1]`` with center tokens ``[c, -||c||^2 / 2]`` scores
  ``x.c - ||c||^2 / 2``, the Euclidean score up to a per-point constant. Its arg-max output
  ``e_a(i)`` is stored as the integer ``a(i)`` (hard) or as the row of soft weights (soft);
* the reset blocks overwrite ``y`` and ``c`` (a token attending to itself subtracts itself);
* the center update averages the members: ``index_add`` of the points by label (hard), or
  ``R^T [X, 1]`` (soft: the linear update, sums and weights in one matmul).

Both blocks run in one pass over chunks of points, so the ``n x k`` score matrix exists only
one ``(rows, k)`` tile at a time and the ``n x n`` reset attention never exists. The
equivalence with the token-level circuit is what ``tests/cluster/test_lloyd.py`` pins.
All functions take valid tensors (no input validation) and return tensors.
"""

import torch

from ..utils import iter_chunks


class Tokens:
    """Augmented point and center tokens for one score form, with reusable chunk buffers.

    ``"euclidean"``: points ``[x, 1]``, centers ``[c, -||c||^2/2]``: score
    ``s = x.c - ||c||^2/2``, so ``||x - c||^2 = ||x||^2 - 2 s`` and the softmax logit is
    ``2 s / t``. ``"dot"``: the paper's tokens ``[x, ||x||^2, 1]`` and
    ``[2c, -1, -||c||^2]``: ``s = -||x - c||^2`` exactly, the logit is ``s / t``.
    Points are centered by ``shift`` on the way in (precision in float32).
    """

    def __init__(self, X, centers, *, x_sq, rows, attention="euclidean", shift=None):
        self.X, self.x_sq, self.shift, self.attention = X, x_sq, shift, attention
        d = X.shape[1]
        half = 0.5 * centers.square().sum(1, keepdim=True)
        if attention == "dot":
            self.keys = torch.cat([2.0 * centers, -torch.ones_like(half), -2.0 * half], 1)
            self.scale = 1.0
        else:
            self.keys = torch.cat([centers, -half], 1)
            self.scale = 2.0
        self._buffer = X.new_empty(min(rows, X.shape[0]), self.keys.shape[1])
        self._buffer[:, d:] = 1.0
        self._tile = X.new_empty(self._buffer.shape[0], centers.shape[0])
        self._d = d

    def chunk(self, sl):
        """Point tokens of the rows ``sl`` (a view into a reused buffer) and their scores."""
        m = sl.stop - sl.start
        tokens = self._buffer[:m]
        x = tokens[:, :self._d]
        if self.shift is None:
            x.copy_(self.X[sl])
        else:
            torch.sub(self.X[sl], self.shift, out=x)
        if self.attention == "dot":
            tokens[:, self._d] = self.x_sq[sl]
        scores = torch.mm(tokens, self.keys.T, out=self._tile[:m])
        return x, tokens, scores

    def sq_dist(self, sl, best):
        """Squared distance to the center of score ``best``."""
        if self.attention == "dot":
            return -best
        return torch.addcmul(self.x_sq[sl], best, best.new_tensor(-2.0))


# Up to this many centers the one-hot update ``onehot^T [x, 1]`` (a small matmul) beats
# ``index_add`` on the CPU, whose scatter into few rows serializes.
_ONEHOT_UPDATE_MAX_K = 32


def hard_assign(scores):
    """Arg-max of each row (lowest index on ties), the row maximum and the one-hot.

    The one-hot of the maximum is ``sign(s - max) + 1`` (exactly 1 at the maximum, 0
    elsewhere), made in place in ``scores``: vectorized float ops, several times faster than
    ``argmax`` over a short row on the CPU, and a matvec gives the labels. A tie (the tile
    holds more ones than rows) sends the tile to ``argmax`` and the one-hot comes back None.
    """
    best = scores.amax(1, keepdim=True)
    onehot = scores.sub_(best).sign_().add_(1.0)
    if float(onehot.sum()) != onehot.shape[0]:  # exact: counts of ones are small integers
        return onehot.argmax(1), best.squeeze(1), None  # argmax takes the first maximum
    index = torch.arange(onehot.shape[1], dtype=onehot.dtype, device=onehot.device)
    return torch.mv(onehot, index).long(), best.squeeze(1), onehot


def assign(X, centers, *, x_sq, rows, attention="euclidean", shift=None):
    """The assignment block alone: labels and squared distances to the closest center."""
    n = X.shape[0]
    labels = torch.empty(n, dtype=torch.long, device=X.device)
    min_dist = torch.empty(n, dtype=X.dtype, device=X.device)
    tokens = Tokens(X, centers, x_sq=x_sq, rows=rows, attention=attention, shift=shift)
    for sl in iter_chunks(n, rows):
        _, _, scores = tokens.chunk(sl)
        labels[sl], best, _ = hard_assign(scores)
        min_dist[sl] = tokens.sq_dist(sl, best)
    return labels, min_dist.clamp_(min=0.0)


def sq_distances(X, centers, *, x_sq, rows, attention="euclidean", shift=None):
    """Squared distances to every center, shape (n_samples, n_clusters)."""
    out = X.new_empty(X.shape[0], centers.shape[0])
    tokens = Tokens(X, centers, x_sq=x_sq, rows=rows, attention=attention, shift=shift)
    for sl in iter_chunks(X.shape[0], rows):
        _, _, scores = tokens.chunk(sl)
        out[sl] = tokens.sq_dist(sl, scores) if attention == "dot" else \
            x_sq[sl].unsqueeze(1) - 2.0 * scores
    return out.clamp_(min=0.0)


def layer(X, sample_weight, centers, *, x_sq, rows, labels, min_dist,
          temperature=None, attention="euclidean", shift=None):
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

    Returns
    -------
    sums : Tensor of shape (n_clusters, n_features)
        Weighted sums of the members (hard) or ``R^T X`` (soft).
    weight_in_clusters : Tensor of shape (n_clusters,)
    """
    n, d = X.shape
    k = centers.shape[0]
    tokens = Tokens(X, centers, x_sq=x_sq, rows=rows, attention=attention, shift=shift)
    acc = X.new_zeros(k, tokens.keys.shape[1])  # [sums, weight] (and a spare slot for dot)
    for sl in iter_chunks(n, rows):
        x, tok, scores = tokens.chunk(sl)
        w = None if sample_weight is None else sample_weight[sl]
        if temperature is None:
            lab, best, onehot = hard_assign(scores)
            labels[sl] = lab
            min_dist[sl] = tokens.sq_dist(sl, best)
            tok[:, d] = 1.0  # the value appended to x: its sum is the cluster weight
            values = tok if w is None else tok * w.unsqueeze(1)
            if onehot is not None and k <= _ONEHOT_UPDATE_MAX_K:
                acc.addmm_(onehot.T, values)
            else:
                acc.index_add_(0, lab, values)
        else:
            best, labels[sl] = scores.max(1)
            min_dist[sl] = tokens.sq_dist(sl, best)
            r = torch.softmax(scores.mul_(tokens.scale / temperature), dim=1)
            if w is not None:
                r.mul_(w.unsqueeze(1))
            tok[:, d] = 1.0
            acc.addmm_(r.T, tok)
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
               temperature=None, attention="euclidean", shift=None, verbose=0):
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
                             attention=attention, shift=shift)
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
                                  shift=shift)
    dist = min_dist if sample_weight is None else min_dist * sample_weight
    return centers, labels, float(dist.sum()), i + 1
