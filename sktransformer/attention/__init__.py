"""Attention as a composition of plain functions: a score, a weighting, an average.

Torch only, no scikit-learn. An estimator variant is a choice of functions from these
registries, not a copy of a loop.
"""

from ._attend import attend
from ._index import IVFIndex
from ._knn import knn_attention, rao_blackwell, sample_keys, topk_keys
from ._knn_grad import KNNAttention, knn_attention_grad
from ._scores import SCORES, dot, get_score, neg_sq_euclidean
from ._weights import WEIGHTS, get_weight, hardmax, linear, softmax, sparsemax

__all__ = [
    "IVFIndex",
    "KNNAttention",
    "SCORES",
    "WEIGHTS",
    "attend",
    "dot",
    "get_score",
    "get_weight",
    "hardmax",
    "knn_attention",
    "knn_attention_grad",
    "linear",
    "neg_sq_euclidean",
    "rao_blackwell",
    "sample_keys",
    "softmax",
    "sparsemax",
    "topk_keys",
]
