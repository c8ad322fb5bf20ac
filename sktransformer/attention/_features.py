"""Random-feature maps ``phi(x; w)``: the particles ``w`` are the rows of ``W``.

Each map takes data ``X (..., n, d)``, particles ``W (N, d)`` and its fixed extras, and
returns features ``(..., n, n_features)`` scaled so that ``K(x, x') = phi(x) . phi(x')`` is
the empirical kernel ``(1/N) sum_k phi(x; w_k) phi(x'; w_k)``. All are differentiable in
``W`` (torch), shared by the kernel estimators and the linear attention of the sequence
models.
"""

import math

import torch

FEATURE_MAPS = ("rff", "rff_cossin", "favor+", "porf", "softmax")


def n_particles(kernel, n_components):
    """Particles behind ``n_components`` output features (cos/sin pairs take two)."""
    if kernel == "rff_cossin":
        if n_components % 2:
            raise ValueError(f"kernel='rff_cossin' makes features in cos/sin pairs: "
                             f"n_components={n_components} must be even.")
        return n_components // 2
    return n_components


def orthogonal_gaussian(n, d, *, generator, dtype=torch.float64):
    """``n`` rows, each block of ``d`` orthogonal, with the norms of Gaussian vectors
    (Performer's orthogonal random features): unbiased, lower-variance Gaussian rows."""
    device = generator.device
    blocks = []
    for start in range(0, n, d):
        g = torch.randn(d, d, generator=generator, dtype=dtype, device=device)
        q, r = torch.linalg.qr(g)
        # signs of R's diagonal made positive: without it Q is not uniform (Haar) over the
        # orthogonal group, and the rows are not uniform directions (a biased kernel)
        q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
        blocks.append(q.T[:min(d, n - start)])
    rows = torch.cat(blocks)
    norms = torch.randn(n, d, generator=generator, dtype=dtype, device=device).norm(
        dim=1, keepdim=True)
    return rows * norms


def initial_particles(kernel, n, d, *, gamma, generator, dtype=torch.float64):
    """Particles and offsets as the fixed-feature samplers draw them.

    RFF (scikit-learn's ``RBFSampler``): ``w ~ N(0, 2 gamma I)`` for the RBF kernel
    ``exp(-gamma ||x - x'||^2)``, offsets ``b ~ U(0, 2 pi)``. The positive maps: orthogonal
    Gaussian rows (unit variance), offsets unused.
    """
    device = generator.device
    if kernel in ("rff", "rff_cossin"):
        W = torch.randn(n, d, generator=generator, dtype=dtype, device=device) * math.sqrt(
            2 * gamma)
    else:
        W = orthogonal_gaussian(n, d, generator=generator, dtype=dtype)
    b = torch.rand(n, generator=generator, dtype=dtype, device=device) * 2 * math.pi
    return W, b


def features(kernel, X, W, b, *, offset=0.0):
    """``phi(X; W)``, shape (n, N) or (n, 2N) for ``"rff_cossin"``.

    ``"favor+"``: ``exp(w . x~ - ||x~||^2 / 2 - offset) / sqrt(N)``, ``x~ = x d^(-1/4)``,
    unbiased (up to the constant ``exp(-offset)``) for the softmax kernel ``exp(x~ . y~)``;
    ``offset`` keeps the exponent in range and is fixed at fit so that a sample's features do
    not depend on the batch. ``"porf"``: ``softplus(w . x~) + 1e-3``. ``"softmax"``: a
    softmax over the feature axis of ``w_k . x~`` (positive, bounded).
    """
    N = W.shape[0]
    if kernel == "rff":
        return math.sqrt(2.0 / N) * torch.cos(X @ W.T + b)
    if kernel == "rff_cossin":
        z = X @ W.T
        return torch.cat([torch.cos(z), torch.sin(z)], -1) / math.sqrt(N)
    if kernel == "favor+":
        return torch.exp(favor_exponent(X, W) - offset) / math.sqrt(N)
    z = (X * X.shape[-1] ** -0.25) @ W.T
    if kernel == "porf":
        return (torch.nn.functional.softplus(z) + 1e-3) / math.sqrt(N)
    if kernel == "softmax":
        return torch.softmax(z, dim=-1)
    raise ValueError(f"Unknown kernel {kernel!r}; choose one of {FEATURE_MAPS}.")


def features_pullback(kernel, X, W, b, Phi, d_phi, *, offset=0.0):
    """``dL/dW`` from ``dL/dPhi`` (``d_phi``) for ``Phi = features(kernel, X, W, b)``.

    Each map is ``Phi = f(X~ W^T)`` elementwise (softmax: along the feature axis), so the
    gradient is ``(d_phi * f'(Z))^T X~``; ``Phi`` is passed in to reuse it.
    """
    N = W.shape[0]
    if kernel == "rff":
        dz = d_phi * (-math.sqrt(2.0 / N)) * torch.sin(X @ W.T + b)
        return dz.T @ X
    if kernel == "rff_cossin":
        cos, sin = Phi[..., :N], Phi[..., N:]  # already divided by sqrt(N)
        dz = sin * -d_phi[..., :N] + cos * d_phi[..., N:]
        return dz.T @ X
    x = X * X.shape[-1] ** -0.25
    if kernel == "favor+":
        dz = d_phi * Phi
    elif kernel == "porf":
        dz = d_phi * torch.sigmoid(x @ W.T) / math.sqrt(N)
    elif kernel == "softmax":
        dz = Phi * (d_phi - (d_phi * Phi).sum(-1, keepdim=True))
    else:
        raise ValueError(f"Unknown kernel {kernel!r}; choose one of {FEATURE_MAPS}.")
    return dz.T @ x


def favor_exponent(X, W):
    """The exponent of ``"favor+"``: ``w . x~ - ||x~||^2 / 2``, ``x~ = x d^(-1/4)``."""
    x = X * X.shape[-1] ** -0.25
    return x @ W.T - 0.5 * x.square().sum(-1, keepdim=True)


def favor_offset(X, W):
    """The largest exponent of ``"favor+"`` on X, subtracted so that exp stays finite."""
    return float(favor_exponent(X, W).max())
