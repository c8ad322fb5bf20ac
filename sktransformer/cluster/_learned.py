"""The k-means circuit with every projection learned: a clustering algorithm found by training.

Same tokens and the same four blocks as :class:`~sktransformer.cluster.KMeansCircuit`
(assign, reset_points, update, reset_centers), but each block's ``Q, K, V`` is a learnable
``D x D`` linear map with bias and the attention is
``softmax(-a ||Q q - K k||^2 / sqrt(D))``, the paper's learned layer. ``D = d + k`` (the
one-hot scratch space) or ``D = d`` (the ablation without it). One call of :meth:`step` is
one layer; applying it ``T`` times, re-embedding the new centers after each, is the learned
algorithm. Weights are saved and loaded as tensors only (``torch.load(weights_only=True)``).

One addition to the paper's layer (``normalize=True``): each task's points and centers are
divided by the task's robust spread before the blocks and the result multiplied back, as a
transformer normalizes its tokens. The layer is then equivariant to the scale of a task, and
one temperature fits tasks of every size and noise family.
"""

import copy
import hashlib
import io
import math
import os
import warnings
from numbers import Integral, Real

import torch
from sklearn.exceptions import ConvergenceWarning

from ..attention import get_score
from ..utils import logger

BLOCKS = ("assign", "reset_points", "update", "reset_centers")
FORMAT = "sktransformer.LearnedKMeansLayer"
VERSION = 3  # 3: a SHA-256 of the archive; 2 added ``normalize``; 1 and 2 still load
# A version-3 file: MAGIC, the SHA-256 of the rest, then torch.save's archive. Earlier files
# are the bare archive (a zip: b"PK"), which no single flipped bit makes of MAGIC.
MAGIC = b"SKTW"
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_TILE = 1 << 22  # elements of one (queries, keys) attention tile at inference
_EUCLIDEAN = get_score("euclidean")


def check_config(n_features, n_clusters, scratch=True, normalize=True, a=1.0, dropout=0.01):
    """Validate a layer's settings (from a caller or a file); raise ``ValueError``."""
    for name, value in (("n_features", n_features), ("n_clusters", n_clusters)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    for name, value in (("scratch", scratch), ("normalize", normalize)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}.")
    if isinstance(a, bool) or not isinstance(a, Real) or not 0 < a < math.inf:
        raise ValueError(f"a must be a positive finite number, got {a!r}.")
    if isinstance(dropout, bool) or not isinstance(dropout, Real) or not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}.")


def _state_shapes(width):
    """The shape of every tensor of a layer's ``state_dict``, without making the layer."""
    return {f"weight.{block}_{name}{suffix}": (width,) if suffix else (width, width)
            for block in BLOCKS for name in "QKV" for suffix in ("", "_bias")}


def spread(X):
    """A task's robust scale, shape (B, 1, 1): the square root of the median squared distance
    of its points to their coordinate-wise median (1 where that is 0)."""
    center = X.median(-2, keepdim=True).values
    s = (X - center).square().sum(-1).median(-1).values.sqrt()
    return torch.where(s > 0, s, torch.ones_like(s))[..., None, None]


class LearnedKMeansLayer(torch.nn.Module):
    """One learnable k-means transformer layer.

    Parameters
    ----------
    n_features, n_clusters : int
        The ``d`` and ``k`` the layer is built for (its weights are ``D x D``).
    scratch : bool, default=True
        Width ``D = d + k`` with one-hot slots (``True``) or ``D = d`` (the ablation).
    normalize : bool, default=True
        Divide each task by its :func:`spread` before the blocks (and multiply the new
        centers back); ``False`` is the paper's layer as written.
    a : float, default=1.0
        Inverse temperature of the attention (fixed, not learned).
    dropout : float, default=0.01
        Dropout on the attention weights while training.
    generator : torch.Generator or None
        Draws the initial weights (uniform in ``+-1/sqrt(D)``, as ``nn.Linear``).

    Examples
    --------
    >>> import torch
    >>> from sktransformer.cluster import LearnedKMeansLayer
    >>> from sktransformer.datasets import make_gmm_tasks
    >>> X = torch.from_numpy(make_gmm_tasks(2, 100, 4, 3, random_state=0)[0])
    >>> layer = LearnedKMeansLayer.from_circuit(4, 3).eval()
    >>> layer(X, X[:, :3], n_steps=20).shape
    torch.Size([2, 3, 4])
    """

    def __init__(self, n_features, n_clusters, *, scratch=True, normalize=True, a=1.0,
                 dropout=0.01, generator=None):
        super().__init__()
        check_config(n_features, n_clusters, scratch, normalize, a, dropout)
        self.n_features, self.n_clusters = int(n_features), int(n_clusters)
        self.scratch, self.normalize = scratch, normalize
        self.a, self.dropout = float(a), float(dropout)
        D = self.width
        bound = 1.0 / math.sqrt(D)
        self.weight = torch.nn.ParameterDict()
        for block in BLOCKS:
            for name in "QKV":
                w = (torch.rand(D, D, generator=generator) * 2 - 1) * bound
                b = (torch.rand(D, generator=generator) * 2 - 1) * bound
                self.weight[f"{block}_{name}"] = torch.nn.Parameter(w)
                self.weight[f"{block}_{name}_bias"] = torch.nn.Parameter(b)
        self._initial = self.fingerprint()

    def fingerprint(self):
        """A number that changes with any parameter: whether the layer is still its random
        initialization (never trained nor loaded)."""
        with torch.no_grad():
            return float(sum(p.double().square().sum() + p.double().sum()
                             for p in self.parameters()))

    @property
    def untrained(self):
        return self.fingerprint() == getattr(self, "_initial", None)

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
        k = _EUCLIDEAN.keys(self._project(block, "K", keys))  # the score's token algebra
        v = self._project(block, "V", keys)
        scale = _EUCLIDEAN.logit_scale * self.a / math.sqrt(self.width)
        rows = max(1, _TILE // max(1, k.shape[-2] * k.shape[0]))
        if self.training or q.shape[-2] <= rows:
            return self._weights(q, k, scale, generator) @ v
        return torch.cat([self._weights(q[:, s:s + rows], k, scale, None) @ v
                          for s in range(0, q.shape[-2], rows)], -2)

    def _weights(self, q, keys, scale, generator):
        # ||Q q||^2 is constant over the keys: the softmax drops it
        w = torch.softmax((_EUCLIDEAN.queries(q) @ keys.transpose(-1, -2)) * scale, dim=-1)
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
        s = spread(X) if self.normalize else 1.0
        Z, W = self.embed(X / s, centers / s)
        Z = Z + self.attend("assign", Z, W, generator) + self.attend("reset_points", Z, Z,
                                                                      generator)
        W = (W + self.attend("update", W, Z, generator)
             + self.attend("reset_centers", W, W, generator))
        return W[..., :self.n_features] * s

    @classmethod
    def from_circuit(cls, n_features, n_clusters, *, gamma=4.0, update_gamma=2.5,
                     normalize=True, a=1.0, dropout=0.0):
        """The layer set to the paper's construction (Theorem 2.1): soft Lloyd.

        ``gamma`` is the inverse temperature of the blocks that compare positions (assign,
        reset_points), in units of the task's spread when ``normalize``; ``update_gamma``
        that of the blocks that compare one-hot assignments (update, reset_centers). Both
        infinite is Lloyd; the defaults are the values :class:`LayerTrainer`'s search finds
        on the paper's tasks. A warm start for training; needs the scratch space.
        """
        from ._circuit import KMeansCircuit

        layer = cls(n_features, n_clusters, normalize=normalize, a=a, dropout=dropout)
        circuit = KMeansCircuit(n_features, n_clusters)
        for name, value in (("gamma", gamma), ("update_gamma", update_gamma)):
            if isinstance(value, bool) or not isinstance(value, Real) or not value > 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}.")
        with torch.no_grad():
            for block, mats in circuit.blocks.items():
                g = gamma if block in ("assign", "reset_points") else update_gamma
                scale = math.sqrt(g * math.sqrt(layer.width) / a)  # -a ||s(q-k)||^2 / sqrt(D)
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
                "scratch": self.scratch, "normalize": self.normalize, "a": self.a,
                "dropout": self.dropout}

    def save(self, path):
        """Write the weights (tensors and plain numbers only) to ``path``, atomically, with
        a SHA-256 of the content that :meth:`load` checks."""
        payload = {"format": FORMAT, "version": VERSION, **self.config(),
                   "state_dict": {k: v.detach().cpu().clone() for k, v in
                                  self.state_dict().items()}}
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as f:
            f.write(pack(payload))
        os.replace(tmp, path)

    @classmethod
    def shipped(cls):
        """The layer shipped with the package (d = 32, k = 10; ``weights="learned"``)."""
        return cls.load(SHIPPED)

    @classmethod
    def load(cls, path):
        """Read a file written by :meth:`save`; anything else is a ``ValueError``.

        The file is read with ``weights_only=True``: tensors and plain containers, never
        arbitrary pickled objects, so a tampered file cannot run code. The settings are
        validated and every tensor's shape checked against them before the layer is made,
        so a file cannot make it allocate more than the file holds.
        """
        if os.path.isdir(path):
            raise ValueError(f"{path} is a directory, not a LearnedKMeansLayer weights file "
                             f"(written by LearnedKMeansLayer.save or LayerTrainer).")
        with open(path, "rb") as f:
            payload, hashed = unpack(f.read(), path)
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise ValueError(f"{path} is not a LearnedKMeansLayer weights file.")
        version = payload.get("version")
        if version not in ((VERSION,) if hashed else (1, 2)):
            raise ValueError(f"{path} has weights format version {version!r}; this "
                             f"sktransformer reads versions 1 and 2 (a bare archive) and "
                             f"{VERSION} (with its SHA-256).")
        names = ("n_features", "n_clusters", "scratch", "normalize", "a", "dropout")
        config = {name: payload.get(name) for name in names}
        if version == 1:
            config["normalize"] = False  # written before the normalization existed
        try:
            check_config(**config)
        except ValueError as exc:
            raise ValueError(f"{path} has invalid settings: {exc}") from None
        state = payload.get("state_dict")
        width = config["n_features"] + (config["n_clusters"] if config["scratch"] else 0)
        expected = _state_shapes(width)
        if not isinstance(state, dict) or set(state) != set(expected):
            raise ValueError(f"{path} has missing or unexpected weights: it should hold "
                             f"exactly {sorted(expected)}.")
        for name, shape in expected.items():
            value = state[name]
            if (not isinstance(value, torch.Tensor) or value.layout != torch.strided
                    or value.dtype not in _FLOATS):
                raise ValueError(f"{path}: {name} is not a dense tensor of float16, "
                                 f"bfloat16, float32 or float64.")
            if tuple(value.shape) != shape:
                raise ValueError(f"{path} has missing or mis-shaped weights: {name} has shape "
                                 f"{tuple(value.shape)}, the settings make it {shape}.")
            if not torch.isfinite(value).all():
                raise ValueError(f"{path} has non-finite values in {name}.")
        layer = cls(**config)
        layer.load_state_dict(state)
        return layer.eval()


def pack(payload):
    """A weights file's bytes (version 3): MAGIC, the SHA-256 of the archive, the archive."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    archive = buffer.getvalue()
    return MAGIC + hashlib.sha256(archive).digest() + archive


def unpack(data, path):
    """The payload of a weights file's bytes, read tensors-only, and whether it was hashed:
    a version-3 file's SHA-256 must match (a flipped bit anywhere is a ``ValueError``); an
    earlier file is the bare archive."""
    hashed = data[:len(MAGIC)] == MAGIC
    if hashed:
        digest, data = data[len(MAGIC):len(MAGIC) + 32], data[len(MAGIC) + 32:]
        if hashlib.sha256(data).digest() != digest:
            raise ValueError(f"{path} is a damaged LearnedKMeansLayer weights file: its "
                             f"content does not match its SHA-256.")
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True), hashed
    except Exception as exc:  # truncated, corrupted or not a weights-only file
        raise ValueError(f"{path} is not a readable LearnedKMeansLayer weights file "
                         f"({type(exc).__name__}: {exc}).") from exc


def sq_distances(X, centers):
    """``||x_i - c_j||^2`` for batches: (B, n, d), (B, k, d) -> (B, n, k)."""
    return -_EUCLIDEAN(X, centers)


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


# a learned fit whose inertia passes its initial centers' this many times is reported: a
# layer that suits the data lowers it (Lloyd's layers never raise it)
DEGENERATE = 2.0


def run_learned(layer, points, centers, *, max_iter, tol, verbose=0, runner=None):
    """Apply a learned layer up to ``max_iter`` times to the estimator's points.

    The layer was trained on tasks min-max scaled to ``[0, 1]^d``, so the points are scaled
    the same way (per feature) and the centers mapped back. Stops when the total squared
    center shift (in the data's units) is ``<= tol``; the labels are the closest centers.
    A ``ConvergenceWarning`` says when the inertia ends above ``DEGENERATE`` times that of
    the initial centers.

    Returns
    -------
    centers, labels, inertia (float), n_iter (int)
    """
    from . import _lloyd

    if layer.untrained:
        warnings.warn("The learned layer (weights=...) is still its random initialization: "
                      "its centers mean nothing. Train it first (LayerTrainer, or "
                      "weights='learned' for the shipped one).", UserWarning, stacklevel=4)
    X, shift = points.X, points.shift
    runner = runner or _lloyd._SERIAL
    start = float(_lloyd.assign(points, centers, runner=runner)[1].sum())
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
        if not torch.isfinite(new).all():
            raise ValueError(
                f"The learned layer gave non-finite centers at layer {i + 1}: its weights "
                f"overflow on this data (a damaged weights file, or a layer trained for "
                f"another distribution). Retrain it with LayerTrainer, or use weights=None.")
        center_shift = float(((new - cs) * span32).square().sum())
        cs = new
        if verbose:
            logger.info(f"Iteration {i}, center shift {center_shift}.")
        if center_shift <= tol:
            break
    centers = cs[0].to(X.dtype) * span + low - shift
    labels, min_dist = _lloyd.assign(points, centers, runner=runner)
    inertia = float(min_dist.sum())
    if inertia > DEGENERATE * start:
        warnings.warn(
            f"The learned layer made the clustering worse: inertia {inertia:.3g} against "
            f"{start:.3g} at its initial centers. Its weights do not suit this data (an "
            f"untrained layer, or one trained for another distribution); retrain it with "
            f"LayerTrainer, or use weights=None for Lloyd's layers.", ConvergenceWarning,
            stacklevel=2)
    return centers, labels, inertia, i + 1
