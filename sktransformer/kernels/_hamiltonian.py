"""The energy the particles descend: minus the kernel-target alignment, plus repulsion.

``H(W) = -A(W) + lambda / (2 N^2) sum_{j != k} W_s(w_j - w_k)`` with the Riesz
``s``-energy ``W_s(z) = (||z||^2 + eps^2)^(-s/2)`` (``s = 0``: ``-log(||z||^2 + eps^2) / 2``).
The alignment is computed from the features, never from the ``n x n`` kernel matrix:
``y^T K y = ||Phi^T y||^2``.
"""

import torch

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
    """``1 / (2 N^2) sum_{j != k} W_s(w_j - w_k)`` (times lambda in the Hamiltonian)."""
    N = W.shape[0]
    sq = (W.unsqueeze(1) - W.unsqueeze(0)).square().sum(-1) + eps**2
    pair = -0.5 * torch.log(sq) if s == 0 else sq.pow(-s / 2)
    off = ~torch.eye(N, dtype=torch.bool, device=W.device)
    return pair[off].sum() / (2 * N**2)


def hamiltonian(Phi, Y, W, *, repulsion, s=1.0, eps=1e-3, kind="centered"):
    """``H = -A + lambda E_s``; returns ``(H, A, E_s)`` as tensors."""
    a = alignment(Phi, Y, kind)
    e = riesz_energy(W, s, eps)
    return -a + repulsion * e, a, e
