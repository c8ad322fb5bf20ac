"""Choices made on held-out data: the split, the score of a feature map, Phase B's ``C``.

The particles climb the kernel-target alignment of the training rows, which a feature map
can raise by fitting those rows' labels (ever narrower kernels). What is kept is therefore
chosen on rows the dynamics never see: the validation error of a ridge regression of the
target codes on the features (closed form for a grid of penalties, from one ``N x N``
eigendecomposition), and, for the classifier, the validation log loss of its logistic
regression over a grid of ``C``.
"""

import math

import numpy as np
import torch

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

    The ridge (with an intercept) is fitted on the training rows for each penalty
    ``lam * n_train`` at once from the eigendecomposition of the centered ``Phi^T Phi``
    (float64), and scored on the validation rows.
    """
    Phi_train, Phi_val = Phi_train.double(), Phi_val.double()
    Y_train, Y_val = Y_train.double(), Y_val.double()
    mean, y_mean = Phi_train.mean(0), Y_train.mean(0)
    A = Phi_train - mean
    evals, evecs = torch.linalg.eigh(A.T @ A)
    AtB = evecs.T @ (A.T @ (Y_train - y_mean))
    P = (Phi_val - mean) @ evecs
    best = math.inf
    for lam in penalties:
        pred = P @ (AtB / (evals.clamp(min=0) + lam * len(A)).unsqueeze(1)) + y_mean
        best = min(best, float((pred - Y_val).square().sum(1).mean()))
    return best


def choose_C(model, Z, y, train, val, Cs):
    """The ``C`` of ``model`` (a warm-startable logistic regression) with the lowest
    validation log loss, and the losses.

    The model is fitted on ``Z[train]`` for each ``C`` in increasing order, each fit
    starting from the previous solution (``warm_start``), and scored on ``Z[val]``; ties go
    to the smaller ``C`` (the stronger penalty).
    """
    classes = np.unique(y)
    truth = np.searchsorted(classes, y[val])
    model = model.set_params(warm_start=True)
    order = np.argsort(Cs, kind="stable")
    losses = np.empty(len(Cs))
    for i in order:
        model.set_params(C=Cs[i]).fit(Z[train], y[train])
        proba = np.full((len(val), len(classes)), 1e-15)
        proba[:, np.searchsorted(classes, model.classes_)] = np.clip(
            model.predict_proba(Z[val]), 1e-15, 1.0)
        proba /= proba.sum(1, keepdims=True)
        losses[i] = -np.log(proba[np.arange(len(val)), truth]).mean()
    best = min(range(len(Cs)), key=lambda i: (losses[i], Cs[i]))
    return Cs[best], losses.tolist()
