"""The k-means circuit with every projection learned: a clustering algorithm found by training.

Same tokens and the same four blocks as :class:`~sktransformer.cluster.KMeansCircuit`
(assign, reset_points, update, reset_centers), but each block's ``Q, K, V`` is a learnable
``D x D`` linear map with bias and the attention is
``softmax(-a ||Q q - K k||^2 / sqrt(D))``, the paper's learned layer. ``D = d + k`` (the
one-hot scratch space) or ``D = d`` (the ablation without it). One call of :meth:`step` is
one layer; applying it ``T`` times, re-embedding the new centers after each, is the learned
algorithm. Weights are saved and loaded as tensors only (``torch.load(weights_only=True)``).
"""

import copy
import math
import os

import torch

from ..utils import logger

BLOCKS = ("assign", "reset_points", "update", "reset_centers")
FORMAT = "sktransformer.LearnedKMeansLayer"
VERSION = 1
_TILE = 1 << 22  # elements of one (queries, keys) attention tile at inference


class LearnedKMeansLayer(torch.nn.Module):
    """One learnable k-means transformer layer.

    Parameters
    ----------
    n_features, n_clusters : int
        The ``d`` and ``k`` the layer is built for (its weights are ``D x D``).
    scratch : bool, default=True
        Width ``D = d + k`` with one-hot slots (``True``) or ``D = d`` (the ablation).
    a : float, default=1.0
        Inverse temperature of the attention (fixed, not learned).
    dropout : float, default=0.01
        Dropout on the attention weights while training.
    generator : torch.Generator or None
        Draws the initial weights (uniform in ``+-1/sqrt(D)``, as ``nn.Linear``).
    """

    def __init__(self, n_features, n_clusters, *, scratch=True, a=1.0, dropout=0.01,
                 generator=None):
        super().__init__()
        self.n_features, self.n_clusters = int(n_features), int(n_clusters)
        self.scratch, self.a, self.dropout = bool(scratch), float(a), float(dropout)
        D = self.width
        bound = 1.0 / math.sqrt(D)
        self.weight = torch.nn.ParameterDict()
        for block in BLOCKS:
            for name in "QKV":
                w = (torch.rand(D, D, generator=generator) * 2 - 1) * bound
                b = (torch.rand(D, generator=generator) * 2 - 1) * bound
                self.weight[f"{block}_{name}"] = torch.nn.Parameter(w)
                self.weight[f"{block}_{name}_bias"] = torch.nn.Parameter(b)

    @property
    def width(self):
        return self.n_features + (self.n_clusters if self.scratch else 0)

    def embed(self, X, centers):
        """Point tokens ``[x; 0]`` (B, n, D) and center tokens ``[c; e_j]`` (B, k, D)."""
        if not self.scratch:
            return X, centers
        B, n, _ = X.shape
        k = centers.shape[1]
        Z = torch.cat([X, X.new_zeros(B, n, k)], -1)
        eye = torch.eye(k, dtype=X.dtype, device=X.device).expand(B, k, k)
        return Z, torch.cat([centers, eye], -1)

    def _project(self, block, name, tokens):
        return torch.nn.functional.linear(tokens, self.weight[f"{block}_{name}"],
                                          self.weight[f"{block}_{name}_bias"])

    def attend(self, block, queries, keys, generator=None):
        """``sum_j softmax_j(-a ||Q q - K k_j||^2 / sqrt(D)) V k_j`` for each query."""
        q = self._project(block, "Q", queries)
        k = self._project(block, "K", keys)
        v = self._project(block, "V", keys)
        scale = self.a / math.sqrt(self.width)
        k_sq = k.square().sum(-1).unsqueeze(-2)  # ||Q q||^2 is constant over keys: dropped
        rows = max(1, _TILE // max(1, k.shape[-2] * k.shape[0]))
        if self.training or q.shape[-2] <= rows:
            return self._weights(q, k, k_sq, scale, generator) @ v
        return torch.cat([self._weights(q[:, s:s + rows], k, k_sq, scale, None) @ v
                          for s in range(0, q.shape[-2], rows)], -2)

    def _weights(self, q, k, k_sq, scale, generator):
        w = torch.softmax((2 * q @ k.transpose(-1, -2) - k_sq) * scale, dim=-1)
        if self.training and self.dropout > 0:
            keep = torch.rand(w.shape, generator=generator, dtype=w.dtype) >= self.dropout
            w = w * keep / (1 - self.dropout)
        return w

    def step(self, X, centers, generator=None):
        """One layer from the embedding of ``X`` (B, n, d) and ``centers`` (B, k, d): the new
        centers (B, k, d). As in the circuit, the point stream adds the assign block (points
        attend to centers) and the reset block (points to points), both read from the old
        tokens; then the center stream adds the update block (centers attend to the new
        points) and the reset block (centers to centers)."""
        Z, W = self.embed(X, centers)
        Z = Z + self.attend("assign", Z, W, generator) + self.attend("reset_points", Z, Z,
                                                                      generator)
        W = (W + self.attend("update", W, Z, generator)
             + self.attend("reset_centers", W, W, generator))
        return W[..., :self.n_features]

    @classmethod
    def from_circuit(cls, n_features, n_clusters, *, gamma=20.0, a=1.0, dropout=0.01):
        """The layer set to the paper's construction (Theorem 2.1) at inverse temperature
        ``gamma``: soft Lloyd. A warm start for training; needs the scratch space."""
        from ._circuit import KMeansCircuit

        layer = cls(n_features, n_clusters, a=a, dropout=dropout)
        circuit = KMeansCircuit(n_features, n_clusters)
        scale = math.sqrt(gamma * math.sqrt(layer.width) / a)  # -a ||s(q - k)||^2 / sqrt(D)
        with torch.no_grad():
            for block, mats in circuit.blocks.items():
                for name, mat in mats.items():
                    factor = scale if name in "QK" else 1.0
                    layer.weight[f"{block}_{name}"].copy_(mat.to(torch.float32) * factor)
                    layer.weight[f"{block}_{name}_bias"].zero_()
        return layer

    def forward(self, X, centers, n_steps=1):
        """The centers after ``n_steps`` layers, re-embedding after each."""
        for _ in range(n_steps):
            centers = self.step(X, centers)
        return centers

    # -- files ---------------------------------------------------------------------------

    def config(self):
        return {"n_features": self.n_features, "n_clusters": self.n_clusters,
                "scratch": self.scratch, "a": self.a, "dropout": self.dropout}

    def save(self, path):
        """Write the weights (tensors and plain numbers only) to ``path``, atomically."""
        payload = {"format": FORMAT, "version": VERSION, **self.config(),
                   "state_dict": {k: v.detach().cpu().clone() for k, v in
                                  self.state_dict().items()}}
        tmp = f"{path}.tmp"
        torch.save(payload, tmp)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path):
        """Read a file written by :meth:`save`; anything else is a ``ValueError``.

        The file is read with ``weights_only=True``: tensors and plain containers, never
        arbitrary pickled objects, so a tampered file cannot run code.
        """
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True)
        except FileNotFoundError:
            raise
        except Exception as exc:  # truncated, corrupted or not a weights-only file
            raise ValueError(f"{path} is not a readable LearnedKMeansLayer weights file "
                             f"({type(exc).__name__}: {exc}).") from exc
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise ValueError(f"{path} is not a LearnedKMeansLayer weights file.")
        if payload.get("version") != VERSION:
            raise ValueError(f"{path} has weights format version {payload.get('version')}; "
                             f"this sktransformer reads version {VERSION}.")
        try:
            layer = cls(payload["n_features"], payload["n_clusters"],
                        scratch=payload["scratch"], a=payload["a"],
                        dropout=payload["dropout"])
            layer.load_state_dict(payload["state_dict"])
        except (KeyError, TypeError, RuntimeError) as exc:
            raise ValueError(f"{path} has missing or mis-shaped weights ({exc}).") from exc
        for name, value in layer.state_dict().items():
            if not torch.isfinite(value).all():
                raise ValueError(f"{path} has non-finite values in {name}.")
        return layer.eval()


def sq_distances(X, centers):
    """``||x_i - c_j||^2`` for batches: (B, n, d), (B, k, d) -> (B, n, k)."""
    return (X.square().sum(-1, keepdim=True) - 2 * X @ centers.transpose(-1, -2)
            + centers.square().sum(-1).unsqueeze(-2)).clamp(min=0)


def kmeans_objective(X, centers):
    """``sum_i min_j ||x_i - c_j||^2`` per task, shape (B,)."""
    return sq_distances(X, centers).amin(-1).sum(-1)


def smoothed_objective(X, centers, gamma):
    """The training loss: ``sum_i sum_j softmax_j(-gamma d_ij) d_ij`` per task, (B,).

    An upper bound of :func:`kmeans_objective` that is smooth in the centers, and tends to
    it as ``gamma -> inf``.
    """
    d = sq_distances(X, centers)
    return (torch.softmax(-gamma * d, dim=-1) * d).sum((-1, -2))


def lloyd_step(X, centers):
    """One exact Lloyd step on batches (the baseline of the learned layer)."""
    labels = sq_distances(X, centers).argmin(-1)
    onehot = torch.nn.functional.one_hot(labels, centers.shape[1]).to(X.dtype)
    count = onehot.sum(1).unsqueeze(-1)
    means = onehot.transpose(1, 2) @ X / count.clamp(min=1)
    return torch.where(count > 0, means, centers)


SHIPPED = os.path.join(os.path.dirname(__file__), "weights", "learned_d32_k10.pt")


def resolve_weights(weights):
    """``"learned"`` (the shipped layer), a path, or a :class:`LearnedKMeansLayer`."""
    if isinstance(weights, LearnedKMeansLayer):
        return weights
    return LearnedKMeansLayer.load(SHIPPED if weights == "learned" else weights)


def run_learned(layer, points, centers, *, max_iter, tol, verbose=0, runner=None):
    """Apply a learned layer up to ``max_iter`` times to the estimator's points.

    The layer was trained on tasks min-max scaled to ``[0, 1]^d``, so the points are scaled
    the same way (per feature) and the centers mapped back. Stops when the total squared
    center shift (in the data's units) is ``<= tol``; the labels are the closest centers.

    Returns
    -------
    centers, labels, inertia (float), n_iter (int)
    """
    from . import _lloyd

    X, shift = points.X, points.shift
    low = X.amin(0)
    span = X.amax(0) - low
    span = torch.where(span > 0, span, torch.ones_like(span))
    if next(layer.parameters()).device != X.device:
        layer = copy.deepcopy(layer).to(X.device)
    layer.eval()
    Xs = ((X - low) / span).to(torch.float32).unsqueeze(0)
    cs = ((centers + shift - low) / span).to(torch.float32).unsqueeze(0)
    span32 = span.to(torch.float32)
    for i in range(max_iter):
        new = layer.step(Xs, cs)
        center_shift = float(((new - cs) * span32).square().sum())
        cs = new
        if verbose > 1:
            logger.info(f"Iteration {i}, center shift {center_shift}.")
        if center_shift <= tol:
            break
    centers = cs[0].to(X.dtype) * span + low - shift
    labels, min_dist = _lloyd.assign(points, centers, runner=runner or _lloyd._SERIAL)
    return centers, labels, float(min_dist.sum()), i + 1
