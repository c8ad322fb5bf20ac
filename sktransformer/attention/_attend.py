"""One attention function composed from a score and a weighting."""

from ._scores import get_score
from ._weights import get_weight


def attend(queries, keys, values, *, score="euclidean", temperature=None, weight=None):
    """Attention ``sum_j w_ij v_j`` with ``w_i = weight(score(q_i, K))``.

    Parameters
    ----------
    queries : Tensor of shape (n_queries, d)
    keys : Tensor of shape (n_keys, d)
    values : Tensor of shape (n_keys, d_v)
    score : {"euclidean", "dot"} or callable, default="euclidean"
        ``"euclidean"`` scores ``-||q - k||^2``, ``"dot"`` scores ``q . k``.
    temperature : float or None, default=None
        Softmax temperature (the paper's gamma is ``1 / temperature``); ``None`` is the
        hard (arg-max) limit.
    weight : {"softmax", "hardmax", "linear"} or None, default=None
        The weighting; ``None`` takes ``"hardmax"`` when ``temperature`` is None and
        ``"softmax"`` otherwise.

    Returns
    -------
    Tensor of shape (n_queries, d_v)
    """
    score_fn = get_score(score) if isinstance(score, str) else score
    if weight is None:
        weight = "hardmax" if temperature is None else "softmax"
    weight_fn = get_weight(weight)
    return weight_fn(score_fn(queries, keys), temperature) @ values
