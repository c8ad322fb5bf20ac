"""Projected Langevin dynamics of the particles (the paper's Algorithm 1), and the one
function that trains particles on labeled samples, for every estimator that has them."""

import functools
import math

import torch

from ..attention import favor_offset
from ..utils import SMALL_OP, logger
from ._compiled import rff_steps
from ._hamiltonian import potential, squared_distances


def project_to_ball(W, radius):
    """Rows scaled back onto the ball ``||w|| <= radius`` (the compact domain Theta)."""
    if radius is None or math.isinf(radius):
        return W
    norm = W.norm(dim=1, keepdim=True)
    return W * torch.clamp(radius / norm.clamp(min=torch.finfo(W.dtype).tiny), max=1.0)


def pairwise_distances(W):
    """Minimum and mean distance between distinct particles: ``W (N, d)`` gives two floats,
    a stack ``W (S, N, d)`` two lists (from the Gram matrices)."""
    N = W.shape[-2]
    if N < 2:
        return (math.inf, math.inf) if W.dim() == 2 else ([math.inf] * len(W),) * 2
    d = squared_distances(W).sqrt_()
    mean = (d.sum((-2, -1)) - d.diagonal(dim1=-2, dim2=-1).sum(-1)) / (N * (N - 1))
    d.diagonal(dim1=-2, dim2=-1).fill_(math.inf)
    low = d.amin((-2, -1))
    return (float(low), float(mean)) if W.dim() == 2 else (low.tolist(), mean.tolist())


def langevin(potential, W, *, n_samples, n_iter, step_size, beta=math.inf, radius=None,
             batch_size=None, generator, verbose=0, progress=None, validate=None,
             validate_every=10, steps=None):
    """Run ``n_iter`` steps of ``w_k <- Proj(w_k - eta N dH/dw_k + sqrt(2 eta / beta) xi)``.

    ``potential(W, rows)`` returns ``(H, alignment, repulsion, dH/dW)`` on the data rows
    ``rows`` (a minibatch of ``batch_size``, drawn from ``generator`` each step; all rows
    when None), e.g. :func:`~sktransformer.kernels._hamiltonian.potential`.
    The gradient is taken per particle in the mean-field scaling (``N dH/dw_k``, the
    gradient of the particle's own potential), so ``step_size`` does not depend on ``N``.
    ``beta = inf`` is projected gradient descent. ``validate(W, step)``, when given, is
    called before the first step, every ``validate_every`` steps and after the last (it may
    change what ``potential`` computes, e.g. a global scale of the particles); a true
    return ends the run there (early stopping). ``steps(W, count, move_last, first=step)``,
    when given, runs ``count`` steps from ``W`` at once (those up to the next validation) in
    place of ``potential`` (the same steps compiled: full batch, no noise; see
    :func:`_torch_steps` for what it returns).

    Returns
    -------
    W : Tensor (N, d)
    history : dict of lists, per step: ``alignment, repulsion, hamiltonian,
        min_distance, mean_distance`` (before the step's move), and a last entry after the
        last step run.
    """
    if steps is None:
        noise = 0.0 if math.isinf(beta) else math.sqrt(2 * step_size / beta)
        steps = functools.partial(
            _torch_steps, potential, n_samples=n_samples, step_size=step_size, noise=noise,
            radius=radius, batch_size=batch_size, generator=generator, verbose=verbose)
    W, records, step = W.detach(), [], 0
    while True:
        if validate is not None and (step % validate_every == 0 or step == n_iter):
            if validate(W, step):
                n_iter = step  # told to stop: this step is the last
        last = step == n_iter
        stop = (step + 1 if last else n_iter if validate is None
                else min(n_iter, (step // validate_every + 1) * validate_every))
        W, record = steps(W, stop - step, not last, first=step)
        records.append(record)
        if last:
            break
        if progress is not None:
            progress.update(stop - step)
        step = stop
    h, a, e, low, mean = torch.cat(records).to(torch.float64).T.tolist()
    return W, {"alignment": a, "repulsion": e, "hamiltonian": h,
               "min_distance": low, "mean_distance": mean}


def _torch_steps(potential, W, count, move_last, *, first, n_samples, step_size, noise, radius,
                 batch_size, generator, verbose):
    """``count`` steps from ``W`` by torch (the first numbered ``first``): each records
    ``(H, A, E_s, min distance, mean distance)`` at the particles it starts from, then
    moves them (not after the last, unless ``move_last``). Returns the particles and the
    record ``(count, 5)``."""
    N, d = W.shape
    # the record is kept as tensors and read once per block of steps: a read per step (a
    # host sync on a GPU) and the distances' few ops per step cost more than the step's
    # own small products on few particles
    block = max(1, (1 << 22) // max(N * N, N * d))
    energies, distances, pending = [], ([], []), []

    def flush():
        low, mean = pairwise_distances(torch.stack(pending))
        distances[0].extend(low)
        distances[1].extend(mean)
        pending.clear()

    for i in range(count):
        rows = None
        if batch_size is not None and batch_size < n_samples:
            rows = torch.randperm(n_samples, generator=generator,
                                  device=generator.device)[:batch_size].to(W.device)
        h, a, e, grad = potential(W, rows)
        energies.append(torch.stack([h, a, e.to(h.dtype)]))
        pending.append(W)
        if len(pending) == block:
            flush()
        if verbose > 1:
            logger.info(f"step {first + i}: H {float(h):.6g}, alignment {float(a):.6g}")
        if i == count - 1 and not move_last:
            break
        W = W - step_size * N * grad
        if noise:
            xi = torch.randn(W.shape, generator=generator, dtype=W.dtype,
                             device=generator.device).to(W.device)
            W = W + noise * xi
        W = project_to_ball(W, radius)
    if pending:
        flush()
    record = torch.stack(energies).to(torch.float64)
    return W, torch.cat([record, torch.tensor(distances, dtype=torch.float64,
                                              device=record.device).T], 1)


def train_particles(kernel, X, Y, U, b=None, *, scale=1.0, alignment="normalized",
                    repulsion=0.1, s=1.0, eps=1e-3, n_iter=100, step_size=1.0,
                    beta=math.inf, radius=None, batch_size=None, generator, progress=None,
                    verbose=0, validate=None, validate_every=10):
    """Move particles by projected Langevin dynamics on minus the alignment plus repulsion.

    The features are ``features(kernel, X, W, b)`` at ``W = scale * U`` (FAVOR+'s exponent
    shifted by its maximum over the step's rows, a factor the normalized alignment ignores),
    the alignment is with the target codes ``Y``
    (:func:`~sktransformer.kernels.target_codes`), and the Riesz repulsion acts between the
    rows of ``U``, the particles in their own units. ``scale`` is a number, or a function of
    no argument read at every step (a bandwidth that ``validate`` moves during the run).

    Parameters
    ----------
    kernel : str
        One of :data:`~sktransformer.attention.FEATURE_MAPS`.
    X : Tensor of shape (n_samples, n_features)
    Y : Tensor of shape (n_samples, n_classes)
    U : Tensor of shape (n_particles, n_features)
        The initial particles.
    b : Tensor of shape (n_particles,) or None
        The phases of ``"rff"``.
    scale, alignment, repulsion, s, eps, n_iter, step_size, beta, radius, batch_size
        As in :class:`~sktransformer.ParticleKernelSampler`.
    generator : torch.Generator
    progress, verbose, validate, validate_every
        As in :func:`langevin`.

    Returns
    -------
    U : Tensor of shape (n_particles, n_features)
        The particles after the last step.
    history : dict of lists
        :func:`langevin`'s per-step record.
    """
    current = scale if callable(scale) else (lambda: scale)

    def drift(U, rows):
        Xb, Yb = (X, Y) if rows is None else (X[rows], Y[rows])
        factor = current()
        offset = favor_offset(Xb, U * factor) if kernel == "favor+" else 0.0
        return potential(kernel, Xb, U, b, Yb, scale=factor, offset=offset,
                         repulsion=repulsion, s=s, eps=eps, kind=alignment)

    steps = None
    N, d = U.shape
    if (kernel == "rff" and alignment == "normalized" and math.isinf(beta) and verbose < 2
            and (batch_size is None or batch_size >= len(X))
            and len(X) * N * max(N, d) < SMALL_OP):
        # the default dynamics on small data: compiled steps (see ._compiled)
        steps = rff_steps(X, Y, b, scale=current, step_size=step_size, radius=radius,
                          repulsion=repulsion, s=s, eps=eps)
    return langevin(drift, U, n_samples=len(X), n_iter=n_iter, step_size=step_size,
                    beta=beta, radius=radius, batch_size=batch_size, generator=generator,
                    verbose=verbose, progress=progress, validate=validate,
                    validate_every=validate_every, steps=steps)
