"""The k-means transformer of Clarkson et al., written out token by token.

One layer is one Lloyd iteration (Theorem 2.1). Point tokens are ``z_i = [x_i; y_i]`` and
center tokens ``w_j = [c_j; e_j]``, width ``D = d + k``; four attention blocks with fixed
``Q, K, V`` matrices (all biases 0) update them:

1. ``assign``        z_i += A(P_x, P_x,  P_y)(z_i, centers)   writes e_a(i) into y_i
2. ``reset_points``  z_i += A(P_x, P_x, -P_y)(z_i, points)    removes the old y_i
3. ``update``        w_j += A(P_y, P_y,  P_x)(w_j, points')   adds the mean of cluster j
4. ``reset_centers`` w_j += A(P_y, P_y, -P_x)(w_j, centers)   removes the old c_j

Blocks 1-2 read the layer's input tokens; block 3 reads the updated points and block 4 the
input centers. The dot-product form (Theorem 2.2) appends ``[||x||^2, 1]`` to point tokens and
``[1, ||c||^2]`` to center tokens so that plain dot-product attention scores ``-||x - c||^2``,
and a feed-forward block with a quadratic activation rewrites ``||c||^2`` after the update.

This module is the reference: it materializes the ``n x n`` attention of block 2 and is meant
for inspection and tests on small data. :mod:`sktransformer.cluster._lloyd` evaluates the same
layer in the block-sparse coordinates that these projections make possible, in chunks.
"""

import torch
from torch import nn

from ..attention import attend, get_score

BLOCKS = ("assign", "reset_points", "update", "reset_centers")
CIRCUIT_ATTENTIONS = ("euclidean", "dot")  # the scores with a written construction


def _diag(*parts):
    flat = [torch.as_tensor(p, dtype=torch.float64).reshape(-1) for p in parts]
    return torch.diag(torch.cat(flat))


class KMeansCircuit(nn.Module):
    """The fixed-weight k-means transformer: ``n_layers`` layers = ``n_layers`` Lloyd steps.

    Parameters
    ----------
    n_features : int
        Dimension ``d`` of the points.
    n_clusters : int
        Number of centers ``k``; the one-hot scratch space has width ``k``.
    temperature : float or None, default=None
        Softmax temperature of the assignment and update blocks (the paper's gamma is its
        inverse); ``None`` is hard (arg-max) attention, uniform over ties. The two reset
        blocks are always hard: each token attends to itself.
    attention : {"euclidean", "dot"}, default="euclidean"
        Euclidean attention (Theorem 2.1) or its dot-product form (Theorem 2.2).
    center_update : {"softmax", "linear"}, default="softmax"
        ``"softmax"`` is block 3 as above; ``"linear"`` is the paper's normalized
        dot-product variant ``a_ji = e_j . y_i / sum_i e_j . y_i``, the exact (soft) mean.

    Attributes
    ----------
    blocks : dict of str to dict of str to Tensor
        ``blocks[name]["Q" | "K" | "V"]``, each of shape (D, D).
    ffn : dict of str to Tensor
        Only for ``attention="dot"``: ``W_in`` (d, D), ``W_out`` (D, d), ``W_skip`` (D, D);
        the block adds ``W_out (W_in w)^2 + W_skip w`` to each center token.

    Examples
    --------
    >>> import torch
    >>> from sktransformer.cluster import KMeansCircuit
    >>> X = torch.tensor([[0.0, 0.0], [0.0, 1.0], [10.0, 0.0], [10.0, 1.0]])
    >>> circuit = KMeansCircuit(n_features=2, n_clusters=2)
    >>> centers, labels = circuit(X, X[[0, 2]], n_layers=1)
    >>> centers
    tensor([[ 0.0000,  0.5000],
            [10.0000,  0.5000]])
    >>> labels
    tensor([0, 0, 1, 1])
    """

    def __init__(
        self, n_features, n_clusters, *, temperature=None, attention="euclidean",
        center_update="softmax",
    ):
        super().__init__()
        if attention not in CIRCUIT_ATTENTIONS:
            raise ValueError(f"attention={attention!r}; choose 'euclidean' or 'dot'.")
        if center_update not in ("softmax", "linear"):
            raise ValueError(f"center_update={center_update!r}; choose 'softmax' or 'linear'.")
        d, k = n_features, n_clusters
        self.n_features, self.n_clusters = d, k
        self.temperature, self.attention, self.center_update = temperature, attention, center_update
        ones_d, ones_k, zeros_d, zeros_k = [1.0] * d, [1.0] * k, [0.0] * d, [0.0] * k
        if attention == "euclidean":
            p_x, p_y = _diag(ones_d, zeros_k), _diag(zeros_d, ones_k)
            weights = {
                "assign": (p_x, p_x, p_y),
                "reset_points": (p_x, p_x, -p_y),
                "update": (p_y, p_y, p_x),
                "reset_centers": (p_y, p_y, -p_x),
            }
        else:
            # slots: x (d), y (k), a, b; points carry a = ||x||^2, b = 1, centers a = 1, b = ||c||^2
            p_x, p_y = _diag(ones_d, zeros_k, 0, 0), _diag(zeros_d, ones_k, 0, 0)
            q_dist = _diag([2.0] * d, zeros_k, -1, -1)  # q = (2x, 0, -||x||^2, -1)
            k_centers = _diag(ones_d, zeros_k, 1, 1)  # k = (c, 0, 1, ||c||^2)
            k_points = _diag(ones_d, zeros_k, 0, 0)
            # k = (x', 0, 1, ||x'||^2): the two last slots swapped
            k_points[d + k, d + k + 1] = k_points[d + k + 1, d + k] = 1.0
            q_onehot = 2.0 * p_y  # 2 e_j . y_i = -||e_j - y_i||^2 + const for one-hot y
            weights = {
                "assign": (q_dist, k_centers, p_y),
                "reset_points": (q_dist, k_points, -p_y),
                "update": (q_onehot, p_y, p_x),
                "reset_centers": (q_onehot, p_y, -p_x),
            }
            width = d + k + 2
            w_in = torch.zeros(d, width, dtype=torch.float64)
            w_in[:, :d] = torch.eye(d, dtype=torch.float64)
            w_out = torch.zeros(width, d, dtype=torch.float64)
            w_out[d + k + 1] = 1.0
            w_skip = torch.zeros(width, width, dtype=torch.float64)
            w_skip[d + k + 1, d + k + 1] = -1.0
            for name, value in (("W_in", w_in), ("W_out", w_out), ("W_skip", w_skip)):
                self.register_buffer(f"ffn_{name}", value)
        if center_update == "linear":  # scores e_j . y_i, in either form
            weights["update"] = (p_y, p_y, p_x)
        for block, (q, k_, v) in weights.items():
            for name, value in zip("QKV", (q, k_, v)):
                self.register_buffer(f"{block}_{name}", value)

    @property
    def blocks(self):
        return {b: {m: getattr(self, f"{b}_{m}") for m in "QKV"} for b in BLOCKS}

    @property
    def ffn(self):
        if self.attention != "dot":
            return {}
        return {m: getattr(self, f"ffn_{m}") for m in ("W_in", "W_out", "W_skip")}

    def embed(self, X, centers):
        """Point tokens ``[x; 0]`` and center tokens ``[c; e_j]`` (plus the dot-form slots)."""
        n, k = X.shape[0], self.n_clusters
        points = [X, X.new_zeros(n, k)]
        cents = [centers, torch.eye(k, dtype=X.dtype, device=X.device)]
        if self.attention == "dot":  # the dot score's slots [||x||^2, 1]
            points.append(get_score("dot").queries(X)[:, self.n_features:])
            cents += [X.new_ones(k, 1), centers.square().sum(1, keepdim=True)]
        return torch.cat(points, 1), torch.cat(cents, 1)

    def _block(self, name, queries, keys, score=None, weight=None):
        q, k, v = (getattr(self, f"{name}_{m}").to(queries.dtype) for m in "QKV")
        # The resets are bookkeeping (a token attends to itself) and stay hard at any
        # temperature; with a soft reset a point would subtract its neighbours' old y too.
        temperature = None if name.startswith("reset") else self.temperature
        return attend(queries @ q.T, keys @ k.T, keys @ v.T, score=score or self.attention,
                      temperature=temperature, weight=weight)

    def layer(self, points, centers):
        """One layer: ``(points (n, D), centers (k, D)) -> (points', centers')``."""
        new_points = (points + self._block("assign", points, centers)
                      + self._block("reset_points", points, points))
        if self.center_update == "linear":
            update = self._block("update", centers, new_points, score="dot", weight="linear")
        else:
            update = self._block("update", centers, new_points)
        new_centers = centers + update + self._block("reset_centers", centers, centers)
        if self.attention == "dot":
            w_in, w_out, w_skip = (t.to(points.dtype) for t in self.ffn.values())
            quadratic = (new_centers @ w_in.T).square() @ w_out.T
            new_centers = new_centers + quadratic + new_centers @ w_skip.T
        return new_points, new_centers

    def forward(self, X, centers, n_layers=1):
        """Run ``n_layers`` layers from ``centers``; return the final centers and assignments.

        Parameters
        ----------
        X : Tensor of shape (n_samples, n_features)
        centers : Tensor of shape (n_clusters, n_features)
        n_layers : int, default=1

        Returns
        -------
        centers : Tensor of shape (n_clusters, n_features)
        labels : Tensor of shape (n_samples,)
            Arg-max of the assignment slot ``y`` written by the last layer.
        """
        d, k = self.n_features, self.n_clusters
        if X.ndim != 2 or X.shape[1] != d or tuple(centers.shape) != (k, d):
            raise ValueError(f"This circuit is built for {d} features and {k} clusters: X "
                             f"must have shape (n_samples, {d}) and centers ({k}, {d}), got "
                             f"{tuple(X.shape)} and {tuple(centers.shape)}.")
        points, cents = self.embed(X, centers)
        for _ in range(n_layers):
            points, cents = self.layer(points, cents)
        return cents[:, :d], points[:, d:d + k].argmax(1)
