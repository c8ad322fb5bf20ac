"""The energy the particles descend: minus the kernel-target alignment, plus repulsion.

``H(W) = -A(W) + lambda / (2 N^2) sum_{j != k} W_s(w_j - w_k)`` with the Riesz
``s``-energy ``W_s(z) = (||z||^2 + eps^2)^(-s/2)`` (``s = 0``: ``-log(||z||^2 + eps^2) / 2``).
The alignment is computed from the features, never from the ``n x n`` kernel matrix:
``y^T K y = ||Phi^T y||^2``.

:func:`hamiltonian` is the definition (autograd can differentiate it); :func:`potential`
returns the same value with its gradient in closed form, a few matrix products per step
instead of an autograd graph: what the dynamics run on.
"""

import math

import torch

from ..attention import features, features_pullback

ALIGNMENTS = ("uncentered", "centered", "normalized")


def target_codes(y_index, n_classes, dtype=torch.float64):
    """Targets ``Y (n, C)``: one-hot minus ``1/C``. For two classes this is ``+-1/2`` in
    each column, so ``Y Y^T = y y^T / 2`` with ``y = +-1`` (the binary alignment)."""
    Y = torch.nn.functional.one_hot(y_index, n_classes).to(dtype)
    return Y - 1.0 / n_classes


def alignment(Phi, Y, kind="centered"):
    """Kernel-target alignment of ``K = Phi Phi^T`` with ``Y Y^T``.

    ``"uncentered"``: ``<K, YY^T> / n^2``. ``"centered"``: the same with ``K`` and the
    targets centered (``H K H``, ``H = I - 11^T / n``; Cortes, Mohri & Rostamizadeh, 2012).
    ``"normalized"``: centered and divided by ``||K_c||_F ||YY^T_c||_F`` (scale-free, the
    cosine of the two matrices, in [-1, 1]; matters for the exponential feature maps).
    """
    n = Phi.shape[0]
    if kind != "uncentered":
        Phi = Phi - Phi.mean(0)
        Y = Y - Y.mean(0)
    value = (Phi.T @ Y).square().sum() / n**2
    if kind == "normalized":
        k_norm = (Phi.T @ Phi).norm() / n
        y_norm = (Y.T @ Y).norm() / n
        value = value / (k_norm * y_norm).clamp(min=torch.finfo(Phi.dtype).tiny)
    return value


def riesz_energy(W, s=1.0, eps=1e-3):
    """``1 / (2 N^2) sum_{j != k} W_s(w_j - w_k)`` (times lambda in the Hamiltonian).

    Computed in float64 from the Gram matrix (``N x N``, never ``N x N x d``)."""
    N = W.shape[0]
    W = W.double()
    norms = W.square().sum(1)
    sq = (norms.unsqueeze(1) + norms.unsqueeze(0) - 2 * W @ W.T).clamp(min=0) + eps**2
    pair = -0.5 * torch.log(sq) if s == 0 else sq.pow(-s / 2)
    pair = pair.masked_fill(torch.eye(N, dtype=torch.bool, device=W.device), 0.0)
    return pair.sum() / (2 * N**2)


def hamiltonian(Phi, Y, W, *, repulsion, s=1.0, eps=1e-3, kind="centered"):
    """``H = -A + lambda E_s``; returns ``(H, A, E_s)`` as tensors."""
    a = alignment(Phi, Y, kind)
    e = riesz_energy(W, s, eps).to(a.dtype)
    return -a + repulsion * e, a, e


def alignment_grad(Phi, Y, kind="centered"):
    """``(A, dA/dPhi)``: :func:`alignment` and its gradient in the features, closed form.

    With ``M = Phi_c^T Y_c``: uncentered and centered ``dA = 2 Y M^T / n^2`` (centered
    targets have zero column means, so the centering of ``Phi`` drops out); normalized
    also divides by the norms and removes the part along ``Phi_c G``, ``G = Phi_c^T Phi_c``.
    """
    n = Phi.shape[0]
    if kind != "uncentered":
        Phi = Phi - Phi.mean(0)
        Y = Y - Y.mean(0)
    M = Phi.T @ Y
    value = M.square().sum() / n**2
    if kind != "normalized":
        return value, (Y @ M.T).mul_(2.0 / n**2)
    # one product-and-sum for the gradient, its two terms' factors as numbers
    G = Phi.T @ Phi
    tiny = torch.finfo(Phi.dtype).tiny
    g_norm = max(float(G.norm()), tiny)
    y_norm = float((Y.T @ Y).norm()) / n
    denominator = max(g_norm / n * y_norm, tiny)
    value = value / denominator
    along = float(value) * y_norm * (2.0 / n) / g_norm
    grad = torch.addmm(Phi @ G, Y, M.T, beta=-along / denominator,
                       alpha=2.0 / n**2 / denominator)
    return value, grad


def squared_distances(W):
    """Squared distances between the rows of ``W (N, d)``, or within each of a stack
    ``(S, N, d)``, from the Gram matrix (clamped at 0: never ``N x N x d``)."""
    gram = W @ W.transpose(-1, -2)
    norms = gram.diagonal(dim1=-2, dim2=-1)
    return (norms.unsqueeze(-1) + norms.unsqueeze(-2)).sub_(gram, alpha=2).clamp_(min=0)


def riesz_grad(W, s=1.0, eps=1e-3):
    """``(E_s, dE_s/dW)``: :func:`riesz_energy` and its gradient, closed form (float64).

    ``dE/dw_j = (2 / N^2) sum_k g'(d_jk) (w_j - w_k)`` with ``g`` the pair energy as a
    function of the softened squared distance ``d_jk``."""
    N = W.shape[0]
    W64 = W.double()
    # no pair with itself: its terms vanish
    sq = squared_distances(W64).add_(eps**2).fill_diagonal_(math.inf)
    if s == 0:
        slope = sq.reciprocal().mul_(-0.5)
        pair = torch.log(sq).mul_(-0.5).fill_diagonal_(0.0)
    else:
        pair = sq.pow(-s / 2)
        slope = (pair / sq).mul_(-s / 2)
    grad = (slope.sum(1, keepdim=True) * W64).sub_(slope @ W64).mul_(2.0 / N**2)
    return pair.sum() / (2 * N**2), grad.to(W.dtype)


def potential(kernel, X, U, b, Y, *, scale=1.0, offset=0.0, repulsion=0.1, s=1.0, eps=1e-3,
              kind="centered"):
    """``(H, A, E_s, dH/dU)`` for the particles ``W = scale * U``, closed form.

    ``A`` is the alignment of ``features(kernel, X, W, b, offset=offset)`` with ``Y``
    (``offset`` held fixed) and ``E_s`` the repulsion between the rows of ``U``: with
    ``scale = 1`` this is ``hamiltonian(...)`` and its gradient; a separate ``scale`` (the
    learned bandwidth) keeps the repulsion in the particles' own units. The alignment's
    gradient in the features is pulled back by the feature map's derivative.
    """
    W = U * scale
    Phi = features(kernel, X, W, b, offset=offset)
    a, d_phi = alignment_grad(Phi, Y, kind)
    grad = -scale * features_pullback(kernel, X, W, b, Phi, d_phi, offset=offset)
    e, d_rep = riesz_grad(U, s, eps)  # recorded even without repulsion (a diagnostic)
    e = e.to(a.dtype)
    if repulsion:
        grad = grad + repulsion * d_rep
    return -a + repulsion * e, a, e, grad
