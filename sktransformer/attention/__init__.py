"""Attention as a composition of plain functions: a score, a weighting, an average.

Torch only, no scikit-learn. Scores and weightings (``_scores``, ``_weights``, composed by
``attend``); weightings of a query over its own group of keys (``_grouped``, the center
updates of the clustering circuits); random-feature maps and linear attention over them
(``_features``, ``_linear``); kNN attention (``_knn``, ``_knn_grad``, ``_index``); the
CPU score tiles' product (``_matmul``).
"""

from ._attend import attend
from ._features import (
    FEATURE_MAPS,
    favor_exponent,
    favor_offset,
    features,
    features_pullback,
    initial_particles,
    n_particles,
    orthogonal_gaussian,
)
from ._grouped import (
    group_argmax,
    group_quantile,
    group_sparsemax,
    group_sums,
    gumbel,
    keep_incumbent,
)
from ._index import IVFIndex
from ._knn import knn_attention, rao_blackwell, sample_keys, topk_keys
from ._knn_grad import KNNAttention, knn_attention_grad
from ._linear import POSITIVE_MAPS, kernel_attention, positive_features
from ._matmul import matmul_nt, uses_onednn
from ._scores import SCORES, dot, get_score, neg_sq_euclidean
from ._weights import WEIGHTS, get_weight, hardmax, linear, softmax, sparsemax

__all__ = [
    "FEATURE_MAPS",
    "IVFIndex",
    "KNNAttention",
    "POSITIVE_MAPS",
    "SCORES",
    "WEIGHTS",
    "attend",
    "dot",
    "favor_exponent",
    "favor_offset",
    "features",
    "features_pullback",
    "get_score",
    "get_weight",
    "group_argmax",
    "group_quantile",
    "group_sparsemax",
    "group_sums",
    "gumbel",
    "hardmax",
    "initial_particles",
    "keep_incumbent",
    "kernel_attention",
    "knn_attention",
    "knn_attention_grad",
    "linear",
    "matmul_nt",
    "n_particles",
    "neg_sq_euclidean",
    "orthogonal_gaussian",
    "positive_features",
    "rao_blackwell",
    "sample_keys",
    "softmax",
    "sparsemax",
    "topk_keys",
    "uses_onednn",
]
