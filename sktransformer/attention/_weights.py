"""Weight functions: ``(scores (n, m), temperature) -> weights (n, m)``, rows sum to 1."""

import torch


def softmax(scores, temperature):
    """``softmax(scores / temperature)`` along the keys; ``temperature`` must be > 0.

    ``torch.softmax`` subtracts the row maximum first, so a small temperature (a large
    inverse temperature gamma = 1 / temperature, e.g. 1e4) neither overflows nor gives NaN.
    """
    return torch.softmax(scores / temperature, dim=-1)


def hardmax(scores, temperature=None):
    """The ``temperature -> 0`` limit of :func:`softmax`: uniform over the row's arg-max set.

    Uniform over ties is what the limit is, and what makes hard attention over a set of
    equally scored keys return their mean (the center update of the k-means circuit).
    """
    top = scores.amax(dim=-1, keepdim=True)
    weights = (scores == top).to(scores.dtype)
    return weights / weights.sum(dim=-1, keepdim=True)


def linear(scores, temperature=None):
    """Normalized linear attention, ``w_ij = s_ij / sum_j s_ij`` for non-negative scores.

    With one-hot or soft assignment scores this is the exact weighted mean at any
    temperature (the paper's linear center update).
    """
    return scores / scores.sum(dim=-1, keepdim=True)


WEIGHTS = {"softmax": softmax, "hardmax": hardmax, "linear": linear}


def get_weight(name):
    """The weight function registered under ``name``."""
    try:
        return WEIGHTS[name]
    except KeyError:
        raise ValueError(f"Unknown weighting {name!r}; choose one of {sorted(WEIGHTS)}.") from None
