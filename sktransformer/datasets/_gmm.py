"""Gaussian-mixture clustering tasks, the training distribution of the learned layer."""

import numpy as np
import torch

from ..utils import make_generator

NOISES = ("gaussian", "cauchy", "gumbel", "laplace", "lognormal")


def _noise(kind, shape, generator):
    """Standard noise of one family, drawn from ``generator`` (float64)."""
    u = torch.rand(shape, dtype=torch.float64, generator=generator).clamp_(1e-12, 1 - 1e-12)
    if kind == "gaussian":
        return torch.randn(shape, dtype=torch.float64, generator=generator)
    if kind == "cauchy":
        return torch.tan(torch.pi * (u - 0.5))
    if kind == "gumbel":
        return -torch.log(-torch.log(u))
    if kind == "laplace":
        return -torch.sign(u - 0.5) * torch.log1p(-2 * (u - 0.5).abs())
    if kind == "lognormal":
        return torch.exp(torch.randn(shape, dtype=torch.float64, generator=generator))
    raise ValueError(f"Unknown noise {kind!r}; choose one of {NOISES}.")


def make_gmm_tasks(n_tasks, n_samples=512, n_features=32, n_clusters=10, *, sigma=0.1,
                   noise="gaussian", random_state=None, dtype=np.float32):
    """A batch of clustering tasks, each a fresh mixture (the paper's task distribution).

    Per task: ``n_clusters`` means drawn uniformly from ``[0, 1]^n_features``, equal
    weights (each point's component drawn uniformly), each point a mean plus ``sigma`` times
    standard noise per dimension; then each dimension is min-max scaled to ``[0, 1]``. The
    points come in random order, so the first ``n_clusters`` are random data points (the
    paper's initial centers).

    Parameters
    ----------
    n_tasks : int
        Number of tasks.
    n_samples : int, default=512
        Points per task.
    n_features : int, default=32
        Dimension ``d``.
    n_clusters : int, default=10
        Mixture components ``k``.
    sigma : float, default=0.1
        Scale of the noise (the standard deviation for ``"gaussian"``).
    noise : {"gaussian", "cauchy", "gumbel", "laplace", "lognormal"}, default="gaussian"
        The noise family, standard form scaled by ``sigma``.
    random_state : int, RandomState instance or None, default=None
        Seeds a local ``torch.Generator``.
    dtype : numpy dtype, default=np.float32

    Returns
    -------
    X : ndarray of shape (n_tasks, n_samples, n_features)
    y : ndarray of shape (n_tasks, n_samples)
        The component of each point.

    Examples
    --------
    >>> from sktransformer.datasets import make_gmm_tasks
    >>> X, y = make_gmm_tasks(4, n_samples=100, n_features=2, n_clusters=3, random_state=0)
    >>> X.shape, y.shape, float(X.min()), float(X.max())
    ((4, 100, 2), (4, 100), 0.0, 1.0)
    """
    if noise not in NOISES:
        raise ValueError(f"Unknown noise {noise!r}; choose one of {NOISES}.")
    for name, value in [("n_tasks", n_tasks), ("n_samples", n_samples),
                        ("n_features", n_features), ("n_clusters", n_clusters)]:
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if n_samples < n_clusters:
        raise ValueError(f"n_samples={n_samples} should be >= n_clusters={n_clusters}.")
    generator = make_generator(random_state, device="cpu")
    means = torch.rand(n_tasks, n_clusters, n_features, dtype=torch.float64,
                       generator=generator)
    # equal mixture weights: each point's component uniform and independent, so the points
    # come in random order and the first ``n_clusters`` are random data points
    y = torch.randint(0, n_clusters, (n_tasks, n_samples), generator=generator)
    X = torch.gather(means, 1, y.unsqueeze(-1).expand(-1, -1, n_features))
    X = X + sigma * _noise(noise, X.shape, generator)
    low, high = X.amin(1, keepdim=True), X.amax(1, keepdim=True)
    X = (X - low) / torch.where(high > low, high - low, torch.ones_like(high))
    return X.numpy().astype(dtype), y.numpy()
