"""Sequence classification tasks that need attention, generated in code."""

import numpy as np
from sklearn.utils import check_random_state


def _lengths(rng, n_samples, min_length, length):
    return rng.randint(min_length, length + 1, size=n_samples)


def make_order_task(n_samples=1000, length=32, n_tokens=16, *, min_length=None,
                    random_state=None):
    """Does token 1 come before token 2? Padded integer sequences and binary labels.

    Each sequence (length uniform in ``[min_length, length]``, padded with 0 at the end)
    holds token 1 and token 2 exactly once, at random positions, among filler tokens
    ``3 .. n_tokens - 1``. The label is whether 1 comes first: only the two tokens'
    positions matter, so a bag-of-tokens model is at chance and the model must relate them.

    Returns
    -------
    X : ndarray of shape (n_samples, length), int64
    y : ndarray of shape (n_samples,), int64
    """
    rng = check_random_state(random_state)
    min_length = min_length or max(2, length // 2)
    X = np.zeros((n_samples, length), dtype=np.int64)
    y = np.zeros(n_samples, dtype=np.int64)
    for i, n in enumerate(_lengths(rng, n_samples, min_length, length)):
        X[i, :n] = rng.randint(3, n_tokens, size=n)
        a, b = rng.choice(n, size=2, replace=False)
        X[i, a], X[i, b] = 1, 2
        y[i] = a < b
    return X, y


def make_parity_task(n_samples=1000, length=32, n_tokens=16, *, min_length=None,
                     random_state=None):
    """Is the number of marker tokens (token 1) odd? Padded integer sequences, binary labels.

    Markers appear with probability 1/4 at each position of a sequence of length uniform in
    ``[min_length, length]`` (padded with 0), among filler tokens ``2 .. n_tokens - 1``.
    Parity is a known hard case for attention (the answer flips with any one token).

    Returns
    -------
    X : ndarray of shape (n_samples, length), int64
    y : ndarray of shape (n_samples,), int64
    """
    rng = check_random_state(random_state)
    min_length = min_length or max(2, length // 2)
    X = np.zeros((n_samples, length), dtype=np.int64)
    for i, n in enumerate(_lengths(rng, n_samples, min_length, length)):
        X[i, :n] = np.where(rng.random_sample(n) < 0.25, 1, rng.randint(2, n_tokens, size=n))
    y = ((X == 1).sum(1) % 2).astype(np.int64)
    return X, y
