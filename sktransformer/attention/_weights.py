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


def sparsemax(scores, temperature=1.0):
    """Sparsemax (Martins & Astudillo, 2016) of ``scores / temperature`` along the keys.

    The Euclidean projection of the scaled scores onto the probability simplex:
    ``w = max(z - tau, 0)`` with ``tau`` chosen so that the row sums to 1. Weights are exactly
    zero outside the top of the row; as ``temperature -> 0`` it tends to the arg-max, and it
    is invariant to adding a constant to a row. Used by robust k-means.
    """
    z = scores / (1.0 if temperature is None else temperature)
    z_sorted, _ = torch.sort(z, dim=-1, descending=True)
    cumulative = z_sorted.cumsum(dim=-1) - 1.0
    rank = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    support = (z_sorted * rank > cumulative).to(z.dtype)  # a prefix of the sorted row
    size = support.sum(dim=-1, keepdim=True)
    tau = cumulative.gather(-1, size.long() - 1) / size
    return (z - tau).clamp_(min=0.0)


WEIGHTS = {"softmax": softmax, "hardmax": hardmax, "linear": linear, "sparsemax": sparsemax}


def get_weight(name):
    """The weight function registered under ``name``."""
    try:
        return WEIGHTS[name]
    except KeyError:
        raise ValueError(f"Unknown weighting {name!r}; choose one of {sorted(WEIGHTS)}.") from None
