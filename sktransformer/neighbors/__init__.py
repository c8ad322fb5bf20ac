"""kNN attention estimators: predictions as attention over the training set."""

from ._knn_regressor import KNNAttentionRegressor

__all__ = ["KNNAttentionRegressor"]
