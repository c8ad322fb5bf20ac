"""Choices made on held-out data: the split, the score of a feature map, Phase B's ``C``.

The particles climb the kernel-target alignment of the training rows, which a feature map
can raise by fitting those rows' labels (ever narrower kernels). What is kept is therefore
chosen on rows the dynamics never see: the validation error of a ridge regression of the
target codes on the features (closed form for a grid of penalties: a batch of ``N x N``
Cholesky solves), and, for the classifier, the validation log loss of its logistic
regression over a grid of ``C``.
"""

import math

import numpy as np
import torch
from sklearn import config_context

PENALTIES = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def validation_split(y_index, fraction, generator):
    """Stratified split of ``range(len(y_index))``: ``(train_rows, val_rows)``, numpy.

    Each class gives ``round(fraction * count)`` rows to the validation part, at least one
    when it has two or more (a class of one stays in training). Drawn from ``generator``.
    """
    y_index = np.asarray(y_index)
    val = []
    for c in np.unique(y_index):
        rows = np.flatnonzero(y_index == c)
        order = torch.randperm(len(rows), generator=generator, device="cpu").numpy()
        take = min(len(rows) - 1, max(1, int(round(fraction * len(rows)))))
        val.append(rows[order[:take]])
    val = np.sort(np.concatenate(val))
    train = np.setdiff1d(np.arange(len(y_index)), val)
    return train, val


def ridge_validation_error(Phi_train, Y_train, Phi_val, Y_val, penalties=PENALTIES):
    """Smallest validation mean squared error of ridge regressions of ``Y`` on ``Phi``.

    The ridge (with an intercept) is fitted on the training rows for every penalty
    ``lam * n_train`` at once, a batch of Cholesky solves (float64) of the centered
    ``Phi^T Phi``, and scored on the validation rows. Non-finite features score ``inf``.
    Features ``(n, N)`` give a float; a stack ``(S, n, N)`` (several feature maps of the
    same rows) a list of ``S`` floats, from one batch of solves.
    """
    stacked = Phi_train.dim() == 3
    if not stacked:
        Phi_train, Phi_val = Phi_train.unsqueeze(0), Phi_val.unsqueeze(0)
    mean, y_mean = Phi_train.mean(1, keepdim=True), Y_train.mean(0)
    A = Phi_train - mean
    S, n, N = A.shape
    At = A.transpose(1, 2)
    # the products over the n rows in the features' dtype, the solves in float64: float32
    # rounding stays far below the smallest penalty
    gram = (At @ A).double()
    rhs = (At @ (Y_train - y_mean).to(A.dtype)).double()
    lam = torch.as_tensor(penalties, dtype=gram.dtype, device=gram.device) * n
    P, C = len(lam), rhs.shape[-1]
    systems = gram.unsqueeze(1).repeat(1, P, 1, 1)
    systems.diagonal(dim1=-2, dim2=-1).add_(lam.unsqueeze(1))
    L, info = torch.linalg.cholesky_ex(systems)  # (S, penalties, N, N)
    coef = torch.cholesky_solve(rhs.unsqueeze(1).expand(-1, P, -1, -1), L)
    # every penalty's coefficients side by side: one product per feature map (a broadcast
    # product would copy the validation features once per penalty)
    pred = (Phi_val - mean).double() @ coef.permute(0, 2, 1, 3).reshape(S, N, P * C)
    errors = (pred.view(S, -1, P, C).sub_((Y_val - y_mean).double().unsqueeze(1))
              .square_().sum(3).mean(1))
    errors = errors.masked_fill((info != 0) | ~torch.isfinite(errors), math.inf).amin(1)
    return errors.tolist() if stacked else float(errors[0])


def choose_C(model, Z, y, train, val, Cs):
    """The ``C`` of ``model`` (a warm-startable logistic regression) with the lowest
    validation log loss, the losses (``nan`` where not fitted), and that fit's
    ``(coef_, intercept_)`` (a start for the refit on all rows, :func:`refit_from`).

    The validation log loss of a regularization path is one-dipped in practice, so the
    search starts at the middle of the sorted grid and walks toward the lower loss (up
    first), fitting ``model`` on ``Z[train]`` from the previous solution (``warm_start``),
    until the loss stops falling: on a one-dipped path the choice of the whole grid, in
    about half its fits. Ties go to the smaller ``C`` (the stronger penalty).
    """
    classes = np.unique(y)
    truth = np.searchsorted(classes, y[val])
    model = model.set_params(warm_start=True)
    order = np.argsort(Cs, kind="stable")
    losses = np.full(len(Cs), np.nan)
    solutions = {}
    finite = bool(np.isfinite(Z).all())  # checked once, not at every fit

    def loss(position):
        i = order[position]
        if np.isnan(losses[i]):
            with config_context(assume_finite=finite, skip_parameter_validation=True):
                model.set_params(C=Cs[i]).fit(Z[train], y[train])
            solutions[i] = model.coef_.copy(), model.intercept_.copy()
            proba = np.full((len(val), len(classes)), 1e-15)
            proba[:, np.searchsorted(classes, model.classes_)] = np.clip(
                model.predict_proba(Z[val]), 1e-15, 1.0)
            proba /= proba.sum(1, keepdims=True)
            losses[i] = -np.log(proba[np.arange(len(val)), truth]).mean()
        return losses[i]

    def better(j, i):  # ties go to the smaller C
        current = loss(i)  # (fitted first: the next fit starts from it)
        return loss(j) < current or (loss(j) == current and j < i)

    middle = best = (len(Cs) - 1) // 2
    for step in (1, -1):  # up first: the larger C is the more common choice
        while 0 <= best + step < len(Cs) and better(best + step, best):
            best += step
        if best != middle:
            break
    return Cs[order[best]], losses.tolist(), solutions[order[best]]


def refit_from(model, Z, y, start):
    """``model`` (a logistic regression) fitted on ``Z``, its solver started at ``start``,
    ``(coef_, intercept_)`` of the same model fitted on part of the rows (``warm_start``:
    about half the iterations of a cold start); returned with ``warm_start=False``."""
    coef, intercept = start
    n_classes = len(np.unique(y))
    if coef.shape[0] == (1 if n_classes == 2 else n_classes):  # the same classes
        model.set_params(warm_start=True)
        model.coef_, model.intercept_ = coef.copy(), intercept.copy()
    return model.fit(Z, y).set_params(warm_start=False)
