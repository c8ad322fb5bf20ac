"""Score functions: ``(queries (n, d), keys (m, d)) -> scores (n, m)``, higher is closer."""

import torch


def neg_sq_euclidean(queries, keys):
    """Negative squared Euclidean distance, ``-||q_i - k_j||^2``.

    Computed as ``2 q.k - ||q||^2 - ||k||^2`` (one matmul) and clipped at 0 from above, so
    rounding never makes a distance negative.
    """
    q_sq = queries.square().sum(-1, keepdim=True)
    k_sq = keys.square().sum(-1)
    scores = torch.addmm(k_sq.unsqueeze(0), queries, keys.T, beta=-1.0, alpha=2.0)
    return scores.sub_(q_sq).clamp_(max=0.0)


def dot(queries, keys):
    """Dot-product score, ``<q_i, k_j>``."""
    return queries @ keys.T


SCORES = {"euclidean": neg_sq_euclidean, "dot": dot}


def get_score(name):
    """The score function registered under ``name``."""
    try:
        return SCORES[name]
    except KeyError:
        raise ValueError(f"Unknown score {name!r}; choose one of {sorted(SCORES)}.") from None
